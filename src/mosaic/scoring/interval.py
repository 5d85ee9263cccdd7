"""The interval type of every score MOSAIC reports, and Student's t interval of a mean (pure Python).

:class:`Interval` is a point estimate with its confidence interval: a number's (an aggregate score, a
rating, a probability of improvement), or a vector's, one entry per threshold of a performance profile or per
x value of a curve (then :attr:`Interval.x` holds those x values: a band). How it was computed (a stratified
bootstrap, the bootstrap over games, Student's t) is the function's that made it, not the type's.

:func:`t_interval` is Student's t 95% interval of a mean, for the few callers that report the mean of a handful
of independent values and need no numpy (a language-model evaluation's returns, a benchmark's repetitions);
curves over runs get the bootstrap band of :func:`mosaic.scoring.stats.curve_band`.
"""

from __future__ import annotations

import math
import statistics
import sys
from dataclasses import dataclass
from typing import Any, Sequence

# Two-sided 95% quantiles of Student's t for 1..30 degrees of freedom.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)


@dataclass(frozen=True)
class Interval:
    """A point estimate with its confidence interval ``[low, high]``.

    ``point``, ``low`` and ``high`` are numbers, or arrays of one shape for a vector estimate. ``n_runs``: the
    runs (seeds, games) behind it; ``n_tasks``: the tasks (envs, opponents) they span. ``x``: for a band over a
    curve, the x value of each entry (None otherwise).
    """

    point: "float | Any"
    low: "float | Any"
    high: "float | Any"
    n_runs: int = 0
    n_tasks: int = 0
    confidence: float = 0.95
    x: "Any | None" = None

    def as_dict(self) -> dict[str, Any]:
        out = {"point": _plain(self.point), "low": _plain(self.low), "high": _plain(self.high),
               "n_runs": self.n_runs, "n_tasks": self.n_tasks, "confidence": self.confidence}
        if self.x is not None:
            out["x"] = _plain(self.x)
        return out


def _plain(value: Any) -> Any:
    """A numpy array as nested lists (for JSON); anything else as it is. numpy is not imported for this:
    without it loaded, no value can be an array."""
    numpy = sys.modules.get("numpy")
    return value.tolist() if numpy is not None and isinstance(value, numpy.ndarray) else value


def t95(df: int) -> float:
    """The two-sided 95% Student-t quantile (1.96 beyond 30 degrees of freedom)."""
    if df < 1:
        return math.nan
    return _T95[df - 1] if df <= len(_T95) else 1.96


def t_interval(values: Sequence[float]) -> Interval:
    """The mean of ``values`` with Student's t 95% interval, ``mean +- t95(n - 1) * sd / sqrt(n)``; a single
    value has no spread to measure: its interval is the value itself (say so where it matters)."""
    values = list(values)
    if not values:
        raise ValueError("t_interval: no values")
    n = len(values)
    centre = statistics.fmean(values)
    half = t95(n - 1) * statistics.stdev(values) / math.sqrt(n) if n > 1 else 0.0
    return Interval(centre, centre - half, centre + half, n_runs=n, confidence=0.95)
