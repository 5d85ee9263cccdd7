"""The numbers of a report, computed once from the cells' runs: each run's final score, the per-env and aggregate
metrics with their intervals, the probability of improvement, the late change and its verdict, the normalisation
used, and runs' curves on shared env steps.

Every interval is a stratified bootstrap percentile interval (:mod:`mosaic.scoring.stats`) drawn from a seed
derived from the report's seed and what is estimated (``"<env>:<metric>"``, ``"aggregate:<metric>"``,
``"poi:<x>><y>"``, then the configuration's label), so the same input gives the same numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mosaic.experiments.report.inputs import ReportCell, ReportInput
from mosaic.experiments.results import RunResult, run_result
from mosaic.run_status import JobState
from mosaic.scoring import stats

#: x values a learning curve is drawn at (evenly spaced over the range every run covers).
CURVE_POINTS = 50


# -- the numbers ------------------------------------------------------------------------------------
@dataclass
class Scored:
    """A cell with what its run gave, and why it is left out of the statistics (None: it is in)."""

    cell: ReportCell
    result: RunResult | None
    excluded: str | None

    @property
    def score(self) -> float:
        assert self.result is not None and self.result.final_score is not None
        return self.result.final_score


@dataclass
class Analysis:
    data: ReportInput
    scored: list[Scored]
    configurations: list[str]
    envs: list[str]
    #: (configuration, env) -> the included cells, by seed
    included: dict[tuple[str, str], list[Scored]]
    #: configuration -> the seeds scored in every env (the aggregate's rows)
    aggregate_seeds: dict[str, list[int]]
    normalised: bool
    #: +1 when higher scores are better (always, once normalised), else -1
    direction: int
    env_metrics: dict[str, dict[str, dict[str, stats.Interval]]] = field(default_factory=dict)
    aggregate: dict[str, dict[str, stats.Interval]] = field(default_factory=dict)
    poi: dict[tuple[str, str], stats.Interval] = field(default_factory=dict)
    #: (configuration, env) -> (mean late change with its interval, runs that improved, runs with a change)
    late: dict[tuple[str, str], tuple[stats.Interval, int, int]] = field(default_factory=dict)
    #: (configuration, env) -> (mean share of the whole gain its last window added, with its interval; runs without
    #: a gain in the better direction, left out of it). No entry: no run has both a late change and a gain.
    share: dict[tuple[str, str], tuple[stats.Interval, int]] = field(default_factory=dict)
    #: env -> (random score, reference score) as used, measured random scores filled in (None: raw units)
    normalisation: dict[str, tuple[float, float]] | None = None
    #: env -> how many random-play runs its measured random score is the mean of
    measured: dict[str, int] = field(default_factory=dict)
    #: env -> the configuration whose mean score is its reference (``reference: best``)
    best_of: dict[str, str] = field(default_factory=dict)
    #: envs that cannot be normalised: a score to measure has no scored run, or random = reference
    unmeasured: list[str] = field(default_factory=list)


def metric_set(normalised: bool, per_env: bool) -> dict[str, tuple[str, Callable[[np.ndarray], Any]]]:
    """Metric key -> (column title, function). Within one env there is one task: the median is the seeds'."""
    out: dict[str, tuple[str, Callable[[np.ndarray], Any]]] = {"mean": ("mean", stats.mean)}
    if per_env:
        out["median"] = ("median of seeds", lambda s: np.median(s, axis=(-2, -1)))
    else:
        out["median"] = ("median of env means", stats.median)
    out["iqm"] = ("IQM", stats.iqm)
    if normalised:
        out["optimality_gap"] = ("optimality gap", stats.optimality_gap)
    return out


def _score_cells(data: ReportInput) -> list[Scored]:
    """Each cell with its run's result (read from its run folder, or given: a run read from a marl-eval file)."""
    out = []
    for cell in data.cells:
        result = cell.read
        if result is None and cell.run_dir is not None and Path(cell.run_dir).is_dir():
            result = run_result(cell.run_dir, metric=data.metric, final_fraction=data.final_fraction,
                                before=cell.before)
        if cell.status != JobState.COMPLETED:
            excluded = f"status {cell.status}"
        elif result is None:
            excluded = "completed, but its run folder is missing"
        elif cell.read is not None and (result.final_score is None or not math.isfinite(result.final_score)):
            excluded = "its marl-eval file holds no value of the metric for this seed"
        elif result.final_score is None or not math.isfinite(result.final_score):
            excluded = f"completed, but logged no {data.metric}"
        else:
            excluded = None
        out.append(Scored(cell, result, excluded))
    return out


def unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def analyse(data: ReportInput) -> Analysis:
    """Every number the report states (computed once, written by the functions below)."""
    if not data.cells:
        raise ValueError("report: the experiment has no cells")
    envs = unique([c.env for c in data.cells])
    normalisation = data.normalisation or None
    if normalisation is not None:
        missing = [e for e in envs if e not in normalisation]
        if missing:
            raise ValueError(f"normalisation: no (random, reference) scores for {', '.join(missing)}; "
                             "give them for every env, or none")
    scored = _score_cells(data)
    configurations = unique([c.configuration for c in data.cells])
    included: dict[tuple[str, str], list[Scored]] = {}
    for s in scored:
        if s.excluded is None:
            included.setdefault((s.cell.configuration, s.cell.env), []).append(s)
    for key in included:
        included[key].sort(key=lambda s: (s.cell.seed, s.cell.cell_id))
    aggregate_seeds = {}
    for conf in configurations:
        per_env = [{s.cell.seed for s in included.get((conf, env), [])} for env in envs]
        aggregate_seeds[conf] = sorted(set.intersection(*per_env)) if per_env else []
    normalisation, measured, best_of, unmeasured = _normalisation_used(data, scored)
    analysis = Analysis(data, scored, configurations, envs, included, aggregate_seeds,
                         normalised=normalisation is not None,
                         direction=1 if (normalisation is not None or data.higher_is_better) else -1,
                         normalisation=normalisation, measured=measured, best_of=best_of, unmeasured=unmeasured)
    _estimate(analysis)
    return analysis


def _normalisation_used(data: ReportInput, scored: list[Scored]
                           ) -> tuple[dict[str, tuple[float, float]] | None, dict[str, int], dict[str, str], list[str]]:
    """``data.normalisation`` with what the experiment measures filled in: a random score of None becomes the mean
    score of that env's scored random-play runs, a reference of None the best mean score of a configuration there
    (random play aside). Also returns env -> random-play runs measured, env -> the configuration taken as
    reference, and the envs that cannot be normalised (nothing scored, or random = reference): then None."""
    if data.normalisation is None:
        return None, {}, {}, []
    out: dict[str, tuple[float, float]] = {}
    measured: dict[str, int] = {}
    best_of: dict[str, str] = {}
    unmeasured: list[str] = []
    for env, (random_score, reference) in data.normalisation.items():
        if random_score is None:
            scores = [s.score for s in scored if s.cell.baseline and s.cell.env == env and s.excluded is None]
            if scores:
                random_score, measured[env] = float(np.mean(scores)), len(scores)
        if reference is None:
            means: dict[str, list[float]] = {}
            for s in scored:
                if not s.cell.baseline and s.cell.env == env and s.excluded is None:
                    means.setdefault(s.cell.configuration, []).append(s.score)
            if means:
                pick = max if data.higher_is_better else min
                best_of[env] = pick(means, key=lambda c: float(np.mean(means[c])))
                reference = float(np.mean(means[best_of[env]]))
        if random_score is None or reference is None or random_score == reference:
            unmeasured.append(env)
            continue
        out[env] = (random_score, reference)
    return (None if unmeasured else out), measured, best_of, unmeasured


def env_matrix(analysis: Analysis, conf: str, env: str, normalised: bool = False) -> np.ndarray | None:
    """The ``(seeds, 1)`` final scores of ``conf`` on ``env`` (None: no seed scored)."""
    cells = analysis.included.get((conf, env), [])
    if not cells:
        return None
    column = np.array([[s.score] for s in cells], dtype=float)
    if normalised:
        random_score, reference = analysis.normalisation[env]  # type: ignore[index]
        column = stats.normalise(column, random_score, reference)
    return column


def aggregate_matrix(analysis: Analysis, conf: str) -> np.ndarray | None:
    """The ``(seeds, envs)`` scores of ``conf`` (normalised when the report is), one row per seed
    scored in every env; None when no seed was."""
    seeds = analysis.aggregate_seeds[conf]
    if not seeds:
        return None
    columns = []
    for env in analysis.envs:
        by_seed: dict[int, float] = {}
        for s in analysis.included[(conf, env)]:
            by_seed.setdefault(s.cell.seed, s.score)  # a seed run twice: its first cell counts
        column = np.array([by_seed[seed] for seed in seeds], dtype=float)
        if analysis.normalised:
            random_score, reference = analysis.normalisation[env]  # type: ignore[index]
            column = stats.normalise(column, random_score, reference)
        columns.append(column)
    return np.stack(columns, axis=1)


def _estimate(a: Analysis) -> None:
    d = a.data
    for env in a.envs:
        raw = {c: m for c in a.configurations if (m := env_matrix(a, c, env)) is not None}
        a.env_metrics[env] = {}
        for key, (_, fn) in metric_set(a.normalised, per_env=True).items():
            matrices = raw
            if key == "optimality_gap":
                matrices = {c: m for c in raw if (m := env_matrix(a, c, env, normalised=True)) is not None}
            a.env_metrics[env][key] = stats.intervals(matrices, fn, d.reps, d.confidence,
                                                      stats.derived_seed(f"{env}:{key}", d.seed))
    agg = {c: m for c in a.configurations if (m := aggregate_matrix(a, c)) is not None}
    for key, (_, fn) in metric_set(a.normalised, per_env=False).items():
        a.aggregate[key] = stats.intervals(agg, fn, d.reps, d.confidence, stats.derived_seed(f"aggregate:{key}", d.seed))
    for x in agg:
        for y in agg:
            if x != y:
                a.poi[(x, y)] = stats.probability_of_improvement_interval(
                    a.direction * agg[x], a.direction * agg[y], d.reps, d.confidence,
                    stats.derived_seed(f"poi:{x}>{y}", d.seed))
    for env in a.envs:
        for conf in a.configurations:
            changes = [s.result.late_change for s in a.included.get((conf, env), [])
                       if s.result is not None and s.result.late_change is not None]
            if changes:
                iv = stats.interval(np.array(changes, dtype=float)[:, None], stats.mean, d.reps, d.confidence,
                                    stats.derived_seed(f"{env}:late_change:{conf}", d.seed))
                a.late[(conf, env)] = (iv, sum(a.direction * c > 0 for c in changes), len(changes))
            runs = [s.result for s in a.included.get((conf, env), []) if s.result is not None
                    and s.result.late_change is not None and s.result.gain is not None]
            shares = [r.late_change / r.gain for r in runs if a.direction * r.gain > 0]  # type: ignore[operator]
            if shares:
                iv = stats.interval(np.array(shares, dtype=float)[:, None], stats.mean, d.reps, d.confidence,
                                    stats.derived_seed(f"{env}:late_share:{conf}", d.seed))
                a.share[(conf, env)] = (iv, len(runs) - len(shares))


def level_verdict(late: stats.Interval, share: stats.Interval | None, direction: int, level_within: float) -> str:
    """The report's verdict on a configuration's ends: *levelled off* when the whole interval of the share of the
    runs' gain that their last window added lies within ``±level_within``; else what :func:`late_verdict` says."""
    if share is not None and -level_within <= float(share.low) and float(share.high) <= level_within:
        return "levelled off"
    return late_verdict(late, direction)


def verdict(a: Analysis, key: tuple[str, str]) -> str:
    share = a.share.get(key)
    return level_verdict(a.late[key][0], share[0] if share else None, a.direction, a.data.level_within)


def late_verdict(iv: stats.Interval, direction: int) -> str:
    """What a mean late change's interval says: the whole interval on the better side of 0, on the worse side,
    or 0 inside it."""
    low, high = sorted((direction * float(iv.low), direction * float(iv.high)))
    if low > 0:
        return "still improving"
    if high < 0:
        return "getting worse"
    return "no change detected"


def cell_budgets(cells: list[ReportCell]) -> list[int | None]:
    """The distinct budgets of ``cells``, smallest first, None (not stated) last."""
    return sorted({c.budget for c in cells}, key=lambda b: (b is None, b or 0))


def shared_curves(curves: list[tuple[tuple[float, ...], tuple[float, ...]]]) -> tuple[np.ndarray, np.ndarray]:
    """Runs' curves on shared env-step values: the values they logged (inside the range every run covers)
    when there are at most ``CURVE_POINTS`` of them, else ``CURVE_POINTS`` evenly spaced ones."""
    grid, values = stats.on_shared_x(curves)
    if len(grid) > CURVE_POINTS:
        grid, values = stats.on_shared_x(curves, points=CURVE_POINTS)
    return grid, values
