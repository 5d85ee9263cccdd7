"""The meta-game of a population (see :mod:`mosaic.scoring.population`): from games, the antisymmetric payoff
matrix over the players, one game's or several games' pooled, with the pairings too thin to tell (numpy)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from mosaic.scoring.ratings import Game, Tally, tally_games

#: The meta-game payoffs :func:`meta_game` offers.
PAYOFFS = ("logit", "win_rate")
#: A pairing with fewer games is flagged: its result cannot be told from chance.
MIN_GAMES = 5


@dataclass(frozen=True, eq=False)
class MetaGame:
    """The antisymmetric payoff matrix of a population: ``payoff[i, j]`` is ``players[i]``'s payoff against
    ``players[j]`` (``kind``: "logit" or "win_rate", see the module), ``games[i, j]`` the games they played
    (summed over the pooled games). ``parts``: for a pooled table, each game's own table over the same
    players (empty otherwise). ``thin``: the pairings with fewer than ``MIN_GAMES`` games, as
    ``(game name or None, a, b, games)``. ``notes``: what to know before trusting it.
    """

    players: tuple[str, ...]
    payoff: np.ndarray
    games: np.ndarray
    kind: str = "logit"
    parts: Mapping[str, "MetaGame"] = field(default_factory=dict)
    thin: tuple[tuple["str | None", str, str, int], ...] = ()
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, players: Sequence[str], payoff: Any, kind: str = "logit") -> "MetaGame":
        """A meta-game from a payoff matrix ``(n, n)`` given directly (antisymmetric, checked); no game counts."""
        a = np.asarray(payoff, dtype=float)
        players = tuple(players)
        if a.ndim != 2 or a.shape != (len(players), len(players)) or len(set(players)) != len(players):
            raise ValueError(f"payoff: a square matrix with one row per distinct player, got shape {a.shape} "
                             f"for {len(players)} players")
        if not np.all(np.isfinite(a)) or not np.allclose(a, -a.T, rtol=0.0, atol=1e-12):
            raise ValueError("payoff: must be finite and antisymmetric (payoff[i, j] == -payoff[j, i])")
        return cls(players, (a - a.T) / 2.0, np.zeros(a.shape, dtype=int), _kind(kind))


def _kind(payoff: str) -> str:
    if payoff not in PAYOFFS:
        raise ValueError(f"payoff: one of {', '.join(PAYOFFS)}, got {payoff!r}")
    return payoff


@dataclass(frozen=True)
class _Source:
    """One game's tally and where its strata land among the (pooled) players: ``forward`` / ``backward``
    ``(strata,)`` the flat index ``i * n + j`` / ``j * n + i`` of a stratum's pairing (i, j), -1 for a pairing
    with a player left out."""

    name: "str | None"
    tally: Tally
    forward: np.ndarray
    backward: np.ndarray


def _source(name: "str | None", tally: Tally, players: tuple[str, ...]) -> _Source:
    n, where = len(players), {p: k for k, p in enumerate(players)}
    at = np.array([where.get(p, -1) for p in tally.players], dtype=int)
    i, j = at[tally.i], at[tally.j]
    kept = (i >= 0) & (j >= 0)
    return _Source(name, tally, np.where(kept, i * n + j, -1), np.where(kept, j * n + i, -1))


def _scatter(values: np.ndarray, flat: np.ndarray, size: int) -> np.ndarray:
    """``(reps, size)``: each row's ``values`` ``(reps, strata)`` summed at the strata's ``flat`` indices."""
    kept = flat >= 0
    reps = values.shape[0]
    index = (np.arange(reps)[:, None] * size + flat[kept][None, :]).ravel()
    return np.bincount(index, values[:, kept].ravel(), minlength=reps * size).reshape(reps, size)


def _payoffs(source: _Source, counts: np.ndarray, kind: str, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Payoff matrices ``(reps, n, n)`` and game counts from counts ``(reps, strata, 3)`` (wins, draws, losses)."""
    score, played = counts[..., 0] + 0.5 * counts[..., 1], counts.sum(axis=-1)
    points = _scatter(score, source.forward, n * n) + _scatter(played - score, source.backward, n * n)
    games = _scatter(played, source.forward, n * n) + _scatter(played, source.backward, n * n)
    shape = (counts.shape[0], n, n)
    points, games = points.reshape(shape), games.reshape(shape)
    if kind == "logit":
        return np.log((points + 0.5) / (games - points + 0.5)), games
    rate = np.divide(points, games, out=np.full(shape, 0.5), where=games > 0)
    return rate - 0.5, games


def _build(sources: list[_Source], players: tuple[str, ...], kind: str, min_games: int,
           notes: list[str]) -> MetaGame:
    n = len(players)
    parts, thin = {}, []
    for source in sources:
        payoff, games = _payoffs(source, source.tally.counts[None], kind, n)
        payoff, games = payoff[0], games[0].astype(int)
        missing = [(players[i], players[j]) for i in range(n) for j in range(i + 1, n) if games[i, j] == 0]
        if missing:
            where = f" in {source.name!r}" if source.name is not None else ""
            listed = ", ".join(f"{a} vs {b}" for a, b in missing[:10]) + (" ..." if len(missing) > 10 else "")
            raise ValueError(f"games: {len(missing)} pairing(s) never played{where}: {listed}; the meta-game "
                             "needs every pairing (play them, or leave a player out)")
        thin += [(source.name, players[i], players[j], int(games[i, j])) for i in range(n) for j in range(i + 1, n)
                 if games[i, j] < min_games]
        parts[source.name] = MetaGame(players, payoff, games, kind)
    if thin:
        listed = ", ".join(f"{a} vs {b} ({g})" + (f" in {s}" if s is not None else "") for s, a, b, g in thin[:10])
        notes.append(f"{len(thin)} pairing(s) with fewer than {min_games} games: {listed}"
                     + (" ..." if len(thin) > 10 else "") + "; their results cannot be told from chance, nor "
                     "anything that rests on them: play more games there")
    pooled = sources[0].name is not None
    payoff = np.mean([part.payoff for part in parts.values()], axis=0)
    games = np.sum([part.games for part in parts.values()], axis=0)
    return MetaGame(players, payoff, games, kind, parts if pooled else {}, tuple(thin), tuple(notes))


def _check_min_games(min_games: Any) -> int:
    if isinstance(min_games, bool) or not isinstance(min_games, (int, np.integer)) or min_games < 1:
        raise ValueError(f"min_games: an integer >= 1, got {min_games!r}")
    return int(min_games)


def meta_game(games: Iterable[Game], payoff: str = "logit", min_games: int = MIN_GAMES) -> MetaGame:
    """The meta-game of one tournament's ``games`` (a list of :class:`~mosaic.scoring.ratings.Game`, any
    order, seats ignored): ``payoff`` "logit" or "win_rate" (see the module). Raises :class:`ValueError`
    naming the pairings never played."""
    tally = tally_games(games)
    return _build([_source(None, tally, tally.players)], tally.players, _kind(payoff), _check_min_games(min_games),
                  [])


def _pool(tables: Mapping[str, Iterable[Game]]) -> tuple[list[_Source], tuple[str, ...], list[str]]:
    if not isinstance(tables, Mapping) or not tables:
        raise ValueError("tables: a mapping of game name to that game's list of Games, with at least one game")
    tallies = {str(name): tally_games(games) for name, games in sorted(tables.items(), key=lambda kv: str(kv[0]))}
    common = set.intersection(*(set(t.players) for t in tallies.values()))
    players = tuple(sorted(common))
    if len(players) < 2:
        raise ValueError(f"tables: fewer than two players played in every game ({', '.join(players) or 'none'}); "
                         "only those can be pooled")
    notes = []
    for name, tally in tallies.items():
        dropped = sorted(set(tally.players) - common)
        if dropped:
            notes.append(f"{name}: {', '.join(dropped)} left out (not in every pooled game)")
    return [_source(name, tally, players) for name, tally in tallies.items()], players, notes


def pooled_meta_game(tables: Mapping[str, Iterable[Game]], payoff: str = "logit",
                     min_games: int = MIN_GAMES) -> MetaGame:
    """One meta-game from several games' tournaments, ``{game name: [Game, ...]}``: the mean of the per-game
    payoff matrices, each game weighing the same however many matches it had, over the players present in
    every game (the others are dropped and named in ``notes``); each game's own matrix is kept in ``parts``."""
    sources, players, notes = _pool(tables)
    return _build(sources, players, _kind(payoff), _check_min_games(min_games), notes)
