"""``mosaic watch`` and ``mosaic fastlane``: live frames (FastLane is imported lazily: it needs numpy)."""

from __future__ import annotations

import argparse
from typing import Any

from mosaic.clients.cli.common import _table
from mosaic.errors import UserError
from mosaic.runs import RunStore


def _fastlane(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(f"mosaic.fastlane.{module}")
    except ImportError as exc:
        raise UserError(f"FastLane needs numpy ({exc})") from None


def cmd_watch(args: argparse.Namespace) -> int:
    run = RunStore().resolve(args.run)
    cluster = run.read_manifest().get("cluster") or {}
    if cluster.get("backend") == "ray" and not cluster.get("finalized"):
        return _watch_on_cluster(run, cluster, args)
    return _fastlane("viewer").watch(run, stream=args.stream, snapshot_path=args.snapshot, stats=args.stats,
                                     timeout_s=args.timeout, duration_s=args.duration)


def _watch_on_cluster(run: Any, cluster: dict[str, Any], args: argparse.Namespace) -> int:
    """A run on a Ray cluster: its frames are in its node's shared memory; its launcher hands the newest one
    to a viewer here that asks (``--snapshot``); a window or --stats reads them on that node."""
    from pathlib import Path

    if not args.snapshot:
        node = (run.read_manifest().get("node") or {}).get("ip") or "its node"
        raise UserError(f"--snapshot: run {run.run_id} runs on the Ray cluster at {cluster.get('address')}; from "
                        f"here `mosaic watch {run.run_id} --snapshot OUT.png` fetches its newest frame; a window or "
                        f"--stats reads the frames where they are: `mosaic watch` on {node} "
                        "(docs/cluster.md, \"Where files go\")")
    from mosaic.experiments.backends.ray import remote_snapshot

    print(remote_snapshot(run.run_id, run.read_manifest(), Path(args.snapshot), args.stream, args.timeout))
    return 0


def cmd_fastlane_gc(args: argparse.Namespace) -> int:
    removed = _fastlane("gc").collect_garbage(dry_run=args.dry_run, force=args.force)
    verb = "would remove" if args.dry_run else "removed"
    for status in removed:
        print(f"{verb} {status.name}: {status.garbage_reason}")
    print(f"{verb} {len(removed)} segment(s)")
    return 0


def cmd_fastlane_ls(args: argparse.Namespace) -> int:
    rows = [[s.name, s.geometry or "?", str(s.frames), str(s.pid or "?"),
             {True: "alive", False: "gone", None: "?"}[s.writer_alive], s.garbage_reason or "-"]
            for s in _fastlane("gc").list_status()]
    print(_table(rows, ["SEGMENT", "GEOMETRY", "FRAMES", "PID", "WRITER", "GARBAGE"]) if rows
          else "no FastLane segments")
    return 0


def add_parsers(sub: Any) -> None:
    from mosaic.clients.cli.common import HelpFormatter

    p = sub.add_parser("watch", help="live frames of a run (FastLane): a window, a PNG snapshot, or stats",
                       description="Show the frames a run publishes while it trains or evaluates (the run needs "
                                   "fastlane.enabled=true, or `mosaic eval --fastlane`): a window with the newest "
                                   "frame (needs a display), the newest frame as a PNG (--snapshot), or each "
                                   "stream's frame rate and latency (--stats).",
                       epilog="examples:\n  mosaic run --set fastlane.enabled=true        # in one terminal\n"
                              "  mosaic watch latest --snapshot frame.png     # in another\n"
                              "  mosaic watch latest --stats --duration 3",
                       formatter_class=HelpFormatter)
    p.add_argument("run", help="run id, unique prefix, or 'latest'")
    p.add_argument("--stream", help="one stream (e.g. runner-1); default: the first / all")
    p.add_argument("--snapshot", metavar="OUT.png", help="write the newest frame as a PNG and exit")
    p.add_argument("--stats", action="store_true", help="print fps and latency per stream every second")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds --snapshot waits for a frame")
    p.add_argument("--duration", type=float, help="stop the window or --stats after this many seconds")
    p.set_defaults(func=cmd_watch)

    p = sub.add_parser("fastlane", help="FastLane shared-memory segments")
    fl = p.add_subparsers(dest="fastlane_command", required=True)
    q = fl.add_parser("gc", help="remove segments whose writer is gone or whose run has finished")
    q.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    q.add_argument("--force", action="store_true", help="also remove segments written from another host")
    q.set_defaults(func=cmd_fastlane_gc)
    q = fl.add_parser("ls", help="list segments with their writer and whether they are garbage")
    q.set_defaults(func=cmd_fastlane_ls)
