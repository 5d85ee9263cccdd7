"""Following one stream over time: attach, re-attach after a restart or geometry change, stats.

Readers never get a signal from writers; they notice instead. Between new
frames a follower checks (at most every ``recheck_s``) whether the stream's
name now points at another segment — a restarted writer or a new geometry —
or whether the ring was closed, and then attaches to the successor.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np

from mosaic.fastlane.ring import Frame, RingReader
from mosaic.fastlane.shm import FastLaneError


class StreamFollower:
    def __init__(self, segment: str, recheck_s: float = 0.2, window_s: float = 2.0) -> None:
        self.segment = segment
        self.recheck_s, self.window_s = recheck_s, window_s
        self.reader: RingReader | None = None
        self.attachments = 0
        self.frames_received = 0
        self.last_frame: Frame | None = None
        self._torn_before = 0
        self._buffer: np.ndarray | None = None
        self._last_index = -1
        self._next_try = 0.0
        self._next_check = 0.0
        self._recent: deque[tuple[float, int, int]] = deque()  # (received at, frame index, latency ns)

    @property
    def torn_reads(self) -> int:
        return self._torn_before + (self.reader.torn_reads if self.reader else 0)

    @property
    def attached(self) -> bool:
        return self.reader is not None

    def _attach(self, now: float) -> bool:
        if now < self._next_try:
            return False
        try:
            self.reader = RingReader(self.segment)
        except FastLaneError:  # not there (yet), or a foreign file
            self._next_try = now + 0.02
            return False
        self._buffer = self.reader.new_buffer()
        self._last_index = -1
        self._recent.clear()
        self.attachments += 1
        self._next_check = now + self.recheck_s
        return True

    def _detach(self) -> None:
        if self.reader is not None:
            self._torn_before += self.reader.torn_reads
            self.reader.close()
            self.reader = None

    def poll(self) -> Frame | None:
        """The newest frame if it is newer than the last one returned, else None.

        The frame's pixels live in a buffer reused by the next poll: copy them to keep them.
        """
        now = time.monotonic()
        if self.reader is None and not self._attach(now):
            return None
        frame = self.reader.latest(out=self._buffer)
        if frame is not None and frame.index != self._last_index:
            self._last_index = frame.index
            self._record(frame)
            return frame
        if self.reader.closed or now >= self._next_check:
            self._next_check = now + self.recheck_s
            if self.reader.closed or self.reader.replaced():
                self._detach()
                self._attach(now)
        return None

    def _record(self, frame: Frame) -> None:
        self.frames_received += 1
        self.last_frame = frame
        received = time.monotonic()
        self._recent.append((received, frame.index, max(0, time.time_ns() - frame.timestamp_ns)))
        while self._recent and received - self._recent[0][0] > self.window_s:
            self._recent.popleft()

    def stats(self) -> dict[str, float]:
        """Published fps (from frame numbers) and delivery latency over the last window."""
        recent = list(self._recent)
        out = {"frames": self.frames_received, "torn": self.torn_reads, "fps": 0.0,
               "latency_ms": float("nan"), "latency_max_ms": float("nan")}
        if len(recent) >= 2 and recent[-1][0] > recent[0][0]:
            out["fps"] = (recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0])
        if recent:
            lat = [r[2] / 1e6 for r in recent]
            out["latency_ms"] = sum(lat) / len(lat)
            out["latency_max_ms"] = max(lat)
        return out

    def close(self) -> None:
        self._detach()
