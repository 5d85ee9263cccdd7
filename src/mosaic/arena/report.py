"""A tournament's report: Bradley-Terry ratings with bootstrap intervals, the crosstable, the first mover's edge,
and the population measures (Nash averaging, alpha-Rank, cycles of the beats relation) with their intervals.

``mosaic arena report NAME`` writes ``report.md``, ``ratings.csv``, ``ratings.json``, ``games.csv`` and
``ratings.png`` (ratings with interval bars beside the crosstable's scores) into the tournament's
``report/`` folder (written to a temporary folder first, then moved into place); where every pairing has been
played, ``population.png`` (Nash weights and alpha-Rank mass with intervals, alpha-Rank's sweep over alpha)
and ``beats.png`` (who beats whom, cycles highlighted), their numbers under ``population`` in
``ratings.json``. A several-game tournament's ``report/`` has ``report.md`` with one section per game and one
sub-folder per game with that game's files: each game is rated on its own (no Elo is pooled across games);
the population measures are also pooled across the games (each weighing the same, over the players in every
game: ``population.json``, ``population.png``, ``beats.png`` at the top). The numbers are the tournament's
standings (:mod:`mosaic.arena.standings`, as the GUI's Arena tab shows them), at the spec's ``report`` settings.
:func:`summary_tables` gives the main tables for the terminal.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from mosaic.arena.games import rated_games
from mosaic.arena.standings import Population, Standings, pooled_population, tournament_standings
from mosaic.arena.tournament import Tournament
from mosaic.errors import UserError
from mosaic.runs import staged_folder

FEW_GAMES = 10


def _rated(tournament: Tournament) -> bool:
    """Whether ``tournament`` has a finished game to rate."""
    return bool(rated_games(tournament.games(), bool(tournament.spec.sides)))


def write_reports(tournaments: list[Tournament], out: Path | None = None, whole: bool = True,
                  collect: list[tuple[str, Any]] | None = None) -> Path:
    """The report of a tournament's games (:func:`mosaic.arena.tournament.get_tournaments`): one game's as
    :func:`write_report`; several games': ``report.md`` with a section per game and one of the population
    measures pooled across them, and ``GAME/`` with each game's own report (a game with no finished game yet
    gets a line saying so). ``whole`` false: one game of several asked for alone (``NAME/GAME``): that game's
    :func:`write_report`, in its own folder. ``collect``: each game's ``(title, Standings)`` and the pooled
    ``(title, Population)`` are appended to it (what :func:`summary_tables` prints)."""
    if len(tournaments) == 1 and (tournaments[0].spec.game is None or not whole):
        return write_report(tournaments[0], out, collect)
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
            text = write_report(tournament, staging / game, collect).read_text(encoding="utf-8")
            body = text.strip().splitlines()[1:]  # its own title: the section's heading says it
            while body and not body[0].strip():
                body.pop(0)
            sections += ["#" + line if line.startswith("#") else line for line in body]
            files = "ratings.csv, ratings.json, games.csv, ratings.png" + (
                ", population.png, beats.png" if (staging / game / "population.png").is_file() else "")
            sections += ["", f"Files: `{game}/` ({files}).", ""]
        pooled = pooled_population(tournaments)
        if pooled is not None:
            sections += _pooled_section(pooled, staging, tournaments)
            if collect is not None:
                collect.append((f"{name} (pooled over {', '.join(pooled.pooled)})", pooled))
        (staging / "report.md").write_text("\n".join(sections).rstrip("\n") + "\n", encoding="utf-8")
    return out / "report.md"


def write_report(tournament: Tournament, out: Path | None = None,
                 collect: list[tuple[str, Any]] | None = None) -> Path:
    standings = tournament_standings(tournament)
    if not standings.games:
        raise UserError(f"tournament: {tournament.name!r} has no finished game yet; run it first")
    if standings.boot is None:
        raise UserError(f"tournament: {tournament.name!r}: {standings.why}")
    if collect is not None:
        collect.append((tournament.name, standings))
    out = Path(out or tournament.root / "report")
    population = standings.population
    adaptive = adaptive_json(tournament)
    with staged_folder(out, replace=True, suffix=".tmp") as staging:
        (staging / "report.md").write_text(_markdown(tournament, standings)
                                           + ("\n" + "\n".join(_adaptive_markdown(adaptive)) if adaptive else "")
                                           + ("\n" + "\n".join(population_markdown(population, standings.confidence))
                                              if population is not None else ""), encoding="utf-8")
        (staging / "ratings.csv").write_text(_ratings_csv(standings))
        (staging / "games.csv").write_text(_games_csv(tournament))
        (staging / "ratings.json").write_text(json.dumps({
            "tournament": tournament.name, "games": standings.games, "confidence": standings.confidence,
            "reps": standings.reps, "seed": standings.seed,
            "ratings": {r.player: {"elo": r.elo, "low": r.interval.low, "high": r.interval.high, "p_best": r.p_best}
                        for r in standings.rows()},
            "first_move_advantage_elo": None if standings.advantage is None else standings.advantage.as_dict(),
            "notes": list(standings.notes),
            **({"adaptive": adaptive} if adaptive else {}),
            **({"population": population_json(population)} if population is not None else {})}, indent=2) + "\n")
        _plot(standings, staging / "ratings.png")
        if population is not None and population.boot is not None:
            save_figure(population_figure(population), staging / "population.png")
            save_figure(beats_figure(population), staging / "beats.png")
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
    # a percentile interval of resamples that all fit the same ratings can lie a rounding error off its point
    # estimate: matplotlib refuses a negative bar, so such a side is drawn with no width
    left.errorbar(elo, y, xerr=[np.maximum(elo - low, 0.0), np.maximum(high - elo, 0.0)], fmt="o", capsize=4)
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


# -- the adaptive schedule -----------------------------------------------------------------------------------------
def adaptive_json(tournament: Tournament) -> dict[str, Any] | None:
    """An adaptive tournament's schedule as it ended (or stands): its settings, the games played, each rating's
    Wald interval width, why it stopped, and the games a round robin reaching the same width would take."""
    spec = tournament.spec
    settings = spec.adaptive
    if settings is None:
        return None
    decision = tournament.adaptive_decision()
    if decision is None:
        return {**settings, "stopped": None, "why": "the first round is not played yet"}
    return {**settings, "played": decision.played, "stopped": decision.done or None,
            "widths_elo": decision.widths, "unbounded": list(decision.unbounded),
            "round_robin_games": decision.uniform, "saved": decision.saved,
            "games_per_pairing": {f"{a}~{b}": spec.games_per_pairing + spec.extra.get(f"{a}~{b}", 0)
                                  for a, b in spec.pairings()}}


def _adaptive_markdown(adaptive: dict[str, Any]) -> list[str]:
    lines = ["## Adaptive schedule", "",
             f"After a first round, games went {adaptive['step']} at a time to the pairing whose games narrowed the "
             f"widest rating interval most, to stop once every rating's interval is narrower than "
             f"{adaptive['width']:g} Elo or {adaptive['budget']} games are played (intervals here: Wald intervals "
             "of the Bradley-Terry fit, the schedule's own; the ratings above have the bootstrap's).", ""]
    if adaptive.get("stopped") is None and "played" not in adaptive:
        return lines + [f"Not started: {adaptive['why']}.", ""]
    widest = max(w for p, w in adaptive["widths_elo"].items() if p not in adaptive["unbounded"])
    why = {"width": "every interval narrower than the width", "budget": "the budget spent before the width was "
           "reached", None: "still going: more games are scheduled"}[adaptive["stopped"]]
    lines += [f"- Stopped after {adaptive['played']} games: {why} (widest interval {widest:.0f} Elo).",
              f"- A round robin reaching the same width needs {adaptive['round_robin_games']} games (the fewest even "
              "games per pairing whose uniform schedule gives every interval under the width, at the fitted "
              f"ratings): the adaptive schedule saved {adaptive['saved']} games"
              + (" (a negative number: it took more)." if adaptive["saved"] < 0 else "."),
              *([f"- Not counted: {', '.join(adaptive['unbounded'])}, having won or lost every game: the data "
                 "bound such a rating on one side only, and more of the same games do not narrow it."]
                if adaptive["unbounded"] else []),
              "- Games per pairing: " + ", ".join(f"{k.replace('~', ' vs ')} {v}"
                                                  for k, v in adaptive["games_per_pairing"].items()) + "."]
    return lines + [""]


# -- the population measures: Nash averaging, alpha-Rank, cycles -------------------------------------------------
def _iv(interval: Any, digits: int = 2) -> str:
    return f"{interval.point:.{digits}f} [{interval.low:.{digits}f}, {interval.high:.{digits}f}]"


def _cycle_text(cycle: tuple[str, ...]) -> str:
    return " > ".join([*cycle, cycle[0]])


def population_markdown(population: Population, confidence: float, heading: str = "##",
                         pooled_note: str = "") -> list[str]:
    """The report's section on Nash averaging, alpha-Rank and cycles (or why there is none)."""
    lines = [f"{heading} Population: Nash averaging, alpha-Rank, cycles", ""]
    if pooled_note:
        lines += [pooled_note, ""]
    boot = population.boot
    if boot is None:
        return lines + [f"Not computed: {population.why.rstrip('.')}. The data cannot tell them: Nash averaging, "
                        "alpha-Rank and the cycles need every pairing played (a gauntlet plays only the candidate's).",
                        ""]
    pct = round(confidence * 100)
    ranked, sweep = boot.alpha_rank, population.sweep
    lines += [f"The meta-game: each pairing's payoff is the log-odds of the row player's score (wins + draws/2) with "
              f"half a game added to each side, log((s + 1/2) / (n - s + 1/2)); 0 is an even pairing. Nash averaging: "
              f"the maximum-entropy Nash equilibrium of that game, each player's weight in it and its Nash rating (its "
              f"payoff against the equilibrium mixture: 0 in the support, below 0 for those it beats). alpha-Rank at "
              f"alpha = {ranked.alpha:g}, population m = {ranked.m}: the stationary mass of the evolutionary chain. "
              f"{pct}% intervals from {boot.reps} resamples of the games within each pairing (the ratings' seed).", "",
              f"| player | Nash weight [{pct}%] | in support | Nash rating [{pct}%] | alpha-Rank mass [{pct}%] | "
              "alpha-Rank |", "|---|---|---|---|---|---|"]
    for r in population.rows():
        lines.append(f"| {r.player} | {_iv(r.weight)} | {r.p_support:.0%} | {_iv(r.rating)} | {_iv(r.mass)} | "
                     f"{r.rank} |")
    lines += [""]
    if sweep is not None:
        lines.append(f"alpha sweep ({sweep.alphas[0]:g} to {sweep.alphas[-1]:g}): " + (
            f"the alpha-Rank ranking no longer changes from alpha = {sweep.settled:.3g}"
            + (" (the report's alpha is beyond it)." if sweep.settled <= ranked.alpha else
               f"; the report's alpha = {ranked.alpha:g} is below it: read the ranking at a larger alpha.")
            if sweep.settled is not None else "the ranking still changes at the largest alpha: it has not settled."))
    cyc = boot.cycles
    lines += ["", "Cycles of the beats relation (i beats j when its score against j is above one half): "
              + ("transitive, no cycle in the point estimate" if cyc.transitive else
                 "not transitive; players beating each other round: "
                 + "; ".join("{" + ", ".join(c) + "}" for c in cyc.components if len(c) > 1))
              + f". A cycle in {boot.p_cyclic:.0%} of resamples.", ""]
    shares = [(c, s) for c, s in boot.cycle_share.items() if c in cyc.cycles or s >= 0.05]
    if shares:
        lines += ["| cycle | in the point estimate | share of resamples |", "|---|---|---|"]
        lines += [f"| {_cycle_text(c)} | {'yes' if c in cyc.cycles else 'no'} | {s:.0%} |" for c, s in shares[:20]]
        lines.append("")
    if cyc.truncated:
        lines += [f"More cycles exist than the {len(cyc.cycles)} listed.", ""]
    lines += ["What the data cannot tell:", ""]
    told = False
    if population.thin:
        told = True
        lines.append(f"- {len(population.thin)} pairing(s) played too few games to tell their result from chance: "
                     + ", ".join(f"{a} vs {b} ({n})" + (f" in {g}" if g else "") for g, a, b, n in population.thin[:10])
                     + (" ..." if len(population.thin) > 10 else "") + ".")
    for note in population.notes:
        if "fewer than" in note and "pairing(s)" in note:
            continue  # the thin pairings: said above
        told = True
        lines.append(f"- {note}")
    unsure = [(c, share) for c, share in boot.cycle_share.items() if c in cyc.cycles and share < 0.95]
    if unsure:
        told = True
        lines.append("- A cycle of the point estimate in fewer than 95% of resamples: "
                     + "; ".join(f"{_cycle_text(c)} ({share:.0%})" for c, share in unsure[:5])
                     + ": the data cannot tell it from close pairings.")
    maybe = [(c, share) for c, share in boot.cycle_share.items() if c not in cyc.cycles and share >= 0.05]
    if maybe:
        told = True
        lines.append("- A cycle not in the point estimate but in at least 5% of resamples: "
                     + "; ".join(f"{_cycle_text(c)} ({share:.0%})" for c, share in maybe[:5])
                     + ": it may be there.")
    wide = [r.player for r in population.rows() if r.mass.high - r.mass.low > 0.5]
    if wide:
        told = True
        lines.append(f"- alpha-Rank mass spans more than half the range across resamples for {', '.join(wide)}: "
                     "their ranking against each other is not settled by these games.")
    if not told:
        lines.append("- nothing flagged: every pairing has enough games and every player's place in the support is "
                     "the same in at least 95% of resamples.")
    return lines + [""]


def population_json(population: Population) -> dict[str, Any]:
    """The population measures as the report's JSON keeps them (``why`` and nothing else where none exist)."""
    boot, sweep = population.boot, population.sweep
    if boot is None:
        return {"why": population.why, **({"pooled": list(population.pooled)} if population.pooled else {})}
    cyc = boot.cycles
    return {
        "payoff": boot.meta.kind, "alpha": boot.alpha_rank.alpha, "m": boot.alpha_rank.m, "reps": boot.reps,
        **({"pooled": list(population.pooled)} if population.pooled else {}),
        "players": {r.player: {"nash_weight": _bounds(r.weight), "nash_rating": _bounds(r.rating),
                               "p_support": r.p_support, "alpha_rank_mass": _bounds(r.mass), "alpha_rank": r.rank}
                    for r in population.rows()},
        "cycles": {"transitive": cyc.transitive, "components": [list(c) for c in cyc.components],
                   "beats": [list(e) for e in cyc.beats], "ties": [list(e) for e in cyc.ties],
                   "cycles": [list(c) for c in cyc.cycles], "truncated": cyc.truncated, "p_cyclic": boot.p_cyclic,
                   "share": [{"cycle": list(c), "share": s} for c, s in boot.cycle_share.items()]},
        "alpha_sweep": None if sweep is None else {
            "alphas": [float(a) for a in sweep.alphas], "settled": sweep.settled,
            "mass": {p: [float(x) for x in sweep.mass[:, k]] for k, p in enumerate(sweep.players)}},
        "thin_pairings": [{"game": g, "a": a, "b": b, "games": n} for g, a, b, n in population.thin],
        "notes": list(population.notes)}


def _bounds(interval: Any) -> dict[str, float]:
    return {"point": float(interval.point), "low": float(interval.low), "high": float(interval.high)}


def _pooled_section(pooled: Population, staging: Path, tournaments: list[Tournament]) -> list[str]:
    """The several-game report's pooled section; its JSON and plots at the top of the report folder."""
    confidence = tournaments[0].spec.report.get("confidence", 0.95)
    note = ("Pooled across " + ", ".join(pooled.pooled) + ": each game's meta-game weighs the same (the mean of "
            "the per-game payoff matrices, however many games each had), over the players in every game; each "
            "game's own measures are in its section.")
    (staging / "population.json").write_text(json.dumps(population_json(pooled), indent=2) + "\n", encoding="utf-8")
    if pooled.boot is not None:
        save_figure(population_figure(pooled), staging / "population.png")
        save_figure(beats_figure(pooled), staging / "beats.png")
        note += " Files: population.json, population.png, beats.png."
    return ["## All games pooled", "", *population_markdown(pooled, float(confidence), "###", note)]


def save_figure(fig: Any, path: Path) -> None:
    fig.savefig(path, dpi=110)


def population_figure(population: Population) -> Any:
    """Nash weights and alpha-Rank mass per player with their intervals, and alpha-Rank's mass against alpha."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    boot, sweep = population.boot, population.sweep
    assert boot is not None
    rows = population.rows()
    players = [r.player for r in rows]
    pct = round(next(iter(boot.weights.values())).confidence * 100)
    fig = Figure(figsize=(13, max(3.4, 0.45 * len(players) + 2.0)), layout="constrained")
    FigureCanvasAgg(fig)
    weights, mass, curve = fig.subplots(1, 3, width_ratios=[1, 1, 1.3])
    y = np.arange(len(players))[::-1]
    for ax, get, label in ((weights, lambda r: r.weight, f"Nash weight, {pct}% bootstrap interval"),
                           (mass, lambda r: r.mass, f"alpha-Rank mass, {pct}% bootstrap interval")):
        point = np.array([get(r).point for r in rows])
        low = np.clip(point - np.array([get(r).low for r in rows]), 0, None)
        high = np.clip(np.array([get(r).high for r in rows]) - point, 0, None)
        ax.barh(y, point, color="#0072B2", alpha=0.35)
        ax.errorbar(point, y, xerr=[low, high], fmt="o", color="#0072B2", capsize=4)
        ax.set_yticks(y, players)
        ax.set_xlim(-0.02, 1.05)
        ax.set_xlabel(label)
        ax.grid(axis="x", alpha=0.3)
    weights.set_title("Nash averaging")
    mass.set_title(f"alpha-Rank (alpha {boot.alpha_rank.alpha:g}, m {boot.alpha_rank.m})")
    if sweep is not None:
        for k, player in enumerate(sweep.players):
            curve.plot(sweep.alphas, sweep.mass[:, k], label=player)
        curve.set_xscale("log")
        curve.set_ylim(-0.02, 1.02)
        if sweep.settled is not None:
            curve.axvline(sweep.settled, color="grey", linestyle="--", linewidth=1, label="ranking settled")
        curve.set_xlabel("alpha (ranking intensity)")
        curve.set_ylabel("alpha-Rank mass")
        curve.set_title("alpha sweep")
        curve.legend(fontsize=8, loc="best")
        curve.grid(alpha=0.3)
    return fig


def beats_figure(population: Population) -> Any:
    """The beats graph: an arrow from each player to each player it beats, the arrows of the point estimate's
    cycles in red, each player's alpha-Rank mass in its label."""
    import math

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    boot = population.boot
    assert boot is not None
    cyc = boot.cycles
    players = list(boot.meta.players)
    n = len(players)
    at = {p: (math.cos(math.pi / 2 - 2 * math.pi * k / n), math.sin(math.pi / 2 - 2 * math.pi * k / n))
          for k, p in enumerate(players)}
    in_cycle = {(c[k], c[(k + 1) % len(c)]) for c in cyc.cycles for k in range(len(c))}
    fig = Figure(figsize=(8.5, 6.5), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    for a, b in cyc.beats:
        red = (a, b) in in_cycle
        ax.annotate("", xy=at[b], xytext=at[a],
                    arrowprops={"arrowstyle": "-|>", "color": "#D55E00" if red else "#7f7f7f",
                                "lw": 2.2 if red else 1.0, "shrinkA": 14, "shrinkB": 14, "mutation_scale": 14})
    for a, b in cyc.ties:
        ax.plot(*zip(at[a], at[b]), color="#7f7f7f", linestyle=":", linewidth=1)
    ax.scatter([at[p][0] for p in players], [at[p][1] for p in players], s=300, color="#0072B2", zorder=3)
    mass = boot.alpha_rank.mass
    for p in players:
        x, y = at[p]
        ha = "left" if x > 0.3 else "right" if x < -0.3 else "center"
        va = "bottom" if y > 0.3 else "top" if y < -0.3 else "center"
        ax.text(1.12 * x, 1.12 * y, f"{p}\n(alpha-Rank mass {mass[p]:.2f})", ha=ha, va=va, fontsize=9)
    ax.set_xlim(-2.1, 2.1)
    ax.set_ylim(-1.55, 1.55)
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    handles = [Line2D([], [], color="#7f7f7f", label="beats (score above 1/2)"),
               Line2D([], [], color="#D55E00", lw=2.2, label="in a cycle"),
               Line2D([], [], color="#7f7f7f", linestyle=":", label="even")]
    ax.legend(handles=handles, loc="lower right", fontsize=8)
    ax.set_title("transitive: no cycle" if cyc.transitive else
                 f"{len(cyc.cycles)} cycle(s); a cycle in {boot.p_cyclic:.0%} of resamples")
    return fig


# -- the main tables for the terminal ----------------------------------------------------------------------
def summary_tables(collected: list[tuple[str, Any]]) -> list[tuple[str, list[str], list[list[str]]]]:
    """``(title, header, rows)`` tables of what :func:`write_reports` collected: each game's standings (Elo with
    its interval, P(best), record), its first-move advantage in the title's line, and the population measures;
    the pooled population measures of a several-game tournament."""
    out: list[tuple[str, list[str], list[list[str]]]] = []
    for title, item in collected:
        if isinstance(item, Standings):
            pct = round(item.confidence * 100)
            adv = item.advantage
            first = "" if adv is None else \
                f"; first-move advantage {adv.point:+.0f} Elo [{adv.low:+.0f}, {adv.high:+.0f}]"
            rows = [[str(r.rank), r.player, f"{r.elo:.0f}", f"[{r.interval.low:.0f}, {r.interval.high:.0f}]",
                     f"{r.p_best:.2f}", str(r.record.games), f"{r.record.score:.3f}"]
                    for r in item.rows() if r.rank is not None and r.interval is not None and r.record is not None]
            out.append((f"{title}: standings, {item.games} games{first}",
                        ["RANK", "PLAYER", "ELO", f"{pct}% INTERVAL", "P(BEST)", "GAMES", "SCORE"], rows))
            population = item.population
        else:
            population = item
        if population is None:
            continue
        if population.boot is None:
            out.append((f"{title}: population measures not computed: {population.why}", [], []))
            continue
        rows = [[r.player, _iv(r.weight), f"{r.p_support:.0%}", _iv(r.rating), _iv(r.mass), str(r.rank)]
                for r in population.rows()]
        cyc, boot = population.boot.cycles, population.boot
        cycles = "transitive" if cyc.transitive else "cycles: " + "; ".join(_cycle_text(c) for c in cyc.cycles[:3])
        thin = f"; {len(population.thin)} pairing(s) too thin to tell" if population.thin else ""
        out.append((f"{title}: Nash averaging and alpha-Rank ({cycles}; a cycle in {boot.p_cyclic:.0%} of "
                    f"resamples{thin})",
                    ["PLAYER", "NASH WEIGHT", "IN SUPPORT", "NASH RATING", "ALPHA-RANK MASS", "ALPHA-RANK"], rows))
    return out
