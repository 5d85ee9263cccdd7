"""A tournament's report: Bradley-Terry ratings with bootstrap intervals, the crosstable, the first mover's edge.

``mosaic arena report NAME`` writes ``report.md``, ``ratings.csv``, ``ratings.json``, ``games.csv`` and
``ratings.png`` (ratings with interval bars beside the crosstable's scores) into the tournament's
``report/`` folder (written to a temporary folder first, then moved into place). A several-game tournament's
``report/`` has ``report.md`` with one section per game and one sub-folder per game with that game's five
files: each game is rated on its own (no rating is pooled across games). The numbers are the tournament's
standings (:mod:`mosaic.arena.standings`, as the GUI's Arena tab shows them), at the spec's ``report`` settings.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from mosaic.arena.standings import Standings, rated_games, tournament_standings
from mosaic.arena.tournament import Tournament
from mosaic.errors import UserError
from mosaic.runs import staged_folder

FEW_GAMES = 10


def _rated(tournament: Tournament) -> bool:
    """Whether ``tournament`` has a finished game to rate."""
    return bool(rated_games(tournament.games(), bool(tournament.spec.sides)))


def write_reports(tournaments: list[Tournament], out: Path | None = None, whole: bool = True) -> Path:
    """The report of a tournament's games (:func:`mosaic.arena.tournament.get_tournaments`): one game's as
    :func:`write_report`; several games': ``report.md`` with a section per game, and ``GAME/`` with each game's
    own report (a game with no finished game yet gets a line saying so). ``whole`` false: one game of several
    asked for alone (``NAME/GAME``): that game's :func:`write_report`, in its own folder."""
    if len(tournaments) == 1 and (tournaments[0].spec.game is None or not whole):
        return write_report(tournaments[0], out)
    name = tournaments[0].spec.name
    if not any(_rated(t) for t in tournaments):
        raise UserError(f"tournament: {name!r} has no finished game yet; run it first")
    out = Path(out or tournaments[0].root.parent / "report")
    with staged_folder(out, replace=True, suffix=".tmp") as staging:  # a failed report leaves the last one whole
        sections = [f"# Tournament: {name}", "",
                    f"{len(tournaments)} games, each a tournament of its own: its own ratings, crosstable and first "
                    "mover, from its own games only. Ratings are not pooled across games (a player's skill in one "
                    "game says nothing about another), so Elo values of two games do not compare.", ""]
        for tournament in tournaments:
            game = tournament.spec.game
            sections += [f"## Game: {game}", ""]
            if not _rated(tournament):
                sections += [f"No finished game yet ({tournament.root}).", ""]
                continue
            text = write_report(tournament, staging / game).read_text(encoding="utf-8")
            body = text.strip().splitlines()[1:]  # its own title: the section's heading says it
            while body and not body[0].strip():
                body.pop(0)
            sections += ["#" + line if line.startswith("#") else line for line in body]
            sections += ["", f"Files: `{game}/` (ratings.csv, ratings.json, games.csv, ratings.png).", ""]
        (staging / "report.md").write_text("\n".join(sections).rstrip("\n") + "\n", encoding="utf-8")
    return out / "report.md"


def write_report(tournament: Tournament, out: Path | None = None) -> Path:
    standings = tournament_standings(tournament)
    if not standings.games:
        raise UserError(f"tournament: {tournament.name!r} has no finished game yet; run it first")
    if standings.boot is None:
        raise UserError(f"tournament: {tournament.name!r}: {standings.why}")
    out = Path(out or tournament.root / "report")
    with staged_folder(out, replace=True, suffix=".tmp") as staging:
        (staging / "report.md").write_text(_markdown(tournament, standings))
        (staging / "ratings.csv").write_text(_ratings_csv(standings))
        (staging / "games.csv").write_text(_games_csv(tournament))
        (staging / "ratings.json").write_text(json.dumps({
            "tournament": tournament.name, "games": standings.games, "confidence": standings.confidence,
            "reps": standings.reps, "seed": standings.seed,
            "ratings": {r.player: {"elo": r.elo, "low": r.interval.low, "high": r.interval.high, "p_best": r.p_best}
                        for r in standings.rows()},
            "first_move_advantage_elo": None if standings.advantage is None else standings.advantage.as_dict(),
            "notes": list(standings.notes)}, indent=2) + "\n")
        _plot(standings, staging / "ratings.png")
    return out / "report.md"


def _markdown(tournament: Tournament, standings: Standings) -> str:
    spec = tournament.spec
    env = spec.environment
    table, rows, adv = standings.table, standings.rows(), standings.advantage
    assert table is not None
    per_pair = {tuple(sorted(k)): r.games for k, r in table.pairs.items()}
    pct = round(standings.confidence * 100)
    lines = [f"# Tournament: {tournament.name}", "",
             f"- Env: {env['family']}/{env['env_id']}" + (f" {env.get('env_kwargs')}" if env.get("env_kwargs") else ""),
             f"- Format: {spec.format}" + (f" (candidate {spec.candidate})" if spec.candidate else ""),
             (f"- Games: {standings.games} finished of {sum(1 for _ in spec.schedule())} scheduled; "
              f"{min(per_pair.values())} to {max(per_pair.values())} per pairing, seats alternating "
              f"(game g seeded {spec.seed} + g)") if not spec.sides else
             (f"- Team games: sides {', '.join(f'{k} = {v}' for k, v in spec.sides.items())}; games in pairs on one "
              f"env seed ({spec.seed} + pair), sides swapped; each pair rates one comparison per side (the player "
              f"whose team did better on that side wins it): {standings.games} comparisons, "
              f"{min(per_pair.values())} to {max(per_pair.values())} per pairing; no first mover"),
             *([f"- Openings: each game's first {spec.opening_moves} moves random legal moves (seeded), the same for "
                "games 2k and 2k+1 (seats swapped); the players play every move after them"]
               if spec.opening_moves else []),
             f"- Ratings: Bradley-Terry by maximum likelihood on the Elo scale (mean 1000), a draw counting as half a "
             f"win{', with a first-move parameter' if adv is not None else ''}; {pct}% intervals from "
             f"{standings.reps} bootstrap resamples of the games within each pairing (seed {standings.seed}).", "",
             "Players: " + ", ".join(f"`{p.label}` = {p.target}" for p in spec.players), "",
             "## Ratings", "",
             f"| rank | player | Elo | {pct}% interval | rank interval | P(best) | games | score [{pct}% Wilson] |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        iv, rk, tot = r.interval, r.ranks, r.record
        lines.append(f"| {r.rank} | {r.player} | {r.elo:.0f} | [{iv.low:.0f}, {iv.high:.0f}] | "
                     f"{rk.low:.0f}–{rk.high:.0f} | {r.p_best:.2f} | {tot.games} | "
                     f"{tot.score:.3f} [{tot.low:.3f}, {tot.high:.3f}] |")
    if adv is not None:
        lines += ["", f"First-move advantage: {adv.point:+.0f} Elo, {pct}% interval [{adv.low:+.0f}, {adv.high:+.0f}]"
                  + (f"; the first mover scored {table.first_mover.score:.3f} [{table.first_mover.low:.3f}, "
                     f"{table.first_mover.high:.3f}] over {table.first_mover.games} games." if table.first_mover else ".")]
    lines += ["", "## Crosstable", "", "Row player's score against the column player (wins + draws/2 over games), "
              f"with its {pct}% Wilson interval and the games behind it.", "",
              "| | " + " | ".join(table.players) + " |", "|---|" + "---|" * len(table.players)]
    for a in table.players:
        cells = []
        for b in table.players:
            rec = table.pairs.get((a, b))
            cells.append("—" if rec is None else f"{rec.score:.2f} [{rec.low:.2f}, {rec.high:.2f}] ({rec.games})")
        lines.append(f"| {a} | " + " | ".join(cells) + " |")
    lines += ["", "## What these numbers do not support", ""]
    few = sorted(f"{a} vs {b}" for (a, b), n in per_pair.items() if n < FEW_GAMES)
    if few:
        lines.append(f"- Few games: {len(few)} pairing(s) played fewer than {FEW_GAMES} games; bootstrap intervals from "
                     "so few games are too narrow (they cover the truth less often than stated).")
    overlaps = [f"{a.player} and {b.player}" for a, b in zip(rows, rows[1:]) if a.interval.low <= b.interval.high]
    if overlaps:
        lines.append("- No ranking claim between " + "; ".join(overlaps) + ": their intervals overlap.")
    lines.append("- Ratings hold for this env, these players and this pool: an Elo gap is relative to the field, "
                 "not an absolute skill.")
    if spec.opening_moves:
        lines.append(f"- The games start from {spec.opening_moves} random moves: the ratings are of play from such "
                     "positions, not from the empty board (where deterministic players would repeat one game).")
    for note in standings.notes:
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def _ratings_csv(standings: Standings) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["player", "elo", "low", "high", "p_best", "rank_low", "rank_high", "games", "wins", "draws",
                     "losses", "score"])
    for r in standings.rows():
        iv, rk, tot = r.interval, r.ranks, r.record
        writer.writerow([r.player, f"{r.elo:.2f}", f"{iv.low:.2f}", f"{iv.high:.2f}", f"{r.p_best:.4f}",
                         f"{rk.low:.0f}", f"{rk.high:.0f}", tot.games, tot.wins, tot.draws, tot.losses,
                         f"{tot.score:.4f}"])
    return buf.getvalue()


def _games_csv(tournament: Tournament) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["pairing", "game", "seed", "first", "second", "returns", "length"])
    for g in sorted(tournament.games(), key=lambda g: (g["pairing"], g["game"])):
        writer.writerow([g["pairing"], g["game"], g["seed"], g["first"], g["second"], json.dumps(g["returns"]),
                         g["length"]])
    return buf.getvalue()


def _plot(standings: Standings, path: Path) -> None:
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows, table = standings.rows(), standings.table
    assert table is not None
    players = [r.player for r in rows]
    fig = Figure(figsize=(11, max(3.0, 0.5 * len(players) + 1.5)))
    FigureCanvasAgg(fig)
    left, right = fig.subplots(1, 2)
    y = np.arange(len(players))[::-1]
    elo = np.array([r.elo for r in rows])
    low = np.array([r.interval.low for r in rows])
    high = np.array([r.interval.high for r in rows])
    left.errorbar(elo, y, xerr=[elo - low, high - elo], fmt="o", capsize=4)
    left.set_yticks(y, players)
    left.set_xlabel("Elo (Bradley-Terry), 95% bootstrap interval")
    left.grid(axis="x", alpha=0.3)
    order = list(table.players)
    grid = np.full((len(order), len(order)), np.nan)
    for (a, b), rec in table.pairs.items():
        grid[order.index(a), order.index(b)] = rec.score
    image = right.imshow(grid, vmin=0, vmax=1, cmap="RdBu")
    right.set_xticks(range(len(order)), order, rotation=45, ha="right")
    right.set_yticks(range(len(order)), order)
    for i in range(len(order)):
        for j in range(len(order)):
            if not np.isnan(grid[i, j]):
                right.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=8)
    right.set_title("row's score against column")
    fig.colorbar(image, ax=right, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
