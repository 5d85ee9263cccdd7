"""Aggregate scores of RL runs with honest uncertainty (numpy only).

A *score matrix* is an array of shape ``(runs, tasks)``: one row per run (seed), one column
per task (env), every column holding the same number of runs. A *score dict* maps a
configuration's label to its matrix. The metrics below reduce the last two axes, so they
also take a stack ``(..., runs, tasks)`` and return one value per matrix in the stack; the
bootstrap relies on that to evaluate thousands of resamples in one call.

Uncertainty comes from the stratified bootstrap: each task column is resampled with
replacement on its own (runs are the random part, tasks are fixed), and the interval is the
percentile interval of the resampled statistic. Resampling always draws from
``np.random.default_rng(seed)``, so the same call gives the same interval, everywhere.
Percentile intervals under-cover when there are few runs per task: below about 10 they
are a rough guide, not a guarantee (tests/test_stats.py measures how rough).

The point estimates follow the definitions of Agarwal et al. (2021, "Deep Reinforcement
Learning at the Edge of the Statistical Precipice"): the median is the median over tasks
of the per-task mean, the IQM pools every run of every task.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from mosaic.scoring import curves as _curves
from mosaic.scoring.interval import Interval

Metric = Callable[[np.ndarray], Any]

#: Most array elements one bootstrap chunk may hold (bounds memory; fixed, so results never depend on it).
CHUNK_ELEMENTS = 4_000_000


# -- metrics ---------------------------------------------------------------------------------------
def mean(scores: np.ndarray) -> np.ndarray:
    """Mean of ``(..., runs, tasks)`` scores: the expected score of a run on a task drawn uniformly."""
    return np.mean(scores, axis=(-2, -1))


def median(scores: np.ndarray) -> np.ndarray:
    """Median over tasks of each task's mean score, for ``(..., runs, tasks)``: a typical task's level."""
    return np.median(np.mean(scores, axis=-2), axis=-1)


def iqm(scores: np.ndarray) -> np.ndarray:
    """Interquartile mean of ``(..., runs, tasks)`` scores pooled: the mean of their middle 50%.

    Robust to a few outlying runs yet less noisy than the median; the same cut as
    ``scipy.stats.trim_mean(x, 0.25)`` (``floor(n / 4)`` values dropped at each end).
    """
    flat = np.sort(np.reshape(scores, (*np.shape(scores)[:-2], -1)), axis=-1)
    cut = int(0.25 * flat.shape[-1])
    return np.mean(flat[..., cut:flat.shape[-1] - cut], axis=-1)


def optimality_gap(scores: np.ndarray, threshold: float = 1.0) -> np.ndarray:
    """Mean shortfall below ``threshold`` of ``(..., runs, tasks)`` scores (scores above it count as 0).

    With normalised scores and ``threshold`` 1: how far runs are, on average, from the reference.
    """
    return np.mean(np.maximum(threshold - np.asarray(scores, dtype=float), 0.0), axis=(-2, -1))


METRICS: dict[str, Metric] = {"mean": mean, "median": median, "iqm": iqm, "optimality_gap": optimality_gap}


def normalise(scores: Any, random_score: Any, reference_score: Any) -> np.ndarray:
    """``(x - random) / (reference - random)``: 0 is the random policy's level, 1 the reference's.

    ``random_score`` and ``reference_score`` are numbers or per-task vectors (broadcast over
    the columns of a ``(runs, tasks)`` matrix). A reference below the random score (lower
    raw scores are better) still maps better runs to higher values.
    """
    x = np.asarray(scores, dtype=float)
    low = np.asarray(random_score, dtype=float)
    high = np.asarray(reference_score, dtype=float)
    span = high - low
    if np.any(span == 0) or not np.all(np.isfinite(span)):
        raise ValueError("normalise: the reference score must differ from the random score (and both be finite)")
    return (x - low) / span


# -- checks ----------------------------------------------------------------------------------------
def as_matrix(scores: Any, name: str = "scores") -> np.ndarray:
    """``scores`` as a float ``(runs, tasks)`` matrix, or :class:`ValueError` saying what is wrong."""
    try:
        matrix = np.asarray(scores, dtype=float)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name}: not a rectangular numeric (runs, tasks) matrix (ragged rows?): {exc}") from None
    if matrix.ndim != 2:
        raise ValueError(f"{name}: expected a (runs, tasks) matrix, got an array of shape {matrix.shape}")
    if matrix.size == 0:
        raise ValueError(f"{name}: empty matrix of shape {matrix.shape}: at least one run of one task is needed")
    if not np.all(np.isfinite(matrix)):
        raise ValueError(f"{name}: contains NaN or infinite scores (missing runs must be left out, not NaN)")
    return matrix


def check_bootstrap(reps: Any, confidence: Any) -> None:
    """The arguments every bootstrap of the package takes: ``reps`` an integer >= 1, ``confidence`` in (0, 1)."""
    if isinstance(reps, bool) or not isinstance(reps, (int, np.integer)) or reps < 1:
        raise ValueError(f"reps: must be an integer >= 1, got {reps!r}")
    if isinstance(confidence, bool) or not (isinstance(confidence, (int, float)) and 0.0 < confidence < 1.0):
        raise ValueError(f"confidence: must lie strictly between 0 and 1, got {confidence!r}")


# -- the stratified bootstrap ----------------------------------------------------------------------
def _resample_indices(rng: np.random.Generator, reps: int, runs: int, tasks: int) -> np.ndarray:
    """Run indices ``(reps, runs, tasks)``: each task column drawn with replacement on its own."""
    return rng.integers(0, runs, size=(reps, runs, tasks))


def _apply(statistic: Callable[[np.ndarray], Any], batch: np.ndarray, point_shape: tuple[int, ...]) -> np.ndarray:
    """``statistic`` over a stack of resamples: in one call where it handles stacks, else one by one."""
    try:
        out = np.asarray(statistic(batch), dtype=float)
        if out.shape == (batch.shape[0], *point_shape):
            return out
    except (ValueError, TypeError, IndexError):
        pass
    return np.stack([np.asarray(statistic(one), dtype=float) for one in batch])


def _chunks(reps: int, elements_per_rep: int) -> list[int]:
    size = max(1, CHUNK_ELEMENTS // max(1, elements_per_rep))
    return [min(size, reps - start) for start in range(0, reps, size)]


def bootstrap_distribution(scores: Any, metric: Metric, reps: int = 2000, seed: int = 0) -> np.ndarray:
    """``reps`` stratified-bootstrap replicates of ``metric`` on a ``(runs, tasks)`` matrix.

    Shape ``(reps,)`` for a scalar metric, ``(reps, *shape)`` for one returning an array.
    """
    matrix = as_matrix(scores)
    check_bootstrap(reps, 0.5)
    return _replicates(matrix, metric, int(reps), seed)


def _replicates(data: np.ndarray, statistic: Callable[[np.ndarray], Any], reps: int, seed: int) -> np.ndarray:
    """Replicates of ``statistic`` over resamples of ``data`` ``(runs, tasks, ...)`` (whole rows per task)."""
    rng = np.random.default_rng(seed)
    runs, tasks = data.shape[:2]
    point_shape = np.shape(statistic(data))
    columns = np.arange(tasks)
    out = []
    for size in _chunks(reps, data.size):
        idx = _resample_indices(rng, size, runs, tasks)
        out.append(_apply(statistic, data[idx, columns], point_shape))
    return np.concatenate(out, axis=0)


def _percentiles(replicates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(replicates, [tail, 100.0 - tail], axis=0)
    return low, high


def _scalar_or_array(value: np.ndarray) -> "float | np.ndarray":
    return float(value) if np.ndim(value) == 0 else np.asarray(value)


def interval(scores: Any, metric: "Metric | str", reps: int = 2000, confidence: float = 0.95,
             seed: int = 0) -> Interval:
    """``metric`` of a ``(runs, tasks)`` matrix with its stratified-bootstrap percentile interval.

    ``metric`` is a name from :data:`METRICS` or a callable on ``(..., runs, tasks)`` arrays; it
    may return an array (a vector metric such as a performance profile). A callable that only
    takes one matrix at a time also works, one resample at a time.
    """
    fn = _metric(metric)
    matrix = as_matrix(scores)
    check_bootstrap(reps, confidence)
    replicates = _replicates(matrix, fn, int(reps), seed)
    low, high = _percentiles(replicates, confidence)
    return Interval(_scalar_or_array(np.asarray(fn(matrix), dtype=float)), _scalar_or_array(low),
                    _scalar_or_array(high), n_runs=matrix.shape[0], n_tasks=matrix.shape[1],
                    confidence=float(confidence))


def _metric(metric: "Metric | str") -> Metric:
    if isinstance(metric, str):
        if metric not in METRICS:
            raise ValueError(f"metric: {metric!r} is not one of {', '.join(METRICS)}")
        return METRICS[metric]
    if not callable(metric):
        raise ValueError(f"metric: expected a name from METRICS or a callable, got {type(metric).__name__}")
    return metric


def derived_seed(label: str, seed: int) -> int:
    """A seed for ``label`` from ``seed``: stable across processes and runs (SHA-256, not ``hash``)."""
    digest = hashlib.sha256(f"{seed}\x00{label}".encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "little")


def intervals(score_dict: Mapping[str, Any], metric: "Metric | str", reps: int = 2000, confidence: float = 0.95,
              seed: int = 0) -> dict[str, Interval]:
    """:func:`interval` for each configuration; each resampled with a seed derived from its label,
    so one configuration's interval does not depend on which others are in the dict, nor their order."""
    return {label: interval(scores, metric, reps, confidence, derived_seed(str(label), seed))
            for label, scores in score_dict.items()}


# -- probability of improvement --------------------------------------------------------------------
def probability_of_improvement(x: Any, y: Any) -> "float | np.ndarray":
    """P(X > Y) + P(X = Y) / 2 for a run X of ``x`` and a run Y of ``y`` on the same task, averaged over tasks.

    ``x`` is ``(..., n_x, tasks)``, ``y`` ``(..., n_y, tasks)``; per task this is the Mann-Whitney
    U statistic over ``n_x * n_y``. 0.5: neither tends to score higher.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    wins = (x[..., :, None, :] > y[..., None, :, :]) + 0.5 * (x[..., :, None, :] == y[..., None, :, :])
    return np.mean(np.mean(wins, axis=(-3, -2)), axis=-1)


def _pair(x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    a, b = as_matrix(x, "x"), as_matrix(y, "y")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"x and y must score the same tasks: {a.shape[1]} columns against {b.shape[1]}")
    return a, b


def probability_of_improvement_interval(x: Any, y: Any, reps: int = 2000, confidence: float = 0.95,
                                        seed: int = 0) -> Interval:
    """:func:`probability_of_improvement` with a percentile interval from a stratified bootstrap of both:
    the runs of ``x`` and of ``y`` are resampled within each task, independently of each other."""
    a, b = _pair(x, y)
    check_bootstrap(reps, confidence)
    rng = np.random.default_rng(seed)
    tasks = a.shape[1]
    columns = np.arange(tasks)
    out = []
    for size in _chunks(int(reps), a.shape[0] * b.shape[0] * tasks):
        xs = a[_resample_indices(rng, size, a.shape[0], tasks), columns]
        ys = b[_resample_indices(rng, size, b.shape[0], tasks), columns]
        out.append(probability_of_improvement(xs, ys))
    low, high = _percentiles(np.concatenate(out), confidence)
    return Interval(float(probability_of_improvement(a, b)), float(low), float(high), n_runs=min(a.shape[0], b.shape[0]),
                    n_tasks=tasks, confidence=float(confidence))


# -- performance profiles --------------------------------------------------------------------------
def performance_profile(scores: Any, taus: Any) -> np.ndarray:
    """For each threshold in ``taus``: the fraction of runs scoring above it, averaged over tasks.

    ``scores`` is ``(..., runs, tasks)``; the result ``(..., len(taus))``. Every task weighs the
    same; the curve shows the whole score distribution, not one summary of it.
    """
    s = np.asarray(scores, dtype=float)
    t = np.asarray(taus, dtype=float).reshape(-1)
    return np.mean(np.mean(s[..., None] > t, axis=-3), axis=-2)


def performance_profile_band(scores: Any, taus: Any, reps: int = 2000, confidence: float = 0.95,
                             seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`performance_profile` of a ``(runs, tasks)`` matrix and its pointwise bootstrap band:
    ``(profile, low, high)``, each of ``len(taus)``."""
    t = np.asarray(taus, dtype=float).reshape(-1)
    if t.size == 0 or not np.all(np.isfinite(t)):
        raise ValueError("taus: need at least one finite threshold")
    band = interval(scores, lambda s: performance_profile(s, t), reps, confidence, seed)
    return np.asarray(band.point), np.asarray(band.low), np.asarray(band.high)


# -- sample-efficiency curves ----------------------------------------------------------------------
def curve_intervals(curves: Any, metric: "Metric | str" = iqm, reps: int = 2000, confidence: float = 0.95,
                    seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``metric`` at each x value of ``(runs, tasks, points)`` curves, with a bootstrap band.

    Returns ``(point, low, high)``, each of length ``points``. A resample draws whole runs (their
    curve at every x), since one run's points are not independent of each other.
    """
    fn = _metric(metric)
    try:
        data = np.asarray(curves, dtype=float)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"curves: not a rectangular (runs, tasks, points) array (ragged?): {exc}") from None
    if data.ndim != 3:
        raise ValueError(f"curves: expected a (runs, tasks, points) array, got shape {data.shape}")
    if data.size == 0:
        raise ValueError(f"curves: empty array of shape {data.shape}")
    if not np.all(np.isfinite(data)):
        raise ValueError("curves: contains NaN or infinite values (interpolate on shared x values first: on_shared_x)")
    check_bootstrap(reps, confidence)

    def at_each_x(stack: np.ndarray) -> np.ndarray:  # (..., runs, tasks, points) -> (..., points)
        return np.asarray(fn(np.moveaxis(stack, -1, -3)), dtype=float)

    replicates = _replicates(data, at_each_x, int(reps), seed)
    low, high = _percentiles(replicates, confidence)
    return at_each_x(data), low, high


def on_shared_x(run_curves: Sequence[tuple[Sequence[float], Sequence[float]]],
                points: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Runs' curves ``(xs, ys)`` on x values inside every curve's range: ``(x, values (runs, len(x)))``.

    ``points`` None: every x any curve logged within the shared range; else that many evenly
    spaced x values. Values are interpolated linearly (:func:`mosaic.scoring.curves.interpolate`);
    each curve's xs must be increasing.
    """
    if points is not None and (isinstance(points, bool) or points < 1):
        raise ValueError(f"points: must be >= 1, got {points!r}")
    runs = [([float(v) for v in xs], [float(v) for v in ys]) for xs, ys in run_curves]
    if not runs:
        raise ValueError("on_shared_x: no curves")
    for i, (xs, ys) in enumerate(runs):
        if not xs or len(xs) != len(ys):
            raise ValueError(f"on_shared_x: curve {i} is empty or has {len(xs)} x values for {len(ys)} y values")
        if any(b < a for a, b in zip(xs, xs[1:])) or not all(map(math.isfinite, xs + ys)):
            raise ValueError(f"on_shared_x: curve {i} must have increasing x values and finite values")
    lo, hi = max(xs[0] for xs, _ in runs), min(xs[-1] for xs, _ in runs)
    if lo > hi:
        raise ValueError(f"on_shared_x: the curves share no x range (they start by {lo:g}, one ends at {hi:g})")
    if points is None:
        grid = sorted({x for xs, _ in runs for x in xs if lo <= x <= hi})
    else:
        grid = np.linspace(lo, hi, points).tolist() if hi > lo else [lo]
    values = np.array([[_curves.interpolate(xs, ys, at) for at in grid] for xs, ys in runs], dtype=float)
    return np.asarray(grid, dtype=float), values


def curve_band(run_curves: Sequence[tuple[Sequence[float], Sequence[float]]], metric: "Metric | str" = iqm,
               reps: int = 2000, confidence: float = 0.95, seed: int = 0,
               max_points: int | None = None) -> Interval:
    """Several runs' curves ``(xs, ys)`` (say, seeds of one configuration) as one: ``metric`` over the runs at
    each x value they share, with :func:`curve_intervals`' bootstrap band (whole runs resampled).

    The x values (:attr:`Interval.x`) are those the runs logged inside the range every run covers
    (:func:`on_shared_x`), or ``max_points`` evenly spaced ones when there are more. ``point``, ``low`` and
    ``high`` are arrays of their length; ``n_runs`` counts the runs. :class:`ValueError` when the curves share
    no x range (or one is empty, or its x values decrease: :func:`mosaic.scoring.curves.increasing` first).
    """
    runs = [(list(xs), list(ys)) for xs, ys in run_curves]
    points = None
    if max_points is not None and runs and all(xs for xs, _ in runs):
        # counted first: interpolating every logged x of long runs only to drop it is slow
        lo, hi = max(xs[0] for xs, _ in runs), min(xs[-1] for xs, _ in runs)
        if len({x for xs, _ in runs for x in xs if lo <= x <= hi}) > max_points:
            points = max_points
    grid, values = on_shared_x(runs, points)
    point, low, high = curve_intervals(values[:, None, :], metric, reps, confidence, seed)
    return Interval(point, low, high, n_runs=len(runs), n_tasks=1, confidence=float(confidence), x=grid)
