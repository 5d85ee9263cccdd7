"""``mosaic gui``: the desktop GUI (the ``gui`` extra)."""

from __future__ import annotations

import argparse
import importlib.util
from typing import Any

from mosaic.errors import UserError
from mosaic.runs import RunStore

GUI_PACKAGES = ("PySide6", "pyqtgraph", "qasync", "grpc")


def cmd_gui(args: argparse.Namespace) -> int:
    missing = [name for name in GUI_PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise UserError(f"the GUI needs the 'gui' extra ({', '.join(missing)} missing): "
                        "pip install 'mosaic-marl[gui]', or run scripts/bootstrap")
    if not has_display():
        raise UserError("the GUI needs a display: none here (DISPLAY and WAYLAND_DISPLAY are unset, and "
                        "QT_QPA_PLATFORM names no platform that needs none); run it where there is one, or use the "
                        "command line (`mosaic runs`, `mosaic watch RUN --snapshot out.png`)")
    from mosaic.clients.gui.app import main

    return main(RunStore().home)


#: Qt platforms that draw without a display server.
HEADLESS_PLATFORMS = ("offscreen", "minimal", "vnc", "eglfs", "linuxfb", "vkkhrdisplay")


def has_display() -> bool:
    """Whether Qt can open a window here: a display server named by the environment, a Qt platform that needs
    none (QT_QPA_PLATFORM=offscreen, as the GUI's tests use), or a system other than Linux and the BSDs (macOS
    and Windows always have one)."""
    import os
    import sys

    platform = os.environ.get("QT_QPA_PLATFORM", "").split(":")[0].strip().lower()
    if platform in HEADLESS_PLATFORMS or not sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def add_parsers(sub: Any) -> None:
    parser = sub.add_parser("gui", help="the desktop GUI: workers, new runs, live runs, comparisons",
                            description="Open MOSAIC's desktop GUI for the current MOSAIC_HOME. It talks to "
                                        "the daemon serving that home and starts one if none does.")
    parser.set_defaults(func=cmd_gui)
