"""The study driver: Optuna asks for trials, the experiment runs them as cells, their telemetry tells Optuna.

The coordinator (:mod:`mosaic.experiments.coordinator`) calls :meth:`StudyDriver.step` once a loop, before it
submits pending cells. A step:

1. ends the trials whose cells have all ended: each tuning seed's run is scored as any run of the experiment
   (``score``: the metric's mean over the last ``final_fraction`` of its env steps) and the trial's value, the
   mean over its seeds, is told to Optuna (COMPLETE); a cell that failed for good (its retries used) fails the
   trial (FAIL, with the cause), which still counts as one of the contender's trials;
2. with a pruner, reports each running trial's mean score so far at the reporting cadence and, if Optuna's pruner
   says so, stops its cells (journal ``pruned``: they end cancelled and are never run again) and tells PRUNED;
3. asks for new trials while fewer than ``tuning.parallel`` are in flight, always for the contender with the
   fewest trials so far, so every contender advances alike and no contender gets more than ``tuning.trials``;
4. once every contender has all its trials ended, runs each contender's best trial (best by the tuning seeds'
   mean only: Optuna's ``best_trial``) on the test seeds (the spec's ``seeds``): the cells the report compares.

Each contender is one Optuna study (``EXPERIMENT:CONTENDER``) in the experiment's storage: by default a text journal,
``study.journal`` in the experiment's folder, which a report folder carries and ``resume`` continues from on any
machine. Everything is derived from the storage and the experiment's journal, so a driver killed at any point is
taken up by the next ``resume``: a trial asked but not yet journaled gets its cells then (their ids, and so their run
ids, follow from its number); a completed trial is never run again.

Samplers are seeded per trial (``tuning.sampler.seed`` and the trial's number), so a study resumed in another
process asks for the same points it would have asked for in one go, and contenders with the same space try the
same points at the same trial number under random search (a paired design).
"""

from __future__ import annotations

import hashlib
import math
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mosaic.experiments.spec import ExperimentSpec, parse_spec
from mosaic.experiments.store import TRIAL_PRUNED, CellState, Experiment
from mosaic.experiments.study.space import JOURNAL, JOURNAL_FILE, Dimension, Study
from mosaic.run_status import JOB_ENDED, JobState

if TYPE_CHECKING:
    import optuna

    from mosaic.experiments.backends import Backend
    from mosaic.experiments.results import RunResult

#: the terminal states of a cell (coordinator.cell_states)
ENDED = JOB_ENDED
#: how often a running trial's curves are read for its pruner, at most
PRUNE_CHECK_S = 2.0


def trial_cell_id(contender: int, trial: int, seed_index: int) -> str:
    """``k0t003s1``: contender 0's trial 3 on its second tuning seed."""
    return f"k{contender}t{trial:03d}s{seed_index}"


def quiet_optuna() -> Any:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    return optuna


def storage_for(root: Path, storage: str) -> Any:
    """The study's Optuna storage: the journal file in the experiment's folder, or the RDB at ``storage``."""
    optuna = quiet_optuna()
    if storage == JOURNAL:
        from optuna.storages.journal import JournalFileBackend

        return optuna.storages.JournalStorage(JournalFileBackend(str(root / JOURNAL_FILE)))
    return optuna.storages.RDBStorage(storage)


def carried_journal(path: Path, plan: Any) -> Path:
    """``path``, checked to be an Optuna journal of the study ``plan`` makes (from another machine: a report folder's
    ``study.journal``); :class:`UserError` naming ``--study-journal`` otherwise."""
    from mosaic.errors import UserError

    if plan.study is None:
        raise UserError(f"--study-journal: experiment {plan.name!r} is not a study (its spec has no tuning section); "
                        "allowed: a study's spec")
    if not path.is_file():
        raise UserError(f"--study-journal: {path} is not a file; allowed: an Optuna journal, such as a study's "
                        "report folder's study.journal")
    import shutil
    import tempfile

    optuna = quiet_optuna()
    from optuna.storages.journal import JournalFileBackend

    with tempfile.TemporaryDirectory() as scratch:  # read a copy: Optuna's journal backend may write a lock
        copy = Path(scratch) / "study.journal"
        shutil.copyfile(path, copy)
        try:
            names = optuna.get_all_study_names(optuna.storages.JournalStorage(JournalFileBackend(str(copy))))
        except Exception as exc:  # noqa: BLE001 - whatever Optuna makes of a file that is not its journal
            raise UserError(f"--study-journal: {path} is not an Optuna journal ({exc}); allowed: a study's "
                            "study.journal") from None
    wanted = {f"{plan.name}:{c['label']}" for c in plan.study["contenders"]}
    if not names or not set(names) <= wanted:
        raise UserError(f"--study-journal: {path} holds the studies {', '.join(sorted(names)) or 'none'}, not this "
                        f"spec's ({', '.join(sorted(wanted))}); allowed: the journal of a study of the same name and "
                        "contenders")
    return path


def per_trial_seed(seed: int, trial: int) -> int:
    """The sampler's seed for trial ``trial``: a function of the study's seed and the trial's number only."""
    digest = hashlib.sha256(f"{seed}:{trial}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def sampler_for(name: str, seed: int) -> Any:
    optuna = quiet_optuna()
    if name == "tpe":  # constant_liar: trials in flight count as likely bad, so parallel asks spread out
        return optuna.samplers.TPESampler(seed=seed, constant_liar=True)
    return optuna.samplers.RandomSampler(seed=seed)


def distributions(dims: list[Dimension]) -> dict[str, Any]:
    """Optuna's distribution for each dimension, keyed by its name."""
    optuna = quiet_optuna()
    d = optuna.distributions
    out: dict[str, Any] = {}
    for dim in dims:
        if dim.type == "categorical":
            out[dim.name] = d.CategoricalDistribution([_choice(c) for c in dim.choices])
        elif dim.type == "int":
            out[dim.name] = d.IntDistribution(int(dim.low), int(dim.high), log=dim.log,  # type: ignore[arg-type]
                                              step=1 if dim.log else int(dim.step or 1))
        else:
            out[dim.name] = d.FloatDistribution(float(dim.low), float(dim.high),  # type: ignore[arg-type]
                                                log=dim.type == "log_uniform", step=dim.step)
    return out


def _choice(value: Any) -> Any:
    """Optuna keeps categorical choices as None, bool, int, float or str: a list or object goes as its JSON."""
    import json

    return value if value is None or isinstance(value, (bool, int, float, str)) else json.dumps(value)


def config_values(dims: list[Dimension], params: dict[str, Any]) -> dict[str, Any]:
    """A trial's params as the spec's values (a categorical's JSON choice back to its list or object)."""
    import json

    out = {}
    for dim in dims:
        if dim.name not in params:
            continue
        value = params[dim.name]
        if dim.type == "categorical" and isinstance(value, str) and value not in dim.choices:
            value = json.loads(value)
        out[dim.name] = value
    return out


@dataclass
class TrialView:
    """One trial of one contender, as the driver, ``status`` and the report see it."""

    contender: int
    label: str
    number: int
    state: str  # Optuna's: RUNNING, COMPLETE, PRUNED, FAIL, WAITING
    params: dict[str, Any]
    value: float | None
    cause: str = ""


class StudyDriver:
    """Drives one experiment's study (see the module's docstring)."""

    def __init__(self, exp: Experiment, read_only: bool = False) -> None:
        """``read_only``: for ``status`` and the report, which must not write into the study's storage (a study
        not created yet reads as one without trials)."""
        self.exp = exp
        self.read_only = read_only
        self.spec: ExperimentSpec = parse_spec(exp.spec)
        assert self.spec.study is not None, f"experiment {exp.name} is not a study"
        self.study: Study = self.spec.study
        self.contenders = self.spec.contenders()
        self.labels = [self.spec.cell("x", c, 0).configuration for c in self.contenders]
        self.workers = [self.spec._worker_of(c) for c in self.contenders]
        planned = (exp.plan.study or {}).get("contenders") or []
        #: each contender's env as its worker named it at plan time (its trial and test cells carry it)
        self.envs = [planned[i]["env"] if i < len(planned) else None for i in range(len(self.contenders))]
        self._cells: dict[str, CellState] | None = None  # the round's cells (step), else read from the journal
        self._results: dict[Path, RunResult] = {}  # the round's runs read (_result)
        self.direction = "maximize" if self.spec.score.higher_is_better else "minimize"
        self.storage = storage_for(exp.root, self.study.storage)
        self.studies = [self._load(i) for i in range(len(self.contenders))]
        self.cadence = [self._cadence(i) for i in range(len(self.contenders))]
        self._checked_at: dict[tuple[int, int], float] = {}
        self._signature: tuple = ()
        self._pruned_at = 0.0
        self.done = False

    # -- Optuna's side -----------------------------------------------------------------------------------
    def study_name(self, contender: int) -> str:
        return f"{self.exp.name}:{self.labels[contender]}"

    def _load(self, contender: int) -> "optuna.Study":
        """The contender's study: loaded (a create with ``load_if_exists`` would append to the journal each time),
        created only by a driver that runs it."""
        optuna = quiet_optuna()
        sampler = sampler_for(self.study.sampler, self.study.sampler_seed)
        try:
            return optuna.load_study(study_name=self.study_name(contender), storage=self.storage, sampler=sampler,
                                     pruner=self._pruner(contender))
        except KeyError:
            if self.read_only:
                return optuna.create_study(direction=self.direction, sampler=sampler)  # in memory: no trials
            return optuna.create_study(study_name=self.study_name(contender), storage=self.storage,
                                       direction=self.direction, sampler=sampler, pruner=self._pruner(contender))

    def _budget(self, contender: int) -> int:
        sample = ((self.exp.plan.study or {}).get("contenders") or [{}] * (contender + 1))[contender].get("sample")
        from mosaic.workerkit.run_fields import summarize

        config = sample or self.spec.cell("x", self.contenders[contender], 0).config
        return int(summarize(config, worker=self.workers[contender]).budget or 0)

    def _cadence(self, contender: int) -> int:
        """Env steps between a trial's reports to its pruner: the cells' reporting cadence (or a 20th of the budget)."""
        sample = ((self.exp.plan.study or {}).get("contenders") or [{}] * (contender + 1))[contender].get("sample")
        every = ((sample or {}).get("reporting") or {}).get("every_timesteps")
        return int(every) if isinstance(every, int) and every > 0 else max(1, self._budget(contender) // 20)

    def _pruner(self, contender: int) -> Any:
        optuna = quiet_optuna()
        p = self.study.pruner
        if p.name == "median":
            cadence = self._cadence(contender)
            return optuna.pruners.MedianPruner(n_startup_trials=p.startup_trials,
                                               n_warmup_steps=p.warmup_steps // max(1, cadence))
        if p.name == "hyperband":
            cadence = self._cadence(contender)
            return optuna.pruners.HyperbandPruner(min_resource=max(1, p.min_resource // cadence),
                                                  max_resource=max(2, self._budget(contender) // cadence),
                                                  reduction_factor=p.reduction_factor)
        return optuna.pruners.NopPruner()

    def trials(self) -> list[TrialView]:
        """Every trial of every contender, as Optuna's storage holds them."""
        out = []
        for i, study in enumerate(self.studies):
            for t in study.get_trials(deepcopy=False):
                params = config_values(self.study.for_worker(self.workers[i]), dict(t.params))
                value = t.value if t.state.name == "COMPLETE" else None  # Optuna gives a pruned one its last report
                out.append(TrialView(i, self.labels[i], t.number, t.state.name, params,
                                     None if value is None else float(value),
                                     str(t.user_attrs.get("cause", ""))))
        return out

    # -- the experiment's side ---------------------------------------------------------------------------
    def step(self, cells: dict[str, CellState], states: dict[str, str], backend: "Backend | None" = None) -> list[str]:
        """One round (the module's docstring); the lines to report. Cells it adds are in the journal. A round in
        which no cell changed state has nothing to end or ask for: it returns at once, unless a pruner is due."""
        # only a cell that ended (or one added) can end a trial or free a slot: a cell that starts running changes nothing
        signature = (len(states), tuple(sorted(c for c, state in states.items() if state in ENDED)))
        if signature == self._signature and (self.study.pruner.name == "none"
                                             or time.monotonic() - self._pruned_at < PRUNE_CHECK_S):
            return []
        self._signature, self._pruned_at = signature, time.monotonic()
        self._cells, self._results = cells, {}
        try:
            return self._step(cells, states, backend)
        finally:
            self._cells, self._results = None, {}

    def _step(self, cells: dict[str, CellState], states: dict[str, str], backend: "Backend | None") -> list[str]:
        events: list[str] = []
        plan_cells = {c.cell_id: c for c in self.exp.plan.cells}
        seeds = self.study.seeds
        in_flight = 0
        trials = [study.get_trials(deepcopy=False) for study in self.studies]  # read once a round
        counts = [len(found) for found in trials]
        running = 0  # trials still RUNNING in Optuna after this round's tells
        for i, study in enumerate(self.studies):
            for t in trials[i]:
                if t.state.name == "PRUNED":  # a pruned trial whose cells still run holds its slot until they end
                    in_flight += any(states.get(trial_cell_id(i, t.number, k)) not in ENDED + (None,)
                                     for k in range(len(seeds)))
                if t.state.name != "RUNNING":
                    continue
                ids = [trial_cell_id(i, t.number, k) for k in range(len(seeds))]
                missing = [k for k, cid in enumerate(ids) if cid not in plan_cells]
                if missing:  # asked, but the driver stopped before journaling its cells: journal them now
                    self._add_trial_cells(i, t.number, dict(t.params), missing)
                    in_flight += 1
                    running += 1
                    continue
                if all(states.get(cid) in ENDED for cid in ids):
                    events.append(self._end_trial(i, study, t, ids, states))
                    continue
                in_flight += 1
                if self.study.pruner.name != "none" and not any(cells[cid].pruned for cid in ids if cid in cells):
                    line = self._maybe_prune(i, study, t, ids, cells, states, backend)
                    if line:  # its cells are being stopped: it holds its slot until they end (PRUNED, above)
                        events.append(line)
                        continue
                running += 1
        while in_flight < self.study.parallel:
            open_ = [i for i, n in enumerate(counts) if n < self.study.trials]
            if not open_:
                break
            i = min(open_, key=lambda j: (counts[j], j))
            trial = self._ask(i, counts[i])
            counts[i] += 1
            self._add_trial_cells(i, trial.number, dict(trial.params), range(len(seeds)))
            events.append(f"{self.labels[i]}: trial {trial.number} asked ({_params_text(self._values(i, trial.params))})")
            in_flight += 1
            running += 1
        if in_flight == 0 and running == 0 and all(n >= self.study.trials for n in counts):
            events += self._add_test_cells(plan_cells)
            self.done = True
        return events

    def _values(self, contender: int, params: dict[str, Any]) -> dict[str, Any]:
        return config_values(self.study.for_worker(self.workers[contender]), params)

    def _ask(self, contender: int, number: int) -> "optuna.trial.Trial":
        study = self.studies[contender]
        study.sampler = sampler_for(self.study.sampler, per_trial_seed(self.study.sampler_seed, number))
        dims = self.study.for_worker(self.workers[contender])
        return study.ask(fixed_distributions=distributions(dims))

    def _add_trial_cells(self, contender: int, number: int, params: dict[str, Any], seed_indices: Any) -> None:
        values = self._values(contender, params)
        for k in seed_indices:
            cell = self.spec.cell(trial_cell_id(contender, number, k), self.contenders[contender],
                                  self.study.seeds[k], values)
            cell = _with(cell, trial=number, configuration=self.labels[contender],
                         env=self.envs[contender] or cell.env)
            self.exp.log("cell_added", cell=cell.to_dict(), contender=contender, trial=number, params=values)

    def _end_trial(self, contender: int, study: "optuna.Study", trial: Any, ids: list[str],
                   states: dict[str, str]) -> str:
        optuna = quiet_optuna()
        label = self.labels[contender]
        if any(self._cell(cid).pruned for cid in ids):  # pruned while the tell was pending: say it once
            study.tell(trial.number, state=optuna.trial.TrialState.PRUNED)
            self.exp.log("trial_ended", contender=contender, trial=trial.number, state="PRUNED")
            return f"{label}: trial {trial.number} pruned"
        failed = [cid for cid in ids if states[cid] != JobState.COMPLETED]
        if failed:
            cause = self._cause(failed[0])
            self.storage.set_trial_user_attr(trial._trial_id, "cause", cause)
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
            self.exp.log("trial_ended", contender=contender, trial=trial.number, state="FAIL", cause=cause)
            return f"{label}: trial {trial.number} failed: {cause}"
        scores = [self._score(cid) for cid in ids]
        if any(s is None for s in scores):
            cid = ids[scores.index(None)]
            cause = f"cell {cid}'s run logged no {self.spec.score.metric}"
            self.storage.set_trial_user_attr(trial._trial_id, "cause", cause)
            study.tell(trial.number, state=optuna.trial.TrialState.FAIL)
            self.exp.log("trial_ended", contender=contender, trial=trial.number, state="FAIL", cause=cause)
            return f"{label}: trial {trial.number} failed: {cause}"
        value = math.fsum(scores) / len(scores)  # type: ignore[arg-type]
        if self.study.pruner.name != "none":  # its whole curve, so that later trials are compared with it
            curves = self._curves(ids)
            if curves is not None:
                self._report_steps(contender, quiet_optuna().trial.Trial(study, trial._trial_id),
                                   dict(trial.intermediate_values), curves)
        self.storage.set_trial_user_attr(trial._trial_id, "seed_scores", scores)
        for key, spent in self._spent(ids).items():  # kept with the trial: its runs stay on this machine
            self.storage.set_trial_user_attr(trial._trial_id, key, spent)
        study.tell(trial.number, value)
        self.exp.log("trial_ended", contender=contender, trial=trial.number, state="COMPLETE", value=value,
                     seed_scores=scores)
        over = f"mean over {len(scores)} tuning seeds" if len(scores) > 1 else "its tuning seed"
        return f"{label}: trial {trial.number} scored {value:.4g} ({over})"

    def _spent(self, ids: list[str]) -> dict[str, float]:
        """What a trial's runs cost: the env steps they trained (summed) and the wall time from its first cell's
        submission to its last cell's end."""
        steps, starts, ends = [], [], []
        for cid in ids:
            state = self._cell(cid)
            if state.attempts:
                starts.append(state.attempts[0].submitted_at)
                ends.append(state.last.ended_at or time.time())  # type: ignore[union-attr]
            result = self._result(cid)
            found = result.env_steps if result is not None else None
            if found is not None:
                steps.append(float(found))
        out = {}
        if len(steps) == len(ids):
            out["env_steps"] = math.fsum(steps)
        if starts and len(ends) == len(ids):
            out["wall_s"] = round(max(ends) - min(starts), 3)
        return out

    def _cell(self, cell_id: str) -> CellState:
        cells = self._cells if self._cells is not None and cell_id in self._cells else self.exp.cells()
        return cells[cell_id]

    def _run_dir(self, cell_id: str) -> Path | None:
        from mosaic.runs import RunStore

        last = self._cell(cell_id).last
        store = RunStore(self.exp.home)
        return store.path_for(last.run_id) if last and store.exists(last.run_id) else None

    def _result(self, cell_id: str) -> "RunResult | None":
        """The cell's last run read (its telemetry, once a round: scoring, curves and costs share it); None while
        it has no run folder."""
        from mosaic.experiments.results import run_result

        run_dir = self._run_dir(cell_id)
        if run_dir is None:
            return None
        if run_dir not in self._results:
            self._results[run_dir] = run_result(run_dir, self.spec.score.metric,
                                                final_fraction=self.spec.score.final_fraction)
        return self._results[run_dir]

    def _score(self, cell_id: str) -> float | None:
        result = self._result(cell_id)
        return None if result is None or result.final_score is None else float(result.final_score)

    def _cause(self, cell_id: str) -> str:
        last = self._cell(cell_id).last
        if last is None:
            return f"cell {cell_id} never ran"
        return f"cell {cell_id}: {last.state}: {last.cause or 'no cause given'}"

    def _curves(self, ids: list[str]) -> list[tuple[tuple[float, ...], tuple[float, ...]]] | None:
        """Each cell's curve of the score's metric so far (None while a cell has no run or no point yet)."""
        curves = []
        for cid in ids:
            result = self._result(cid)
            if result is None:
                return None
            if not result.xs:
                return None
            curves.append((result.xs, result.ys))
        return curves

    def _report_steps(self, contender: int, live: Any, reported: dict[int, float],
                      curves: list[tuple[tuple[float, ...], tuple[float, ...]]]) -> None:
        """Report to the pruner every step (a multiple of the reporting cadence) the trial's cells have all reached
        and that it has not had: the mean over the cells of each one's score up to there. Every trial so has a value
        at every step, whenever the driver looked, and the pruner compares trials at the same env steps."""
        from mosaic.experiments.results import final_window

        cadence = self.cadence[contender]
        last = int(min(xs[-1] for xs, _ in curves) // cadence)
        for step in range(1, last + 1):
            if step in reported:
                continue
            upto = step * cadence
            partial = []
            for xs, ys in curves:
                kept = [(x, y) for x, y in zip(xs, ys) if x <= upto]
                if not kept:
                    break
                window = final_window(tuple(x for x, _ in kept), tuple(y for _, y in kept),
                                      self.spec.score.final_fraction)
                partial.append(math.fsum(window) / len(window))
            if len(partial) == len(curves):
                live.report(math.fsum(partial) / len(partial), step)

    def _maybe_prune(self, contender: int, study: "optuna.Study", trial: Any, ids: list[str],
                     cells: dict[str, CellState], states: dict[str, str], backend: "Backend | None") -> str:
        """Report the trial's mean score so far to its pruner (at most every :data:`PRUNE_CHECK_S`); prune if told."""
        key = (contender, trial.number)
        now = time.monotonic()
        if now - self._checked_at.get(key, 0.0) < PRUNE_CHECK_S:
            return ""
        self._checked_at[key] = now
        curves = self._curves(ids)
        if curves is None:
            return ""
        optuna = quiet_optuna()
        live = optuna.trial.Trial(study, trial._trial_id)
        before = len(trial.intermediate_values)
        self._report_steps(contender, live, dict(trial.intermediate_values), curves)
        if len(study._storage.get_trial(trial._trial_id).intermediate_values) == before or not live.should_prune():
            return ""
        upto = max(study._storage.get_trial(trial._trial_id).intermediate_values) * self.cadence[contender]
        for cid in ids:
            self.exp.log("pruned", cell=cid, trial=trial.number, contender=contender, step=upto)
            last = cells[cid].last
            if backend is not None and last is not None and not last.ended:
                backend.cancel(last.run_id, TRIAL_PRUNED)
        study.tell(trial.number, state=optuna.trial.TrialState.PRUNED)
        self.exp.log("trial_ended", contender=contender, trial=trial.number, state="PRUNED", step=upto)
        return f"{self.labels[contender]}: trial {trial.number} pruned at {upto} env steps"

    def best(self, contender: int) -> TrialView | None:
        """The contender's best completed trial by its tuning seeds' mean (Optuna's ``best_trial``), or None."""
        study = self.studies[contender]
        if not any(t.state.name == "COMPLETE" for t in study.get_trials(deepcopy=False)):
            return None
        t = study.best_trial
        return TrialView(contender, self.labels[contender], t.number, t.state.name,
                         self._values(contender, dict(t.params)), float(t.value))  # type: ignore[arg-type]

    def _add_test_cells(self, plan_cells: dict[str, Any]) -> list[str]:
        """Each contender's best trial on the test seeds (once: cells already journaled are kept)."""
        events = []
        seeds = self.spec.seeds
        for i, contender in enumerate(self.contenders):
            ids = [f"c{i * len(seeds) + k:03d}" for k in range(len(seeds))]
            if all(cid in plan_cells for cid in ids):
                continue
            best = self.best(i)
            if best is None:
                if not any(e.get("event") == "test_skipped" and e.get("contender") == i for e in self.exp.journal()):
                    self.exp.log("test_skipped", contender=i, cause="no trial completed")
                    events.append(f"{self.labels[i]}: no trial completed, so no best configuration to test")
                continue
            if not any(cid in plan_cells for cid in ids):
                self.exp.log("best", contender=i, trial=best.number, value=best.value, params=best.params)
            for cid, seed in zip(ids, seeds):
                if cid in plan_cells:
                    continue
                cell = _with(self.spec.cell(cid, contender, seed, best.params), configuration=self.labels[i])
                cell = _with(cell, env=self.envs[i] or cell.env)
                self.exp.log("cell_added", cell=cell.to_dict(), contender=i, best_trial=best.number,
                             params=best.params)
            events.append(f"{self.labels[i]}: best trial {best.number} ({best.value:.4g} on the tuning seeds) runs on "
                          f"test seeds {', '.join(map(str, self.spec.seeds))}")
        return events


def _with(cell: Any, **changes: Any) -> Any:
    from dataclasses import replace

    return replace(cell, **changes)


def _params_text(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items())
