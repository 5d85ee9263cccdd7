"""GUI tests: real Qt widgets, offscreen (no display needed), a real daemon where the GUI needs one.

The window's asyncio loop (qasync) shares the QApplication. Qt events processed
while that loop is stopped would run asyncio callbacks (a background task
waking from a sleep) with no running loop, and the task would fail. Tests drive
the window with the loop running (``mosaic.clients.gui.drive``), and pytest-qt's
``processEvents()`` around each test goes through the loop while a qasync loop
is the current one.
"""

from __future__ import annotations

import asyncio
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytestqt.plugin  # noqa: E402

from mosaic.clients.gui.drive import run  # noqa: E402

_process_events = pytestqt.plugin._process_events


def _process_events_in_the_loop() -> None:
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        loop = None
    if loop is not None and type(loop).__module__.startswith("qasync") and not loop.is_running() \
            and not loop.is_closed():
        run(loop, asyncio.sleep(0))
    else:
        _process_events()


pytestqt.plugin._process_events = _process_events_in_the_loop
