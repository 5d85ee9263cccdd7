"""``mosaic arena run|status|report``: tournaments between players from any worker (docs/arena.md)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mosaic.clients.cli.common import _table
from mosaic.errors import UserError


def cmd_run(args: argparse.Namespace) -> int:
    from mosaic.arena.tournament import Tournament, read_spec, run, seat_groups

    spec = read_spec(args.spec)
    seat_groups(spec)  # a game the arena cannot seat is refused before anything is written
    tournament = Tournament.open(spec)
    done = len(tournament.games())
    total = sum(1 for _ in spec.schedule())
    print(f"tournament {spec.name}: {tournament.root}; {done} of {total} games already played", file=sys.stderr)
    report = (lambda line: print(line, file=sys.stderr)) if args.verbose else None
    if args.backend == "ray":
        from mosaic.arena import cluster

        played = cluster.run(tournament, report, address=args.address)
    else:
        if args.address:
            raise UserError("--address: only with --backend ray (the cluster's head); allowed: --backend ray")
        played = run(tournament, report, parallel=args.parallel)
    print(f"tournament {spec.name}: played {played} game(s); {len(tournament.games())} of {total} done; "
          f"next: mosaic arena report {spec.name}", file=sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from mosaic.arena.tournament import Tournament

    tournament = Tournament.get(args.name)
    counts: dict[str, int] = {}
    for game in tournament.games():
        counts[game["pairing"]] = counts.get(game["pairing"], 0) + 1
    rows = [[f"{a} vs {b}", str(counts.get(f"{a}~{b}", 0)), str(tournament.spec.games_per_pairing)]
            for a, b in tournament.spec.pairings()]
    print(_table(rows, ["PAIRING", "PLAYED", "GAMES"]))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mosaic.arena.report import write_report
    from mosaic.arena.tournament import Tournament

    print(write_report(Tournament.get(args.name), Path(args.out) if args.out else None))
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("arena", help="tournaments between trained players, random and scripted play (docs/arena.md)",
                       description="Run tournaments between players from any worker and rate them with intervals.")
    asub = p.add_subparsers(dest="action", required=True)
    q = asub.add_parser("run", help="play every game of a tournament spec not played yet (resumes)")
    q.add_argument("spec")
    q.add_argument("--verbose", "-v", action="store_true", help="a line per game")
    q.add_argument("--parallel", type=int, default=1, metavar="N",
                   help="games played at once (local: N pairs of player processes on this machine)")
    q.add_argument("--backend", default="local", choices=("local", "ray"),
                   help="where games are played: this machine, or an existing Ray cluster (--address)")
    q.add_argument("--address", help="--backend ray: the cluster's head, HOST:PORT")
    q.set_defaults(func=cmd_run)
    q = asub.add_parser("status", help="games played per pairing")
    q.add_argument("name")
    q.set_defaults(func=cmd_status)
    q = asub.add_parser("report", help="ratings with intervals, crosstable, plots")
    q.add_argument("name")
    q.add_argument("--out")
    q.set_defaults(func=cmd_report)
