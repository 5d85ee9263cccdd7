"""An experiment's cells as the report reads them: each cell's configuration, env, seed, state and run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic.experiments.report import ReportCell, ReportInput
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
        state = cells[cell.cell_id]
        last = state.last
        run_id = last.run_id if last else None
        run_dir = store.path_for(run_id) if run_id and store.exists(run_id) else None
        before = _continued_from(store, state.attempts) if run_dir is not None else ()
        summary = summarize(cell.config, worker=cell.worker)
        out.append(ReportCell(cell_id=cell.cell_id, configuration=cell.configuration, env=cell.env, seed=cell.seed,
                              status=states[cell.cell_id], run_id=run_id, run_dir=run_dir,
                              settings=dict(cell.settings), worker=cell.worker, algorithm=summary.algorithm,
                              budget=summary.budget, before=before))
    normalise = {env: (float(v["random"]), float(v["reference"])) for env, v in (spec.get("normalise") or {}).items()}
    return ReportInput(name=exp.name, spec=spec, cells=out, metric=score.get("metric", "episode_return_mean"),
                       higher_is_better=bool(score.get("higher_is_better", True)), normalisation=normalise or None,
                       final_fraction=float(score.get("final_fraction", 0.1)),
                       reps=int(report.get("reps", 2000)), confidence=float(report.get("confidence", 0.95)),
                       seed=int(report.get("seed", 0)))


def _continued_from(store: RunStore, attempts: list[Attempt]) -> tuple[tuple[Path, float | None], ...]:
    """The runs a cell's last attempt continued from (``restored_from`` in the journal), oldest first, each with
    the env steps of the checkpoint the next attempt started from (None if its manifest does not say)."""
    chain: list[tuple[Path, float | None]] = []
    current, seen = attempts[-1], set()
    while current.restored_from and current.run_id not in seen:
        seen.add(current.run_id)
        checkpoint = Path(current.restored_from).resolve()
        source = next((a for a in attempts if store.exists(a.run_id)
                       and checkpoint.is_relative_to(store.path_for(a.run_id).resolve())), None)
        if source is None:  # a checkpoint from outside the experiment's runs: nothing to join
            break
        entries = store.get(source.run_id).read_manifest().get("checkpoints") or []
        steps = next((e.get("timesteps_total") for e in entries if isinstance(e, dict) and e.get("path")
                      and Path(e["path"]).resolve() == checkpoint), None)
        chain.append((store.path_for(source.run_id), float(steps) if isinstance(steps, (int, float)) else None))
        current = source
    return tuple(reversed(chain))
