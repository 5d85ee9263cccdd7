"""A report's data files: ``scores.csv`` (one row per cell) and ``marl_eval.json`` (marl-eval's raw-data format)."""

from __future__ import annotations

import csv
import io
from typing import Any

from mosaic.experiments.report.analysis import Analysis, shared_curves, unique
from mosaic.experiments.report.formatting import json_value

FIXED_COLUMNS = ("cell_id", "configuration", "env", "seed", "status", "run_id", "final_score", "env_steps",
                 "late_change", "gain")


def _number(value: float | None) -> str:
    """Exact (``repr``), so the file gives back the very floats; whole numbers without ``.0``."""
    if value is None:
        return ""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def render_csv(a: Analysis) -> str:
    """One row per cell; ``final_score``, ``late_change`` and ``gain`` only where the cell counts (completed with a
    score)."""
    names = unique([k for s in a.scored for k in s.cell.settings])
    header = list(FIXED_COLUMNS) + [f"setting.{n}" if n in FIXED_COLUMNS else n for n in names]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for s in a.scored:
        c, r = s.cell, s.result
        writer.writerow([c.cell_id, c.configuration, c.env, c.seed, c.status, c.run_id or "",
                         _number(r.final_score if r is not None and s.excluded is None else None),
                         _number(r.env_steps if r is not None else None),
                         _number(r.late_change if r is not None and s.excluded is None else None),
                         _number(r.gain if r is not None and s.excluded is None else None),
                         *[json_value(c.settings[n]) if n in c.settings else "" for n in names]])
    return buffer.getvalue()


def marl_eval_data(a: Analysis) -> dict[str, Any]:
    """The scored runs in marl-eval's raw-data format.

    Follows the "Data Structure for Raw Experiment data" section of marl-eval's README
    (github.com/instadeepai/marl-eval, commit 068d960) and the keys its ``JsonLogger`` writes
    (``marl_eval/json_tools/json_logger.py``, commit 3b460d3): ``{environment: {task: {algorithm:
    {"seed_<seed>": {"step_<k>": {"step_count": <env steps>, <metric>: [value]}, ...,
    "absolute_metrics": {<metric>: [final score]}}}}}}``, ``absolute_metrics`` last. The environment is
    the runs' env family (``mosaic`` when the manifests do not say), the task the env, the algorithm the
    configuration. marl-eval needs the same number of steps in every run: each env's curves are
    put on the same env-step values (:func:`shared_curves`; runs whose curves share no range keep their
    logged points); where the runs logged the same env steps (at most ``CURVE_POINTS``), those are the points,
    and a seed's final window over them (:mod:`mosaic.experiments.marl_eval`) gives back its final score.
    Contenders read from marl-eval files (``--marl-eval``) are left out: MOSAIC did not run them.
    """
    metric = a.data.metric
    out: dict[str, Any] = {}
    for env in a.envs:
        cells = [s for c in a.configurations for s in a.included.get((c, env), []) if s.cell.read is None]
        if not cells:
            continue
        family = next((s.result.env_family for s in cells if s.result and s.result.env_family), None) or "mosaic"
        curves = [(s.result.xs, s.result.ys) for s in cells if s.result and s.result.xs]
        grid = values = None
        if len(curves) == len(cells):
            try:
                grid, values = shared_curves(curves)
            except ValueError:
                grid = values = None
        task = out.setdefault(family, {}).setdefault(env, {})
        for i, s in enumerate(cells):
            assert s.result is not None
            if grid is not None and values is not None:
                points = list(zip(grid.tolist(), values[i].tolist()))
            else:
                points = list(zip(s.result.xs, s.result.ys))
            run: dict[str, Any] = {f"step_{k}": {"step_count": int(round(x)), metric: [y]}
                                   for k, (x, y) in enumerate(points)}
            run["absolute_metrics"] = {metric: [s.score]}
            task.setdefault(s.cell.configuration, {}).setdefault(f"seed_{s.cell.seed}", run)
    return out
