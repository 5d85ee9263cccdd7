"""Numbers and values as the report writes them."""

from __future__ import annotations

import json
import math
from typing import Any

from mosaic.scoring import stats


def fmt(value: Any) -> str:
    """A number as the report prints it (4 significant digits)."""
    if value is None:
        return "–"
    value = float(value)
    if not math.isfinite(value):
        return "–"
    text = f"{value:.4g}"
    return "0" if text in ("-0", "0") else text


def fmt_steps(value: float) -> str:
    """A count of env steps, whole (``1224000``, not ``1.224e+06``)."""
    return str(int(value)) if float(value).is_integer() else fmt(value)


def fmt_interval(iv: stats.Interval) -> str:
    return f"{fmt(iv.point)} [{fmt(iv.low)}, {fmt(iv.high)}]"


def fmt_percent_interval(iv: stats.Interval) -> str:
    """A share's interval in percent: ``1.2% [0.8%, 1.6%]``."""
    return f"{fmt(100 * iv.point)}% [{fmt(100 * iv.low)}%, {fmt(100 * iv.high)}%]"


def json_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
