"""``mosaic player TARGET``: serve a trained policy (or random or scripted play) as a player, on stdin/stdout.

What a match in another process starts to seat a player without knowing which worker trained it: the
command becomes the worker's own ``--player`` in the worker's own environment (``os.exec``, so the match
talks to the worker directly). The protocol is in :mod:`mosaic.workerkit.player`.
"""

from __future__ import annotations

import argparse
import os
from typing import Any


def cmd_player(args: argparse.Namespace) -> int:
    from mosaic.configkit import json_object
    from mosaic.host.match import player_command

    command, _label = player_command(args.target, json_object(args.options, "--options"))
    os.execv(command[0], command)
    return 0  # not reached


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("player", help="serve a trained run (or random/scripted play) as a player on stdin/stdout",
                       description="Serve TARGET as a player over JSON lines on stdin/stdout "
                                   "(mosaic.workerkit.player): a run id or folder or a checkpoint (served by "
                                   "the worker that trained it), a player config file naming its worker (e.g. a "
                                   "language model), 'random', or 'scripted:MODULE:FUNCTION'.")
    p.add_argument("target")
    p.add_argument("--options", default="{}", help="the worker's player options as JSON (e.g. {\"module_id\": ...})")
    p.set_defaults(func=cmd_player)
