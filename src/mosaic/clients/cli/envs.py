"""``mosaic envs``: build, list and remove per-worker Python environments (docs/worker-environments.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mosaic.host import environments as worker_envs
from mosaic.clients.cli.common import _table
from mosaic.errors import UserError


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _describe(result: worker_envs.BuildResult) -> str:
    record = result.record
    pins = ", ".join(record.get("requirements", [])) or "no pins"
    if not result.built:
        return f"{result.worker}: up to date at {result.path} ({pins}); --force rebuilds"
    return (f"{result.worker}: built at {result.path} in {record.get('build_seconds', 0):.1f} s: "
            f"python {record.get('python_version')}, {len(record.get('packages', {}))} packages installed ({pins})")


def cmd_envs_build(args: argparse.Namespace) -> int:
    if args.all == bool(args.worker):
        raise UserError("envs build: name one WORKER, or pass --all")
    if args.all:
        found = worker_envs.scan()
        names = [name for name, source in sorted(found.sources.items()) if source.declared]
        if not names:
            print("no worker declares an environment")
        for name in names:
            print(_describe(worker_envs.build(name, force=args.force, log=_say)), flush=True)
        return 0
    print(_describe(worker_envs.build(args.worker, force=args.force, log=_say)))
    return 0


def cmd_envs_list(args: argparse.Namespace) -> int:
    rows, problems = worker_envs.list_envs()
    if args.json:
        print(json.dumps({"home": str(worker_envs.envs_root()), "envs": [r.to_dict() for r in rows],
                          "problems": problems}, indent=2))
        return 0
    table: list[list[Any]] = [[r.worker, r.status, r.python_version or "-",
                               str(r.path) if r.path else "(MOSAIC's own)", r.reason] for r in rows]
    print(_table(table, ["WORKER", "STATUS", "PYTHON", "PATH", "NOTE"]) if table else "no workers found")
    for problem in problems:
        print(f"skipped: {problem}")
    return 0


def cmd_envs_remove(args: argparse.Namespace) -> int:
    removed = worker_envs.remove(args.worker)
    print(f"removed {removed}" if removed else f"{args.worker}: has no environment to remove")
    return 0


def add_parsers(sub: Any) -> None:
    """Register ``mosaic envs`` on the main parser's subcommands."""
    p = sub.add_parser("envs", help="per-worker Python environments (built with uv)")
    envs = p.add_subparsers(dest="envs_command", required=True)
    q = envs.add_parser("build", help="build a worker's environment (a no-op when it is up to date)")
    q.add_argument("worker", nargs="?", help="worker name")
    q.add_argument("--all", action="store_true", help="every worker that declares an environment")
    q.add_argument("--force", action="store_true", help="rebuild even when it is up to date")
    q.set_defaults(func=cmd_envs_build)
    q = envs.add_parser("list", help="every worker's environment: path, python, status")
    q.add_argument("--json", action="store_true", help="machine-readable output")
    q.set_defaults(func=cmd_envs_list)
    q = envs.add_parser("remove", help="delete a worker's environment")
    q.add_argument("worker", help="worker name")
    q.set_defaults(func=cmd_envs_remove)
