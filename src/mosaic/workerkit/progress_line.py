"""One redrawn line of progress on a terminal for a job counted in items: ``mosaic eval``'s episodes (drawn by the
worker kit's evaluation, in whichever process plays them) and ``mosaic arena run``'s games.

``eval ttt [######------] 6/12 episodes · 2.4/s · ETA 3s``, on stderr, only where stderr is a terminal: piped
output and logs get no bar (``mosaic run`` and ``mosaic experiment run`` draw theirs the same way:
mosaic.clients.cli.progress and mosaic.clients.cli.experiment). Lines printed meanwhile go through
:meth:`ProgressLine.say`, above the bar.
"""

from __future__ import annotations

import sys
import time
from typing import IO


def format_duration(seconds: float | None) -> str:
    """``45s``, ``3m05s``, ``2h10m``; ``?`` when not known."""
    if seconds is None:
        return "?"
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class ProgressLine:
    """``label [bar] done/total unit · rate/s · ETA``, redrawn after each item on a terminal; silent elsewhere.

    ``done``: items already done before this process started (a resumed tournament's games): counted in the
    bar, not in the rate. ``total`` None: no bar and no ETA (a count of unknown end).
    """

    def __init__(self, label: str, total: int | None, unit: str, done: int = 0, stream: IO[str] | None = None,
                 width: int = 20) -> None:
        self.label, self.total, self.unit, self.width = label, total, unit, width
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = self.start_done = done
        self.started = time.monotonic()
        self.drawn = False
        self.last_draw = 0.0

    def text(self, now: float | None = None) -> str:
        elapsed = (time.monotonic() if now is None else now) - self.started
        new = self.done - self.start_done
        rate = new / elapsed if new and elapsed > 0 else None
        if self.total:
            filled = min(self.width, int(self.width * self.done / self.total))
            count = f"[{'#' * filled}{'-' * (self.width - filled)}] {self.done}/{self.total} {self.unit}"
            left = max(self.total - self.done, 0)
            eta = format_duration(left / rate) if rate else ("0s" if not left else "?")
        else:
            count, eta = f"{self.done} {self.unit}", None
        return (f"{self.label} {count} · " + (f"{rate:.1f}/s" if rate else "-/s")
                + (f" · ETA {eta}" if eta is not None else ""))

    def advance(self, items: int = 1) -> None:
        self.done += items
        self.draw(force=self.total is not None and self.done >= self.total)

    def draw(self, force: bool = True) -> None:
        """Redraw the line (at most ten times a second unless ``force``)."""
        now = time.monotonic()
        if not self.tty or (not force and now - self.last_draw < 0.1):
            return
        self.last_draw = now
        self.stream.write("\r\033[K" + self.text(now))
        self.stream.flush()
        self.drawn = True

    def say(self, line: str) -> None:
        """``line`` on a line of its own, the bar (on a terminal) drawn again below it."""
        self.stream.write(("\r\033[K" if self.drawn else "") + line + "\n")
        self.stream.flush()
        if self.drawn:
            self.draw()

    def close(self) -> None:
        """End the bar's line, its last state left on the terminal."""
        if self.drawn:
            self.draw()
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False

    def __enter__(self) -> "ProgressLine":
        self.draw()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
