"""Rates and means of an evaluation, with 95% confidence intervals.

A rate (success, win, invalid action) gets Wilson's score interval, which stays
inside [0, 1] and is honest for few episodes and for rates near 0 or 1; a mean
(progression, return, tokens) gets Student's t interval (``mosaic.scoring.interval.t_interval``).
"""

from __future__ import annotations

import math
from typing import Sequence

from mosaic.scoring.interval import t_interval

Z95 = 1.959963984540054


def rate(hits: int, n: int) -> dict[str, float]:
    """``hits`` out of ``n`` with Wilson's 95% interval."""
    if n <= 0:
        return {"rate": 0.0, "ci95_low": 0.0, "ci95_high": 1.0, "n": 0}
    p = hits / n
    centre = (p + Z95 ** 2 / (2 * n)) / (1 + Z95 ** 2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + Z95 ** 2 / (4 * n * n)) / (1 + Z95 ** 2 / n)
    low, high = max(0.0, round(centre - half, 12)), min(1.0, round(centre + half, 12))
    return {"rate": p, "ci95_low": low, "ci95_high": high, "n": n}


def mean(values: Sequence[float]) -> dict[str, float]:
    """The mean with Student's t 95% interval (no width from a single value)."""
    n = len(values)
    if n == 0:
        return {"mean": 0.0, "ci95_low": 0.0, "ci95_high": 0.0, "n": 0}
    iv = t_interval(values)
    return {"mean": iv.point, "ci95_low": iv.low, "ci95_high": iv.high, "n": n}
