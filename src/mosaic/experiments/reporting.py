"""An experiment's cells as the report reads them: each cell's configuration, env, seed, state and run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic.experiments.report import ReportCell, ReportInput
from mosaic.experiments.store import Experiment
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
        summary = summarize(cell.config, worker=cell.worker)
        out.append(ReportCell(cell_id=cell.cell_id, configuration=cell.configuration, env=cell.env, seed=cell.seed,
                              status=states[cell.cell_id], run_id=run_id, run_dir=run_dir,
                              settings=dict(cell.settings), worker=cell.worker, algorithm=summary.algorithm,
                              budget=summary.budget))
    normalise = {env: (float(v["random"]), float(v["reference"])) for env, v in (spec.get("normalise") or {}).items()}
    return ReportInput(name=exp.name, spec=spec, cells=out, metric=score.get("metric", "episode_return_mean"),
                       higher_is_better=bool(score.get("higher_is_better", True)), normalisation=normalise or None,
                       final_fraction=float(score.get("final_fraction", 0.1)),
                       reps=int(report.get("reps", 2000)), confidence=float(report.get("confidence", 0.95)),
                       seed=int(report.get("seed", 0)))
