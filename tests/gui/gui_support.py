"""Helpers for GUI tests: a qasync loop on pytest-qt's QApplication, waits on conditions, pixel checks."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any, Callable

import numpy as np
import psutil
from PySide6.QtGui import QColor, QImage

from mosaic.daemon.endpoint import find_daemon

WAIT_S = 300  # generous for a busy machine; every wait ends on its condition


def run(loop: asyncio.AbstractEventLoop, coro: Any, timeout: float = WAIT_S) -> Any:
    return loop.run_until_complete(asyncio.wait_for(coro, timeout))


def until(loop: asyncio.AbstractEventLoop, predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Run the Qt/asyncio loop until ``predicate()`` is truthy; its value is returned."""

    async def poll() -> Any:
        while True:
            value = predicate()
            if value:
                return value
            await asyncio.sleep(0.05)

    try:
        return run(loop, poll(), timeout)
    except asyncio.TimeoutError:
        raise AssertionError(f"timed out after {timeout} s waiting for {what}") from None


def pixels(image: QImage) -> np.ndarray:
    """An (h, w, 3) uint8 array of a widget grab."""
    image = image.convertToFormat(QImage.Format.Format_RGB888)
    width, height = image.width(), image.height()
    data = np.frombuffer(image.constBits(), dtype=np.uint8, count=image.bytesPerLine() * height)
    return data.reshape(height, image.bytesPerLine())[:, : width * 3].reshape(height, width, 3).copy()


def share_of_colour(image: QImage, colour: str, tolerance: int = 40) -> float:
    """How much of the image is within ``tolerance`` (per channel) of ``colour``."""
    rgb = pixels(image).astype(int)
    target = QColor(colour)
    close = (np.abs(rgb[:, :, 0] - target.red()) <= tolerance) & (np.abs(rgb[:, :, 1] - target.green()) <= tolerance) \
        & (np.abs(rgb[:, :, 2] - target.blue()) <= tolerance)
    return float(close.mean())


def stop_daemon(home, timeout: float = 60) -> None:
    endpoint = find_daemon(home)
    if endpoint is None:
        return
    try:
        proc = psutil.Process(endpoint.pid)
        os.kill(endpoint.pid, signal.SIGTERM)
        proc.wait(timeout)
    except (psutil.NoSuchProcess, ProcessLookupError):
        pass
    except psutil.TimeoutExpired:
        os.kill(endpoint.pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while find_daemon(home) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
