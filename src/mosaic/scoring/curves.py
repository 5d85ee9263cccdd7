"""Learning curves from telemetry: series, smoothing and interpolation (pure Python).

A ``metrics`` event is a nested JSON object; :func:`flatten` turns it into
dotted keys (``learner.shared.loss_Q``, ``agent_episode_returns_mean.agent_0``)
with numbers as values. :class:`RunCurves` collects a run's events as they
stream in; :func:`ema` smooths a curve as TensorBoard's slider does (an
exponential moving average, debiased at the start); :func:`increasing` and
:func:`interpolate` prepare curves to be read at x values they share. The band
of several runs' curves (say, seeds of one config) is
:func:`mosaic.scoring.stats.curve_band`.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

#: Keys of an event that are bookkeeping, not measurements.
META_KEYS = frozenset({"v", "type", "run_id", "seq", "ts"})
#: The x axes a curve can be drawn against.
X_AXES = ("timesteps_total", "iteration", "wall_time_s")


def flatten(event: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """Numeric leaves of ``event`` under dotted keys (booleans and bookkeeping left out)."""
    out: dict[str, float] = {}
    for key, value in event.items():
        if not prefix and key in META_KEYS:
            continue
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{path}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[path] = float(value)
    return out


@dataclass
class RunCurves:
    """A run's metrics, episodes and log lines, as its telemetry arrives."""

    run_id: str = ""
    points: list[dict[str, float]] = field(default_factory=list)  # one per metrics event
    episodes: list[dict[str, Any]] = field(default_factory=list)
    logs: list[dict[str, Any]] = field(default_factory=list)
    other: list[dict[str, Any]] = field(default_factory=list)  # checkpoints, pool changes, run_*...
    started_at: float | None = None
    last_seq: int = -1

    def add(self, event: Mapping[str, Any]) -> str:
        """Take one event; returns its type. Events already seen (by ``seq``) are skipped."""
        seq = event.get("seq")
        if isinstance(seq, int):
            if seq <= self.last_seq:
                return "duplicate"
            self.last_seq = seq
        kind = str(event.get("type", ""))
        ts = event.get("ts")
        if self.started_at is None and isinstance(ts, (int, float)):
            self.started_at = float(ts)
        if kind == "metrics":
            point = flatten(event)
            if isinstance(ts, (int, float)) and self.started_at is not None:
                point["wall_time_s"] = float(ts) - self.started_at
            self.points.append(point)
        elif kind == "episode":
            self.episodes.append(dict(event))
        elif kind == "log":
            self.logs.append(dict(event))
        else:
            self.other.append(dict(event))
        return kind

    def keys(self) -> list[str]:
        """Every metric key seen, returns first, then the rest alphabetically."""
        seen: set[str] = set()
        for point in self.points:
            seen.update(point)
        seen -= set(X_AXES)
        first = [k for k in ("episode_return_mean", "env_steps_per_s") if k in seen]
        return first + sorted(seen - set(first))

    def series(self, key: str, x: str = "timesteps_total") -> tuple[list[float], list[float]]:
        xs, ys = [], []
        for point in self.points:
            if key in point and x in point:
                xs.append(point[x])
                ys.append(point[key])
        return xs, ys


def ema(values: Sequence[float], weight: float) -> list[float]:
    """TensorBoard's smoothing: ``weight`` 0 leaves the curve as it is, 0.99 smooths it hard."""
    if not 0.0 <= weight < 1.0:
        raise ValueError(f"weight must be in [0, 1), got {weight}")
    out, last, steps = [], 0.0, 0
    for value in values:
        steps += 1
        last = last * weight + (1 - weight) * value
        out.append(last / (1 - weight ** steps))  # debiased: the first point is the first value
    return out


def increasing(xs: Sequence[float], ys: Sequence[float]) -> tuple[list[float], list[float]]:
    """The curve with x never going back (a resumed run may log an x again: its later point wins)."""
    out_x: list[float] = []
    out_y: list[float] = []
    for x, y in zip(xs, ys):
        while out_x and out_x[-1] >= x:
            out_x.pop()
            out_y.pop()
        out_x.append(x)
        out_y.append(y)
    return out_x, out_y


def interpolate(xs: Sequence[float], ys: Sequence[float], at: float) -> float:
    """The curve's value at ``at`` (linear between its points; NaN outside them)."""
    if not xs or at < xs[0] or at > xs[-1]:
        return math.nan
    i = bisect.bisect_left(xs, at)
    if xs[i] == at:
        return ys[i]
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (at - x0) / (x1 - x0)
