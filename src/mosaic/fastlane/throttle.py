"""When to render: an fps cap plus a budget on the share of wall time rendering may take.

Rendering is the expensive part (MPE draws a 700x700 frame in ~20 ms), so a
fixed 30 fps could cost training half its speed. The throttle therefore
spaces frames by ``max(1/fps, cost/max_overhead)``, where ``cost`` is a
running average of how long rendering plus publishing took: cheap envs stream
at the cap, expensive ones at whatever keeps the overhead within budget.
The check itself is one clock read and a comparison.
"""

from __future__ import annotations

import time


class Throttle:
    def __init__(self, fps: float = 30.0, max_overhead: float = 0.0) -> None:
        self.min_interval = 1.0 / fps if fps > 0 else 0.0
        self.max_overhead = max_overhead
        self.cost_s = 0.0  # running average of one render + publish
        self.interval = self.min_interval
        self._next = 0.0

    def due(self, now: float | None = None) -> bool:
        """Is it time (``now``, monotonic; default: the clock's) for another frame? (cheap: call it every env
        step)."""
        return (time.monotonic() if now is None else now) >= self._next

    def done(self, started: float, cost_s: float) -> None:
        """Record a frame that began at ``started`` (monotonic) and took ``cost_s``."""
        self.cost_s = cost_s if self.cost_s == 0.0 else 0.8 * self.cost_s + 0.2 * cost_s
        budget = self.cost_s / self.max_overhead if self.max_overhead > 0 else 0.0
        self.interval = max(self.min_interval, budget)
        self._next = started + self.interval

    @property
    def effective_fps(self) -> float:
        return 1.0 / self.interval if self.interval > 0 else float("inf")
