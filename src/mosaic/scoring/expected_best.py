"""The expected best score of a hyperparameter search against the trials spent on it (numpy, scipy).

A search (a tuning study) runs N trials and keeps the best. Its best score depends on luck and on the
budget, so one number hides both; Dodge et al. (EMNLP 2019, "Show Your Work") report instead the expected
best score as a function of the number of trials n: how good a search of n trials is, on average. Both
estimators below take the N finished trials' scores, sorted ``v_(1) <= ... <= v_(N)``, and weigh them; both
are linear in the order statistics, so a stack of resamples costs one matrix product.

- Dodge et al.'s estimator, :func:`expected_max_with_replacement`: the expected max of n draws *with*
  replacement from the empirical distribution of the N scores,
  ``sum_i v_(i) ((i / N)^n - ((i - 1) / N)^n)``. Defined for any n >= 1, but biased low: for n near or
  beyond N it keeps drawing the same N values and cannot reach what n fresh trials would.
- The unbiased form (Tang et al. 2020, "Showing Your Work Doesn't Always Work"),
  :func:`expected_max_without_replacement`: the U-statistic, the mean of the max over all C(N, n) subsets of
  n trials, ``sum_i v_(i) C(i - 1, n - 1) / C(N, n)``: unbiased for the expected max of n i.i.d. trials,
  defined for 1 <= n <= N. At n = 1 both are the mean of the scores; at n = N the unbiased one is their max.
  The weights are computed from log-gamma, never from the binomials themselves. This is what MOSAIC reports
  (:func:`expected_best_curve`'s default).

With ``higher_is_better`` False the best is the minimum: the expected min of ``scores`` is minus the
expected max of ``-scores``. Failed trials are left out before (a NaN is refused, not skipped);
:func:`best_so_far`, the running best in trial order, is the one function here that skips them.

Uncertainty: :func:`expected_best_band` is the percentile bootstrap band: the N scores are resampled with
replacement (resampling draws from ``np.random.default_rng(seed)``), the curve is recomputed on each
resample (ties included: the unbiased estimator stays well defined), and the band at each n is the
percentile interval of those curves. The point is the curve on the scores themselves.

Coverage, measured by simulation (tests/test_expected_best.py: N = 30 trials, 2000 simulated studies, 500
resamples each, nominal 95%, the unbiased estimator against the true expected max of n i.i.d. trials; the
binomial standard error of each figure is at most 0.011):

    =====================  =====  =====  =====  =====  =====  =====
    n (of N = 30)            1      2      5      10     20     30
    =====================  =====  =====  =====  =====  =====  =====
    standard normal        0.936  0.920  0.864  0.773  0.594  0.450
    Beta(2, 5) (skewed)    0.934  0.920  0.861  0.778  0.612  0.478
    =====================  =====  =====  =====  =====  =====  =====

Near 95% only at n = 1 (the mean) and n = 2; it under-covers more and more as n approaches N, because the
estimate becomes max-like: a resample holds only about 63% of the distinct scores, so its curve sits below the
estimate, and at n = N (the sample max) a resample's max never exceeds it: the band's top is the estimate
itself. The misses are almost all on one side, the truth above the band (at n = 10, 22% of studies; at n = 30,
54%). Dodge et al.'s estimator, bootstrapped the same way, covers a little less (normal: 0.936, 0.915, 0.843,
0.737, 0.562, 0.444). So read the band as roughly 95% (0.92 to 0.94) for n up to about N / 15, as optimistic
beyond (about 85% at N / 6, 75% at N / 3), and as no guarantee near N: run several times more trials than the
budget you draw conclusions about.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from scipy.special import gammaln

from mosaic.scoring.interval import Interval
from mosaic.scoring.stats import CHUNK_ELEMENTS, _percentiles, check_bootstrap

#: The estimators :func:`expected_best_curve` and :func:`expected_best_band` accept for ``method``.
METHODS = ("unbiased", "dodge")


# -- checks ----------------------------------------------------------------------------------------
def _as_scores(scores: Any) -> np.ndarray:
    """``scores`` as a finite float vector ``(N,)``, or :class:`ValueError` naming ``scores``."""
    try:
        values = np.asarray(scores, dtype=float)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"scores: not a numeric sequence of trial scores: {exc}") from None
    if values.ndim != 1:
        raise ValueError(f"scores: expected a sequence of trial scores (N,), got an array of shape {values.shape}")
    if values.size == 0:
        raise ValueError("scores: empty: at least one finished trial is needed")
    if not np.all(np.isfinite(values)):
        raise ValueError("scores: contains NaN or infinite scores (leave failed trials out first)")
    return values


def _as_ns(n: Any, name: str, upper: int | None = None) -> tuple[np.ndarray, bool]:
    """``n`` (an int or a sequence of ints >= 1, at most ``upper``) as an int vector, and whether it was one int."""
    scalar = np.ndim(n) == 0
    values = np.asarray(n).reshape(-1)
    if values.size == 0:
        raise ValueError(f"{name}: empty: give at least one number of trials")
    if values.dtype == bool or not np.issubdtype(values.dtype, np.integer):
        raise ValueError(f"{name}: must be integers (numbers of trials), got {n!r}")
    allowed = f"1..{upper}" if upper is not None else ">= 1"
    if values.min() < 1 or (upper is not None and values.max() > upper):
        bad = values[(values < 1) | (values > upper)] if upper is not None else values[values < 1]
        raise ValueError(f"{name}: must lie in {allowed} (the number of trials), got {bad.tolist()}")
    return values.astype(np.int64), scalar


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"method: {method!r} is not one of {', '.join(METHODS)}")


# -- weights of the order statistics ---------------------------------------------------------------
def with_replacement_weights(size: int, ns: np.ndarray) -> np.ndarray:
    """``(size, len(ns))``: the weight of the i-th smallest of ``size`` scores in Dodge et al.'s estimate at
    each n, ``(i / size)^n - ((i - 1) / size)^n`` (each column sums to 1)."""
    i = np.arange(size + 1, dtype=float)[:, None] / size
    cdf = i ** ns[None, :].astype(float)
    return np.diff(cdf, axis=0)


def without_replacement_weights(size: int, ns: np.ndarray) -> np.ndarray:
    """``(size, len(ns))``: the weight of the i-th smallest of ``size`` scores in the unbiased estimate at each
    n <= size, ``C(i - 1, n - 1) / C(size, n)``: the probability that it is the max of a random n-subset.

    From log-gamma: ``C(i - 1, n - 1) / C(N, n) = exp(lgC(i - 1, n - 1) - lgC(N, n))``, zero for i < n.
    """
    i = np.arange(1, size + 1, dtype=float)[:, None]
    n = ns[None, :].astype(float)
    valid = i >= n
    k = np.where(valid, i, n)  # keeps gammaln's arguments positive where the weight is 0 anyway
    log_w = (gammaln(k) - gammaln(n) - gammaln(k - n + 1)
             - (gammaln(size + 1.0) - gammaln(n + 1) - gammaln(size - n + 1)))
    return np.where(valid, np.exp(log_w), 0.0)


def _weights(size: int, ns: np.ndarray, method: str) -> np.ndarray:
    return without_replacement_weights(size, ns) if method == "unbiased" else with_replacement_weights(size, ns)


def _curve_of(values: np.ndarray, weights: np.ndarray, higher_is_better: bool) -> np.ndarray:
    """The curve of ``(..., N)`` scores with ``(N, len(ns))`` weights: ``(..., len(ns))``."""
    if higher_is_better:
        return np.sort(values, axis=-1) @ weights
    return -(np.sort(-values, axis=-1) @ weights)


def _out(curve: np.ndarray, scalar: bool) -> "float | np.ndarray":
    return float(curve[0]) if scalar else curve


# -- the estimators --------------------------------------------------------------------------------
def expected_max_with_replacement(scores: Any, n: "int | Sequence[int]",
                                  higher_is_better: bool = True) -> "float | np.ndarray":
    """Dodge et al.'s expected best of ``n`` trials from the N trial ``scores`` ``(N,)``: the expected max of
    ``n`` draws with replacement from their empirical distribution (the expected min when
    ``higher_is_better`` is False).

    ``n``: an int >= 1 (any size, also beyond N) gives a float; a sequence of them an array ``(len(n),)``.
    """
    values = _as_scores(scores)
    ns, scalar = _as_ns(n, "n")
    return _out(_curve_of(values, with_replacement_weights(values.size, ns), higher_is_better), scalar)


def expected_max_without_replacement(scores: Any, n: "int | Sequence[int]",
                                     higher_is_better: bool = True) -> "float | np.ndarray":
    """The unbiased expected best of ``n`` trials from the N trial ``scores`` ``(N,)``: the mean of the max over
    all subsets of ``n`` of them (Tang et al. 2020), unbiased for the expected max of ``n`` i.i.d. trials (the
    expected min when ``higher_is_better`` is False).

    ``n``: an int in 1..N gives a float; a sequence of them an array ``(len(n),)``. :class:`ValueError` for an
    ``n`` outside 1..N.
    """
    values = _as_scores(scores)
    ns, scalar = _as_ns(n, "n", upper=values.size)
    return _out(_curve_of(values, without_replacement_weights(values.size, ns), higher_is_better), scalar)


def expected_best_curve(scores: Any, ns: "Sequence[int] | None" = None, higher_is_better: bool = True,
                        method: str = "unbiased") -> np.ndarray:
    """The expected best score of a search against its number of trials, from N trial ``scores`` ``(N,)``:
    an array ``(len(ns),)``, one value per number of trials in ``ns`` (default 1..N).

    ``method``: "unbiased" (:func:`expected_max_without_replacement`, ``ns`` within 1..N; what MOSAIC reports)
    or "dodge" (:func:`expected_max_with_replacement`, any ``ns`` >= 1).
    """
    _check_method(method)
    values = _as_scores(scores)
    grid, _ = _ns_of(ns, values.size, method)
    return _curve_of(values, _weights(values.size, grid, method), higher_is_better)


def _ns_of(ns: "Sequence[int] | None", size: int, method: str) -> tuple[np.ndarray, bool]:
    if ns is None:
        return np.arange(1, size + 1, dtype=np.int64), False
    return _as_ns(ns, "ns", upper=size if method == "unbiased" else None)


def expected_best_band(scores: Any, ns: "Sequence[int] | None" = None, reps: int = 2000, confidence: float = 0.95,
                       seed: int = 0, higher_is_better: bool = True, method: str = "unbiased") -> Interval:
    """:func:`expected_best_curve` of N trial ``scores`` ``(N,)`` with its percentile bootstrap band.

    The N scores are resampled with replacement ``reps`` times (from ``np.random.default_rng(seed)``), the curve
    is computed on each resample, and ``low``/``high`` are its percentiles at each n. ``point`` is the curve of
    the scores themselves; ``x`` holds ``ns`` (default 1..N); ``n_runs`` is N, ``n_tasks`` 1. The band
    under-covers as n approaches N (the module docstring gives the measured coverage).
    """
    _check_method(method)
    values = _as_scores(scores)
    grid, _ = _ns_of(ns, values.size, method)
    check_bootstrap(reps, confidence)
    weights = _weights(values.size, grid, method)
    rng = np.random.default_rng(seed)
    size = max(1, CHUNK_ELEMENTS // values.size)
    replicates = []
    for start in range(0, int(reps), size):
        idx = rng.integers(0, values.size, size=(min(size, int(reps) - start), values.size))
        replicates.append(_curve_of(values[idx], weights, higher_is_better))
    low, high = _percentiles(np.concatenate(replicates, axis=0), confidence)
    return Interval(_curve_of(values, weights, higher_is_better), low, high, n_runs=int(values.size), n_tasks=1,
                    confidence=float(confidence), x=grid)


# -- the running best ------------------------------------------------------------------------------
def best_so_far(scores_in_trial_order: Any, higher_is_better: bool = True) -> np.ndarray:
    """The best score after each trial, for ``(N,)`` scores in the order the trials ran: ``(N,)``.

    A NaN (a failed trial) is skipped: the best so far stays what it was; before the first finished trial it
    is NaN. What a search actually reached after each trial, one realisation of what
    :func:`expected_best_curve` averages over.
    """
    try:
        values = np.asarray(scores_in_trial_order, dtype=float)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"scores_in_trial_order: not a numeric sequence: {exc}") from None
    if values.ndim != 1:
        raise ValueError(f"scores_in_trial_order: expected a sequence (N,), got an array of shape {values.shape}")
    running = np.fmax if higher_is_better else np.fmin  # both ignore a NaN beside a number
    return running.accumulate(values) if values.size else values
