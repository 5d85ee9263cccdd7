"""Driving the GUI from code: a qasync loop on a QApplication, waits on conditions, pixel checks.

Used by the GUI's tests, the screenshot script and the responsiveness bench,
all offscreen (``QT_QPA_PLATFORM=offscreen``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Callable

import numpy as np
from PySide6.QtGui import QColor, QImage

from mosaic.configkit import set_path

WAIT_S = 300.0  # generous for a busy machine; every wait ends on its condition


def event_loop(app: Any) -> asyncio.AbstractEventLoop:
    """A qasync loop on ``app``, set as the current asyncio loop."""
    import qasync

    loop = qasync.QEventLoop(app, already_running=False)
    asyncio.set_event_loop(loop)
    return loop


def open_window(home: Any, width: int = 1280, height: int = 820) -> tuple[Any, asyncio.AbstractEventLoop, Any]:
    """(QApplication, its qasync loop, a shown MainWindow for ``home``): what a script driving the GUI needs."""
    import sys

    from PySide6.QtWidgets import QApplication

    from mosaic.clients.gui.main_window import MainWindow

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setQuitOnLastWindowClosed(False)
    loop = event_loop(app)
    window = MainWindow(home)
    window.resize(width, height)
    window.show()
    return app, loop, window


def close_window(loop: asyncio.AbstractEventLoop, window: Any, home: Any) -> None:
    """Stop the window's streams, close it, and stop the daemon serving ``home``."""
    try:
        run(loop, window.stop())
    finally:
        window.close()
        stop_daemon(home)


def run(loop: asyncio.AbstractEventLoop, coro: Any, timeout: float = WAIT_S) -> Any:
    """Run the loop until ``coro`` is done (at most ``timeout`` s) and return its result.

    Not ``loop.run_until_complete``: qasync's processes Qt events once more
    after the loop has stopped, and an asyncio callback due then (a background
    task waking from a sleep) runs with no running loop and fails.
    """
    future = asyncio.ensure_future(asyncio.wait_for(coro, timeout), loop=loop)
    future.add_done_callback(lambda _f: loop.stop())
    loop.run_forever()
    if not future.done():
        raise RuntimeError("the event loop stopped before the scenario finished")
    return future.result()


def inside(loop: asyncio.AbstractEventLoop, scenario: Callable[[], Any]) -> Any:
    """Run ``scenario()`` (a coroutine function) with the loop running, and return its result.

    Code that drives the GUI from outside (tests, the screenshot script, the
    bench) does all of it in here. With the loop stopped, a Qt call that
    delivers posted events (a grab, a show, a layout) could run asyncio
    callbacks, and their tasks would fail with "no running event loop"; in the
    app the loop always runs.
    """
    return run(loop, scenario())


async def wait(predicate: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
    """Let the loop run until ``predicate()`` is truthy; its value is returned."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


async def fill(window: Any, worker: str, **values: Any) -> Any:
    """Choose ``worker`` in the New run tab and show its default config with ``values`` (dotted paths) set."""
    view = window.new_run
    window.tabs.setCurrentWidget(view)
    view.workers.setCurrentText(worker)
    await wait(lambda: view.document and view.document["worker"] == worker, f"the {worker} form")
    config = json.loads(json.dumps(view.document["default_config"]))
    for path, value in values.items():
        set_path(config, path, value)
    view.form.set_value(config)
    return view.form


async def submit(window: Any) -> Any:
    """Click Submit; the set of new run ids, or the error text shown instead."""
    before = set(window.runs.runs)
    window.new_run.buttons["Submit"].click()
    return await wait(lambda: (set(window.runs.runs) - before) or window.new_run.error.text(),
                      "a new run or an error")


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
    close = ((np.abs(rgb[:, :, 0] - target.red()) <= tolerance) & (np.abs(rgb[:, :, 1] - target.green()) <= tolerance)
             & (np.abs(rgb[:, :, 2] - target.blue()) <= tolerance))
    return float(close.mean())


def stop_daemon(home: Any, timeout: float = 60.0) -> None:
    """Stop the daemon serving ``home`` (one the window started), waiting for it to let go of the home
    (killed if it has not after ``timeout`` seconds)."""
    from mosaic.host.daemon.endpoint import stop_daemon as stop

    stop(home, timeout, kill_after=True)
