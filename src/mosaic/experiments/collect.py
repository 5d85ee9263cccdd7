"""An experiment's cells collected for its report (:mod:`mosaic.experiments.report`): each cell's configuration, env,
seed, state and run, read from the experiment's store and the run store, as a :class:`ReportInput`."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from mosaic.errors import UserError
from mosaic.experiments.report.inputs import ReportCell, ReportInput, StudyInput, StudyTrial
from mosaic.experiments.spec import BEST, MEASURE, Score
from mosaic.experiments.store import Attempt, Experiment
from mosaic.runs import RunStore
from mosaic.workerkit.run_fields import summarize


def report_input(exp: Experiment, home: Path | str | None = None) -> ReportInput:
    """What ``mosaic experiment report`` writes about ``exp``: every cell, with its completed run if it has one."""
    from mosaic.experiments.coordinator import cell_states

    store = RunStore(home)
    cells = exp.cells()
    states = cell_states(exp, cells)
    spec: dict[str, Any] = exp.spec
    score = spec.get("score") or {}
    report = spec.get("report") or {}
    out = []
    for cell in exp.plan.cells:
        if cell.trial is not None:  # a study's tuning cells: its own section of the report, never its comparison
            continue
        state = cells[cell.cell_id]
        last = state.last
        run_id = last.run_id if last else None
        run_dir = store.path_for(run_id) if run_id and store.exists(run_id) else None
        before = _continued_from(store, state.attempts) if run_dir is not None else ()
        summary = summarize(cell.config, worker=cell.worker)
        out.append(ReportCell(cell_id=cell.cell_id, configuration=cell.configuration, env=cell.env, seed=cell.seed,
                              status=states[cell.cell_id], run_id=run_id, run_dir=run_dir,
                              settings=dict(cell.settings), worker=cell.worker, algorithm=summary.algorithm,
                              budget=summary.budget, before=before, baseline=cell.baseline))
    normalise = {env: (None if v["random"] == MEASURE else float(v["random"]),
                       None if v["reference"] == BEST else float(v["reference"]))
                 for env, v in (spec.get("normalise") or {}).items()}
    return ReportInput(name=exp.name, spec=spec, cells=out, metric=score.get("metric", "episode_return_mean"),
                       higher_is_better=bool(score.get("higher_is_better", True)), normalisation=normalise or None,
                       final_fraction=float(score.get("final_fraction", 0.1)),
                       level_within=float(score.get("level_within", Score.level_within)),
                       reps=int(report.get("reps", 2000)), confidence=float(report.get("confidence", 0.95)),
                       seed=int(report.get("seed", 0)),
                       study=study_input(exp, store) if exp.plan.study is not None else None)


#: Completed trials a contender needs before the report shows its hyperparameter importances.
MIN_IMPORTANCE_TRIALS = 10
IMPORTANCE_METHOD = ("PED-ANOVA (Optuna's PedAnovaImportanceEvaluator, default settings: which parameters matter for "
                     "reaching the top 10% of the trials' values)")


def study_input(exp: Experiment, store: RunStore) -> StudyInput:
    """A study's trials (Optuna's storage), each with the env steps its runs trained and its wall time (the
    experiment's journal), each contender's best trial, and the importances of its parameters."""
    from mosaic.experiments.study.driver import StudyDriver, trial_cell_id

    driver = StudyDriver(exp, read_only=True)
    cells = exp.cells()
    spent: dict[str, tuple[float | None, float, float | None]] = {}  # cell -> (env steps, submitted, ended)
    for cell_id, state in cells.items():
        if not state.attempts:
            continue
        last = state.last
        steps = None
        if last is not None and store.exists(last.run_id):
            from mosaic.experiments.results import run_result

            steps = run_result(store.path_for(last.run_id), exp.spec.get("score", {}).get("metric",
                                                                                          "episode_return_mean")).env_steps
        spent[cell_id] = (steps, state.attempts[0].submitted_at, last.ended_at if last else None)
    trials = []
    seeds = len(driver.study.seeds)
    for t in driver.trials():
        ids = [trial_cell_id(t.contender, t.number, k) for k in range(seeds)]
        mine = [spent[c] for c in ids if c in spent]
        steps = [m[0] for m in mine if m[0] is not None]
        ends = [m[2] for m in mine if m[2] is not None]
        wall = (max(ends) - min(m[1] for m in mine)) if mine and len(ends) == len(mine) else None
        attrs = driver.studies[t.contender].trials[t.number].user_attrs
        # what the trial cost, as kept with it when it ended (its runs may be on another machine), else its runs'
        env_steps = attrs.get("env_steps", float(sum(steps)) if steps else None)
        trials.append(StudyTrial(contender=t.label, number=t.number, state=t.state, value=t.value, params=t.params,
                                 seed_scores=attrs.get("seed_scores"), cause=t.cause, env_steps=env_steps,
                                 wall_s=attrs.get("wall_s", wall)))
    best = {}
    importances: dict[str, dict[str, float] | str] = {}
    for i, label in enumerate(driver.labels):
        b = driver.best(i)
        if b is not None:
            best[label] = {"trial": b.number, "value": b.value, "params": b.params}
        importances[label] = _importances(driver.studies[i])
    journal = exp.root / "study.journal"
    return StudyInput(protocol=dict(exp.plan.study or {}), trials=trials, best=best, importances=importances,
                      importance_method=IMPORTANCE_METHOD, journal=journal if journal.is_file() else None)


def _importances(study: Any) -> dict[str, float] | str:
    completed = [t for t in study.get_trials(deepcopy=False) if t.state.name == "COMPLETE"]
    if len(completed) < MIN_IMPORTANCE_TRIALS:
        return (f"not shown: {len(completed)} completed trial(s), fewer than the {MIN_IMPORTANCE_TRIALS} an importance "
                "estimate needs")
    if len({t.value for t in completed}) < 2:
        return "not shown: every completed trial has the same value"
    import optuna

    try:
        found = optuna.importance.get_param_importances(study, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    except (ValueError, RuntimeError) as exc:
        return f"not shown: Optuna's evaluator refused ({exc})"
    return {str(k): float(v) for k, v in found.items()}


#: What must agree for runs of several experiments to be scored in one report: ReportInput field -> spec field.
JOINT_SCORE = {"metric": "score.metric", "higher_is_better": "score.higher_is_better",
               "final_fraction": "score.final_fraction", "level_within": "score.level_within",
               "normalisation": "normalise"}


def joint_report_input(exps: list[Experiment], home: Path | str | None = None) -> ReportInput:
    """One report over several experiments' cells (``mosaic experiment report A --with B``), such as two libraries
    run as two experiments at one budget. Their runs must be scored the same way (``JOINT_SCORE``); the intervals'
    settings are the first experiment's. Cells are named ``EXPERIMENT/CELL``; a configuration label that two of
    the experiments share gets ``experiment=NAME`` in front, so their runs stay apart."""
    names = [e.name for e in exps]
    twice = sorted(n for n, k in Counter(names).items() if k > 1)
    if twice:
        raise UserError(f"--with: experiment {twice[0]!r} is named twice; allowed: each experiment once")
    inputs = [report_input(e, home) for e in exps]
    first = inputs[0]
    for other in inputs[1:]:
        for name, spec_field in JOINT_SCORE.items():
            if getattr(other, name) != getattr(first, name):
                raise UserError(f"{spec_field}: experiment {other.name!r} has {getattr(other, name)!r} and "
                                f"{first.name!r} has {getattr(first, name)!r}; allowed: one value for every "
                                "experiment of a joint report (each run is scored the same way)")
    shared = Counter(label for i in inputs for label in {c.configuration for c in i.cells})

    def label(name: str, configuration: str) -> str:
        if shared[configuration] == 1:
            return configuration
        return f"experiment={name}" + ("" if configuration == "default" else f" {configuration}")

    cells = [dataclasses.replace(c, cell_id=f"{i.name}/{c.cell_id}", configuration=label(i.name, c.configuration))
             for i in inputs for c in i.cells]
    return dataclasses.replace(first, name=" + ".join(names), cells=cells, joined={i.name: i.spec for i in inputs})


def _continued_from(store: RunStore, attempts: list[Attempt]) -> tuple[tuple[Path, float | None], ...]:
    """The runs a cell's last attempt continued from, oldest first, each with the env steps of the checkpoint the
    next one started from (None if its manifest does not say). A source is an earlier attempt (its start is
    ``restored_from`` in the journal) or any run in the store, such as an earlier experiment's (``continue_from``;
    its start is ``checkpoint.restore_from`` in its own config.json). The chain ends at a run that started from
    scratch, at a checkpoint outside the run store, or where it would visit a run twice."""
    chain: list[tuple[Path, float | None]] = []
    restored, seen = attempts[-1].restored_from, {attempts[-1].run_id}
    while restored:
        checkpoint = Path(restored).resolve()
        source = next((a for a in attempts if store.exists(a.run_id)
                       and checkpoint.is_relative_to(store.path_for(a.run_id).resolve())), None)
        run_id = source.run_id if source is not None else _run_holding(store, checkpoint)
        if run_id is None or run_id in seen:
            break  # a checkpoint from outside the run store (nothing to join), or a loop
        entries = store.get(run_id).read_manifest().get("checkpoints") or []
        steps = next((e.get("timesteps_total") for e in entries if isinstance(e, dict) and e.get("path")
                      and Path(e["path"]).resolve() == checkpoint), None)
        chain.append((store.path_for(run_id), float(steps) if isinstance(steps, (int, float)) else None))
        seen.add(run_id)
        restored = source.restored_from if source is not None else _restored_from(store, run_id)
    return tuple(reversed(chain))


def _restored_from(store: RunStore, run_id: str) -> str:
    """The checkpoint run ``run_id`` started from (its config's ``checkpoint.restore_from``), or ""."""
    try:
        config = store.get(run_id).read_config()
    except (OSError, ValueError):
        return ""
    section = config.get("checkpoint") if isinstance(config, dict) else None
    value = section.get("restore_from") if isinstance(section, dict) else None
    return value if isinstance(value, str) else ""


def _run_holding(store: RunStore, checkpoint: Path) -> str | None:
    """The id of the run in ``store`` whose folder holds ``checkpoint`` (``RUN/checkpoints/NAME``), or None."""
    runs = store.runs_dir.resolve()
    return next((f.name for f in checkpoint.parents if f.parent == runs and f.is_dir()), None)
