"""The arena's population measures (Nash averaging, alpha-Rank, cycles, with bootstrap intervals) of a
tournament report's games.csv, for a tournament whose folder is gone (docs/results keeps games.csv, not the
tournament's journal). The same functions as `mosaic arena report`.

    python scripts/population_from_games.py GAMES_CSV OUT_DIR [--reps 2000] [--seed 0] [--without PLAYER ...]

Writes OUT_DIR/population.json, population.png, beats.png and population.md (the report's section).
``--without PLAYER`` leaves out every game that player played: the population of the others, from the same games
(a player that beats everyone takes the whole Nash equilibrium and all of alpha-Rank's mass, and so hides the
structure among the rest).
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

from mosaic.arena.report import beats_figure, population_figure, population_json, population_markdown, save_figure
from mosaic.arena.standings import compute_population
from mosaic.scoring.ratings import Game


def games_of(path: Path) -> list[Game]:
    """games.csv's two-player games, the first mover as ``a`` (seat player_0): 1 / 0.5 / 0 by the returns."""
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            returns = json.loads(row["returns"])
            first, second = returns["player_0"], returns["player_1"]
            out.append(Game(row["first"], row["second"], 1.0 if first > second else 0.0 if first < second else 0.5, 0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("games", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--without", action="append", default=[], metavar="PLAYER",
                        help="leave out every game this player played (repeatable)")
    args = parser.parse_args()
    games = games_of(args.games)
    named = {name for game in games for name in (game.a, game.b)}
    unknown = sorted(set(args.without) - named)
    if unknown:
        parser.error(f"--without: {', '.join(unknown)}: not a player of {args.games}; its players: "
                     f"{', '.join(sorted(named))}")
    games = [game for game in games if game.a not in args.without and game.b not in args.without]
    population = compute_population(games, reps=args.reps, confidence=args.confidence, seed=args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "population.json").write_text(json.dumps(population_json(population), indent=2) + "\n",
                                              encoding="utf-8")
    (args.out / "population.md").write_text("\n".join(population_markdown(population, args.confidence)),
                                            encoding="utf-8")
    if population.boot is not None:
        save_figure(population_figure(population), args.out / "population.png")
        save_figure(beats_figure(population), args.out / "beats.png")
    print(args.out / "population.md")


if __name__ == "__main__":
    main()
