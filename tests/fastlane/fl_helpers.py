"""Writers in child processes and the frame pattern every test checks against."""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
import signal
import time
from typing import Any

import numpy as np

from mosaic.fastlane.ring import Frame, Geometry, RingWriter

CTX = mp.get_context("fork")  # cheap children that share nothing but the shared memory


def unique_name(tag: str = "t") -> str:
    return f"mosaic_fl.test-{os.getpid()}-{secrets.token_hex(4)}.{tag}"


def pattern(geometry: Geometry, index: int) -> np.ndarray:
    """Frame ``index``: every element derived from the index, so any mix of two frames shows."""
    dtype = np.dtype(geometry.dtype)
    value = index % 251 if dtype.itemsize == 1 else index % 30_000
    frame = np.full(geometry.shape, value, dtype)
    frame.flat[0] = (index * 7) % (100 if dtype.itemsize == 1 else 20_000)  # first element differs too
    return frame


def check(frame: Frame, geometry: Geometry, tag: str | None = None) -> None:
    """Raise if ``frame`` is not exactly what the writer published as that index."""
    assert frame.pixels.shape == geometry.shape and frame.pixels.dtype.str == geometry.dtype
    np.testing.assert_array_equal(frame.pixels, pattern(geometry, frame.index))
    assert frame.meta.get("n") == frame.index, frame.meta
    assert (frame.episode, frame.step) == (frame.index // 10, frame.index % 10)
    if tag is not None:
        assert frame.meta.get("tag") == tag, frame.meta


def write_frames(name: str, geometry: Geometry, count: int | None, capacity: int = 4, tag: str = "",
                 duration_s: float | None = None, hold: Any = None, period_s: float = 0.0) -> None:
    """Child body: publish ``count`` frames (or for ``duration_s``), then wait on ``hold`` and close."""
    with RingWriter(name, geometry, capacity) as writer:
        n, end = 0, (time.monotonic() + duration_s) if duration_s else None
        while (count is None or n < count) and (end is None or time.monotonic() < end):
            writer.write(pattern(geometry, n), n // 10, n % 10, {"n": n, "tag": tag})
            n += 1
            if period_s:
                time.sleep(period_s)
        if hold is not None:
            hold.wait(60)


def start(target: Any, *args: Any, **kwargs: Any) -> mp.Process:
    proc = CTX.Process(target=target, args=args, kwargs=kwargs, daemon=True)
    proc.start()
    return proc


def stop(proc: mp.Process, timeout: float = 20) -> None:
    proc.join(timeout)
    if proc.is_alive():
        os.kill(proc.pid, signal.SIGKILL)
        proc.join(5)


def wait_for(predicate: Any, timeout: float = 20.0, interval: float = 0.005) -> Any:
    """Poll until ``predicate()`` is truthy (returns it) or fail at the deadline."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")
