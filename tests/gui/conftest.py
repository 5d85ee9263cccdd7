"""GUI tests: real Qt widgets, offscreen (no display needed), a real daemon where the GUI needs one.

pytest-qt calls ``QApplication.processEvents()`` around every test. With the
GUI's asyncio loop (qasync) on the same QApplication, that would run asyncio
callbacks (gRPC stream replies) while the loop is not running, and their tasks
would fail with "no running event loop". So while a qasync loop is the current
one, those calls process events through it instead.
"""

from __future__ import annotations

import asyncio
import os

import pytestqt.plugin

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

_process_events = pytestqt.plugin._process_events


def _process_events_in_the_loop() -> None:
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:
        loop = None
    if loop is not None and type(loop).__module__.startswith("qasync") and not loop.is_running() \
            and not loop.is_closed():
        loop.run_until_complete(asyncio.sleep(0))
    else:
        _process_events()


pytestqt.plugin._process_events = _process_events_in_the_loop
