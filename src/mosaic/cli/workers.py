"""``mosaic workers``: installed workers, their capabilities, broken ones with their reasons."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mosaic.cli.common import _table
from mosaic.discovery import discover_workers


def cmd_workers(args: argparse.Namespace) -> int:
    found = discover_workers()
    workers = found.filter(args.env_family, args.paradigm, args.algorithm)
    if args.json:
        print(json.dumps({
            "workers": [{"name": w.name, "entry_point": w.entry_point, "python": w.python or sys.executable,
                         "own_environment": w.python is not None,
                         "metadata": w.metadata.to_dict(), "capabilities": w.capabilities.to_dict()}
                        for w in workers],
            "broken": [{"name": b.name, "entry_point": b.entry_point, "reason": b.reason}
                       for b in found.broken]}, indent=2))
        return 0
    rows = [[w.name, w.metadata.version, f"{w.metadata.upstream_library} {w.metadata.upstream_version}",
             ",".join(w.capabilities.algorithms), ",".join(w.capabilities.env_families),
             ",".join(w.capabilities.policy_configurations),
             "own" if w.python else "mosaic's"] for w in workers]
    print(_table(rows, ["WORKER", "VERSION", "UPSTREAM", "ALGORITHMS", "ENV FAMILIES", "POLICIES", "PYTHON ENV"])
          if rows else "no workers match")
    for b in found.broken:
        print(f"broken: {b.name} ({b.entry_point}): {b.reason}")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("workers", help="list installed workers and their capabilities")
    p.add_argument("--env-family")
    p.add_argument("--paradigm")
    p.add_argument("--algorithm")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_workers)
