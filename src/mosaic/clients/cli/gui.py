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
    from mosaic.clients.gui.app import main

    return main(RunStore().home)


def add_parsers(sub: Any) -> None:
    parser = sub.add_parser("gui", help="the desktop GUI: workers, new runs, live runs, comparisons",
                            description="Open MOSAIC's desktop GUI for the current MOSAIC_HOME. It talks to "
                                        "the daemon serving that home and starts one if none does.")
    parser.set_defaults(func=cmd_gui)
