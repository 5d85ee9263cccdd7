"""What a worker uses: throttled, never-failing publishing of one stream, and run cleanup.

A :class:`Publisher` creates its ring lazily on the first frame (so an env
that is never stepped leaves no segment), re-creates it when the frame
geometry changes, records the stream in the run's registry, and on close
keeps the last frame as ``<run>/fastlane/<stream>.png`` before unlinking the
segment. Any error (no shared memory, an env that cannot render) turns
FastLane off for that stream with one log line: training must never fail
because a viewer feature did.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from mosaic.fastlane.config import FastLaneTarget
from mosaic.fastlane.png import write_png
from mosaic.fastlane.registry import discover, last_frame_path, update_stream, writable
from mosaic.fastlane.ring import Frame, Geometry, RingReader, RingWriter
from mosaic.fastlane.shm import FastLaneError, segment_name, unlink_segment
from mosaic.fastlane.throttle import Throttle

_OPEN: "weakref.WeakSet[Publisher]" = weakref.WeakSet()


def _stderr_log(message: str) -> None:
    print(f"fastlane: {message}", file=sys.stderr)


def save_last_frame(run_dir: Path | str | None, stream: str, frame: Frame | None) -> Path | None:
    """Keep a finished stream's newest frame as a PNG in the run folder (best effort)."""
    if frame is None or not writable(run_dir):
        return None
    meta = {"stream": stream, "index": frame.index, "episode": frame.episode, "step": frame.step,
            "timestamp_ns": frame.timestamp_ns, **frame.meta}
    try:
        return write_png(last_frame_path(run_dir, stream), frame.pixels, meta)
    except OSError:
        return None


class Publisher:
    """One stream of one run, written by this process."""

    def __init__(self, target: FastLaneTarget, stream: str,
                 log: Callable[[str], Any] | None = None, owner: Mapping[str, Any] | None = None) -> None:
        self.target, self.stream = target, stream
        self.segment = segment_name(target.run_id, stream)
        cfg = target.config
        self.throttle = Throttle(cfg.fps, cfg.max_overhead)
        self.log = log or _stderr_log
        self.owner = dict(owner or {})
        self.failed: str | None = None
        self.frames = 0
        self.busy_s = 0.0  # time spent rendering and publishing: what FastLane cost this process
        self._writer: RingWriter | None = None
        self._registry = writable(target.run_dir)
        _OPEN.add(self)

    def due(self) -> bool:
        """Cheap check before rendering: not failed and the throttle allows a frame."""
        return self.failed is None and self.throttle.due()

    def offer(self, render: Callable[[], Any], episode: int, step: int,
              meta: Mapping[str, Any] | Callable[[], Mapping[str, Any]] | None = None) -> bool:
        """Render and publish if a frame is due; True if one was published."""
        if not self.due():
            return False
        started, t0 = time.monotonic(), time.perf_counter()
        try:
            pixels = render()
            if pixels is None:
                raise FastLaneError("render() returned None (was the env built with render_mode='rgb_array'?)")
            self.publish(np.asarray(pixels), episode, step, meta() if callable(meta) else meta)
        except Exception as exc:  # never let a viewer feature break training
            self.fail(f"{type(exc).__name__}: {exc}")
            return False
        cost = time.perf_counter() - t0
        self.busy_s += cost
        self.throttle.done(started, cost)
        return True

    def publish(self, pixels: np.ndarray, episode: int = 0, step: int = 0,
                meta: Mapping[str, Any] | None = None) -> int:
        """Write one frame now (no throttle); a new geometry re-creates the ring."""
        geometry = Geometry.of(pixels)
        if self._writer is None or self._writer.geometry != geometry:
            self._open(geometry)
        index = self._writer.write(pixels, episode, step, meta)
        self.frames += 1
        return index

    def _open(self, geometry: Geometry) -> None:
        old = self._writer
        owner = {"run_id": self.target.run_id, "run_dir": self.target.run_dir, "stream": self.stream,
                 **self.owner}
        # The new ring replaces the old name atomically; then the old one is marked
        # closed, so its readers find the successor as soon as they look.
        self._writer = RingWriter(self.segment, geometry, self.target.config.capacity, owner=owner)
        if old is not None:
            old.close(unlink=False)
        if self._registry:
            try:
                update_stream(self.target.run_dir, self.stream, segment=self.segment, pid=os.getpid(),
                              geometry=geometry.to_dict(), state="live", started=time.time(),
                              owner=self.owner)
            except OSError:
                self._registry = False

    def fail(self, reason: str) -> None:
        if self.failed is None:
            self.failed = reason
            self.log(f"stream {self.stream!r} turned off: {reason}")
        self._close_writer()

    def _close_writer(self) -> Frame | None:
        writer, self._writer = self._writer, None
        if writer is None:
            return None
        last = writer.last_frame()
        writer.close(unlink=True)
        return last

    def close(self) -> None:
        """End the stream: keep its last frame in the run folder, unlink its segment."""
        last = self._close_writer()
        if last is None:
            return
        saved = save_last_frame(self.target.run_dir, self.stream, last)
        if self._registry:
            try:
                update_stream(self.target.run_dir, self.stream, state="closed", frames=self.frames,
                              busy_s=round(self.busy_s, 4),
                              last_frame=str(saved.relative_to(self.target.run_dir)) if saved else None)
            except (OSError, ValueError):
                pass


@atexit.register
def _close_all() -> None:
    for publisher in list(_OPEN):
        try:
            publisher.close()
        except Exception:
            pass


def finish_run(run_dir: Path | str, run_id: str | None = None) -> list[str]:
    """Unlink every segment a run left behind (writers in other processes), keeping last frames.

    Runtimes call this when a run ends; ``mosaic fastlane gc`` does the same
    for runs that crashed. Returns the segment names removed.
    """
    run_dir = Path(run_dir)
    removed = []
    for info in discover(run_dir, run_id or run_dir.name):
        if not info.live:
            continue
        reader = None
        inode = None
        try:
            reader = RingReader(info.segment)
            inode = reader.inode
            frame = reader.latest()
            if frame is not None:
                save_last_frame(run_dir, info.name, frame)
        except FastLaneError:
            pass
        finally:
            if reader is not None:
                reader.close()
        if unlink_segment(info.segment, inode=inode):
            removed.append(info.segment)
        if writable(run_dir):
            try:
                update_stream(run_dir, info.name, state="closed")
            except OSError:
                pass
    return removed
