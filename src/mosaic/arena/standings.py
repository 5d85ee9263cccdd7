"""A tournament's standings, computed once from its journaled games, for every reader of them.

The games become rated games (:func:`mosaic.arena.games.rated_games`), then a Bradley-Terry fit on the Elo
scale with percentile intervals from a seeded bootstrap (ranks and P(best) with them, and the first mover's edge
in Elo), the crosstable with Wilson intervals, and the first mover's record: a :class:`Standings`. ``mosaic arena report``
writes them (:mod:`mosaic.arena.report`, with the spec's resamples) and the GUI's Arena tab shows them live
(with fewer resamples); neither rates anything itself.

Before the seats have alternated in any pairing (a live tournament plays one seating of a pairing first), the
first-move parameter cannot be told apart from the ratings: the ratings are then fitted without it, and a note
says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping

from mosaic.arena.games import rated_games

if TYPE_CHECKING:
    from mosaic.arena.tournament import Tournament
    from mosaic.scoring.interval import Interval
    from mosaic.scoring.population import AlphaSweep, PopulationBootstrap
    from mosaic.scoring.ratings import Crosstable, Game, RatingBootstrap, Record

# The ratings (numpy and scipy, seconds to import) are imported where games are rated, not with this module: the
# GUI imports it when it starts.

#: A spec's ``report`` settings when it gives none.
DEFAULT_REPS, DEFAULT_CONFIDENCE, DEFAULT_SEED = 1000, 0.95, 0
NO_FIRST_MOVE = ("fitted without a first-move parameter: the seats have not alternated within any pairing, so the "
                 "first mover's edge cannot be told apart from the ratings")


def report_settings(report: Mapping[str, Any]) -> tuple[int, float, int]:
    """A spec's ``report`` settings: (bootstrap resamples, confidence, seed)."""
    return (int(report.get("reps", DEFAULT_REPS)), float(report.get("confidence", DEFAULT_CONFIDENCE)),
            int(report.get("seed", DEFAULT_SEED)))


@dataclass(frozen=True)
class PopulationRow:
    """One player's line of the population measures: its Nash weight and Nash rating (its payoff against the
    equilibrium mixture) with their intervals, the share of resamples with it in the Nash support, and its
    alpha-Rank mass with its interval and rank."""

    player: str
    weight: Interval
    rating: Interval
    p_support: float
    mass: Interval
    rank: int


@dataclass(frozen=True)
class Population:
    """Nash averaging, alpha-Rank and the cycles of a tournament's games (:mod:`mosaic.scoring.population`),
    with a bootstrap over games within each pairing (``boot``) and alpha-Rank's sweep over alpha (``sweep``);
    ``boot`` None where the games cannot give them (``why`` says why: a pairing never played, one player).
    ``pooled``: the games pooled, each weighing the same (empty: one game's)."""

    boot: PopulationBootstrap | None = None
    sweep: AlphaSweep | None = None
    why: str = ""
    pooled: tuple[str, ...] = ()

    @property
    def notes(self) -> tuple[str, ...]:
        return self.boot.notes if self.boot is not None else ()

    @property
    def thin(self) -> tuple[tuple[str | None, str, str, int], ...]:
        """The pairings with too few games to tell their result from chance (see ``MIN_GAMES``)."""
        return self.boot.meta.thin if self.boot is not None else ()

    def rows(self) -> list[PopulationRow]:
        """The players by Nash rating (best first), then Nash weight, then alpha-Rank mass."""
        boot = self.boot
        if boot is None:
            return []
        rows = [PopulationRow(p, boot.weights[p], boot.ratings[p], boot.p_support[p], boot.mass[p],
                              boot.alpha_rank.ranks[p]) for p in boot.meta.players]
        return sorted(rows, key=lambda r: (-round(r.rating.point, 9), -r.weight.point, -r.mass.point, r.player))


def compute_population(games: "list[Game] | Mapping[str, list[Game]]", reps: int = DEFAULT_REPS,
                       confidence: float = DEFAULT_CONFIDENCE, seed: int = DEFAULT_SEED) -> Population:
    """Nash averaging, alpha-Rank and cycles of rated ``games`` (``{game: [Game, ...]}``: several games pooled,
    each weighing the same) with ``reps`` bootstrap resamples of the games within each pairing, and the
    alpha sweep of the point estimate. Where the games cannot give them (a pairing never played: a gauntlet,
    a tournament still running) the result says why instead."""
    from mosaic.scoring.population import alpha_sweep, population_bootstrap

    pooled = tuple(sorted(games)) if isinstance(games, Mapping) else ()
    players = {p for g in (games.values() if isinstance(games, Mapping) else [games]) for x in g for p in (x.a, x.b)}
    if len(players) < 2:
        return Population(why="fewer than two players have played", pooled=pooled)
    try:
        boot = population_bootstrap(games, reps=reps, confidence=confidence, seed=seed)
    except ValueError as exc:
        return Population(why=str(exc), pooled=pooled)
    return Population(boot, alpha_sweep(boot.meta), pooled=pooled)


def pooled_population(tournaments: "list[Tournament]", reps: int | None = None) -> Population | None:
    """The population measures of a several-game tournament's games pooled (each game weighing the same, over
    the players in every game), at the first game's report settings; None for fewer than two games with
    finished games."""
    tables = {t.spec.game or t.name: rated_games(t.games(), bool(t.spec.sides)) for t in tournaments}
    tables = {game: rated for game, rated in tables.items() if rated}
    if len(tables) < 2:
        return None
    spec_reps, confidence, seed = report_settings(tournaments[0].spec.report)
    return compute_population(tables, spec_reps if reps is None else reps, confidence, seed)


@dataclass(frozen=True)
class Standing:
    """One player's line of the standings: its rank (1 best; None while it is not rated), Elo with its
    interval, its rank's interval and P(best) over the bootstrap, and its record (None: no game yet)."""

    player: str
    rank: int | None = None
    elo: float | None = None
    interval: Interval | None = None
    ranks: Interval | None = None
    p_best: float | None = None
    record: Record | None = None


@dataclass(frozen=True)
class Standings:
    """A tournament's games rated: ``games`` rated games (comparisons in a team tournament), their crosstable
    (None before any), the bootstrap fit (None where none exists yet: ``why`` says why) and the notes to read
    with them, at ``reps`` resamples, ``confidence`` and ``seed``."""

    games: int
    reps: int
    confidence: float
    seed: int
    table: Crosstable | None = None
    boot: RatingBootstrap | None = None
    why: str = ""
    notes: tuple[str, ...] = ()
    #: Nash averaging, alpha-Rank and cycles of the same games (None: not asked for)
    population: Population | None = None

    @property
    def advantage(self) -> Interval | None:
        """The first mover's edge in Elo with its interval (None: not fitted)."""
        return self.boot.advantage if self.boot is not None else None

    @property
    def first_mover(self) -> Record | None:
        """The first mover's record over every game with one (None: no such game)."""
        return self.table.first_mover if self.table is not None else None

    def rows(self, players: Iterable[str] = ()) -> list[Standing]:
        """The rated players, best first; then the other ``players`` and those of the crosstable, those with
        games by their score (before any fit) and those without last."""
        rated = list(self.boot.fit.ratings) if self.boot is not None else []
        totals = self.table.totals if self.table is not None else {}
        rest = [p for p in dict.fromkeys([*players, *(self.table.players if self.table is not None else ())])
                if p not in rated]
        if self.boot is None:
            rest.sort(key=lambda p: -(totals[p].score if p in totals else -1.0))
        out = []
        for rank, player in enumerate(rated, 1):
            assert self.boot is not None
            out.append(Standing(player, rank, self.boot.fit.ratings[player], self.boot.intervals[player],
                                self.boot.ranks[player], self.boot.p_best[player], totals.get(player)))
        return out + [Standing(player, record=totals.get(player)) for player in rest]


def compute_standings(games: Iterable[Mapping[str, Any]], teams: bool = False, reps: int = DEFAULT_REPS,
                      confidence: float = DEFAULT_CONFIDENCE, seed: int = DEFAULT_SEED,
                      population: bool = True) -> Standings:
    """The standings of journaled ``games`` (of a team tournament: ``teams``): their rated games, crosstable and
    seeded bootstrap fit, with a first-move parameter in a two-player game once the seats have alternated; and
    (``population``) Nash averaging, alpha-Rank and cycles of the same games (:func:`compute_population`)."""
    from mosaic.scoring.ratings import crosstable, rating_bootstrap

    rated = rated_games(games, teams)
    if not rated:
        return Standings(0, reps, confidence, seed, why="no game finished yet")
    table = crosstable(rated, confidence)
    measures = compute_population(rated, reps, confidence, seed) if population else None
    notes: tuple[str, ...] = ()
    try:
        boot = rating_bootstrap(rated, reps=reps, confidence=confidence, seed=seed, first_move_advantage=not teams)
    except ValueError as exc:
        if teams or not str(exc).startswith("first_move_advantage"):
            return Standings(len(rated), reps, confidence, seed, table, why=f"no ratings yet: {exc}",
                             population=measures)
        try:
            boot = rating_bootstrap(rated, reps=reps, confidence=confidence, seed=seed, first_move_advantage=False)
        except ValueError as again:
            return Standings(len(rated), reps, confidence, seed, table, why=f"no ratings yet: {again}",
                             population=measures)
        notes = (NO_FIRST_MOVE,)
    return Standings(len(rated), reps, confidence, seed, table, boot, notes=notes + tuple(boot.notes),
                     population=measures)


def tournament_standings(tournament: Tournament, reps: int | None = None) -> Standings:
    """The standings of ``tournament``'s journal with its spec's report settings (``reps``: fewer resamples)."""
    spec_reps, confidence, seed = report_settings(tournament.spec.report)
    return compute_standings(tournament.games(), bool(tournament.spec.sides),
                             spec_reps if reps is None else reps, confidence, seed)
