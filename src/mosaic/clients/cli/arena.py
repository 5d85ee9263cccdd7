"""``mosaic arena run|status|report``: tournaments between players from any worker (docs/arena.md)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, Callable

from mosaic.clients.cli.common import _table
from mosaic.errors import UserError
from mosaic.workerkit.progress_line import ProgressLine


def cmd_run(args: argparse.Namespace) -> int:
    from mosaic.arena.tournament import adaptive_line, check_players, check_seating, open_tournaments, read_specs, run

    specs = read_specs(args.spec)
    check_seating(specs)  # a game the arena cannot seat, or a player that cannot play, is refused before
    check_players(specs)  # anything is written
    if args.address and args.backend != "ray":
        raise UserError("--address: only with --backend ray (the cluster's head); allowed: --backend ray")
    tournaments = open_tournaments(specs)
    for tournament in tournaments:
        spec = tournament.spec
        done = len(tournament.games())
        total = sum(1 for _ in spec.schedule())
        print(f"tournament {tournament.name}: {tournament.root}; {done} of {total} games already played",
              file=sys.stderr)
        with ProgressLine(f"arena {tournament.name}", total, "games", done=done) as progress:
            report = _games_counted(progress, args.verbose)
            if args.backend == "ray" or (args.parallel or 1) > 1:
                from mosaic.arena import driver

                played = 0
                while True:  # an adaptive schedule: each step's games as shards, until it stops
                    played += driver.run(tournament, args.backend, report, parallel=args.parallel,
                                         address=args.address, announce=progress.say)
                    step = tournament.adapt(args.parallel or 1)
                    if step is None or step.done:
                        break
            else:  # one game after another in this process: no daemon needed
                played = run(tournament, report)
        total = sum(1 for _ in spec.schedule())
        print(f"tournament {tournament.name}: played {played} game(s); {len(tournament.games())} of {total} done",
              file=sys.stderr)
        if spec.adaptive is not None:
            decision = tournament.adapt()
            if decision is not None:
                print(f"tournament {tournament.name}: {adaptive_line(decision)}", file=sys.stderr)
    print(f"next: mosaic arena report {specs[0].name}", file=sys.stderr)
    return 0


#: How the arena reports a finished game (mosaic.arena.tournament.journal_to): ``PAIRING game N: ...``.
_GAME_LINE = re.compile(r"\S+ game \d+: ")


def _games_counted(progress: ProgressLine, verbose: bool) -> Callable[[str], None]:
    """The arena's report of each game, counted on ``progress`` (a line on a terminal: games done of the
    total, their rate, the time left); with ``verbose``, each line said too."""
    def report(line: str) -> None:
        if _GAME_LINE.match(line):
            progress.advance()
        if verbose:
            progress.say(line)
    return report


def cmd_status(args: argparse.Namespace) -> int:
    from mosaic.arena.tournament import get_tournaments

    tournaments = get_tournaments(args.name)
    several = len(tournaments) > 1 or tournaments[0].spec.game is not None
    rows = []
    for tournament in tournaments:
        counts: dict[str, int] = {}
        for game in tournament.games():
            counts[game["pairing"]] = counts.get(game["pairing"], 0) + 1
        spec = tournament.spec
        rows += [[*([spec.game] if several else []), f"{a} vs {b}", str(counts.get(f"{a}~{b}", 0)),
                  str(spec.games_per_pairing + spec.extra.get(f"{a}~{b}", 0))] for a, b in spec.pairings()]
    print(_table(rows, [*(["GAME"] if several else []), "PAIRING", "PLAYED", "GAMES"]))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mosaic.arena.report import summary_tables, write_reports
    from mosaic.arena.tournament import get_tournaments

    collected: list[Any] = []
    path = write_reports(get_tournaments(args.name), Path(args.out) if args.out else None, whole="/" not in args.name,
                         collect=collected)
    for title, header, rows in summary_tables(collected):  # the main tables, then where the files are
        print(title)
        if rows:
            print(_table(rows, header))
        print()
    files = sorted(p.relative_to(path.parent).as_posix() for p in path.parent.rglob("*") if p.is_file())
    print(f"files in {path.parent}: {', '.join(files)}")
    print(path)
    return 0


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise UserError(f"--parallel: {text!r}; allowed: an integer >= 1")
    return value


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("arena", help="tournaments between trained players, random and scripted play (docs/arena.md)",
                       description="Run tournaments between players from any worker and rate them with intervals.")
    asub = p.add_subparsers(dest="action", required=True)
    q = asub.add_parser("run", help="play every game of a tournament spec not played yet (resumes)")
    q.add_argument("spec")
    q.add_argument("--verbose", "-v", action="store_true", help="a line per game")
    q.add_argument("--parallel", type=_positive, default=None, metavar="N",
                   help="shards played at once, each a run on the backend (local: the daemon, whose CPU limits "
                        "still apply; started if none runs); default: one game after another in this process, "
                        "or every shard at once on a cluster")
    q.add_argument("--backend", default="local", choices=("local", "ray"),
                   help="where shards run: this machine (its daemon with --parallel), or an existing Ray cluster "
                        "(--address)")
    q.add_argument("--address", help="--backend ray: the cluster's head, HOST:PORT")
    q.set_defaults(func=cmd_run)
    q = asub.add_parser("status", help="games played per pairing (per game of a several-game spec)")
    q.add_argument("name", help="the spec's name (NAME/GAME: one game of a several-game spec)")
    q.set_defaults(func=cmd_status)
    q = asub.add_parser("report", help="ratings with intervals, crosstable, Nash averaging, alpha-Rank and cycles, "
                                       "plots (each game rated on its own, the population measures also pooled)")
    q.add_argument("name", help="the spec's name (NAME/GAME: one game of a several-game spec)")
    q.add_argument("--out")
    q.set_defaults(func=cmd_report)
