"""Live fan-out of one run's telemetry to any number of subscribers.

The run's recorder publishes every stored event (its ``seq`` and the exact
JSON line) here; each subscriber has a buffer bounded in bytes. A subscriber that
falls too far behind is not allowed to grow memory without bound: it is
marked *lagging*, its buffer dropped, and it catches up from
``telemetry.jsonl`` on disk instead (see :mod:`mosaic.host.daemon.streaming`).
Everything runs on the daemon's event loop, so no locks are needed.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

#: One stored event as it travels: (seq, type, json line without newline).
Item = tuple[int, str, str]

#: Text a subscriber may have waiting before it is switched to catching up from disk.
DEFAULT_BUFFER_BYTES = 32 << 20


class Subscriber:
    """One consumer's view of the live stream."""

    def __init__(self, limit_bytes: int) -> None:
        self.items: deque[Item] = deque()
        self.limit_bytes = limit_bytes
        self.buffered_bytes = 0
        self.lagging = False
        self.wake = asyncio.Event()

    def push(self, item: Item) -> None:
        if self.lagging:
            return
        if self.buffered_bytes > self.limit_bytes:
            self.lagging = True
            self.items.clear()
            self.buffered_bytes = 0
        else:
            self.items.append(item)
            self.buffered_bytes += len(item[2])
        self.wake.set()

    def drain(self, max_bytes: int) -> list[Item]:
        """The oldest waiting events, about ``max_bytes`` of them (at least one)."""
        items = self.items
        if self.buffered_bytes <= max_bytes:
            out = list(items)
            items.clear()
            self.buffered_bytes = 0
        else:
            out, size = [], 0
            while items and size < max_bytes:
                item = items.popleft()
                size += len(item[2])
                out.append(item)
            self.buffered_bytes -= size
        if not items:
            self.wake.clear()
        return out


class TelemetryHub:
    """Where one run's recorder publishes and its subscribers listen."""

    def __init__(self, next_seq: int = 0, buffer_bytes: int = DEFAULT_BUFFER_BYTES) -> None:
        self.next_seq = next_seq  # seq the next published event will carry
        self.buffer_bytes = buffer_bytes
        self.closed = False  # no event will ever be published again
        self.last_metrics: dict[str, Any] | None = None
        self._subscribers: set[Subscriber] = set()

    def publish(self, seq: int, kind: str, line: str) -> None:
        self.next_seq = seq + 1
        item = (seq, kind, line)
        for sub in self._subscribers:
            sub.push(item)

    def close(self) -> None:
        """The run has ended and its output is fully stored: wake everyone to finish."""
        self.closed = True
        for sub in self._subscribers:
            sub.wake.set()

    def subscribe(self) -> tuple[Subscriber, int]:
        """A new subscriber plus the seq from which it will see live events."""
        sub = Subscriber(self.buffer_bytes)
        self._subscribers.add(sub)
        if self.closed:
            sub.wake.set()
        return sub, self.next_seq

    def unsubscribe(self, sub: Subscriber) -> None:
        self._subscribers.discard(sub)

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)
