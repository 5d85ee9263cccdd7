"""The bootstrap over games of a population's meta-game: intervals for Nash averaging and alpha-Rank, and the
share of resamples in which each cycle appears (numpy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np

from mosaic.scoring.interval import Interval
from mosaic.scoring.population.alpharank import ALPHA, POPULATION, AlphaRank, _alpha_mass, _check_alpha, alpha_rank
from mosaic.scoring.population.cycles import MAX_CYCLES, Cycles, _beats, _check_cap, _cycles_of, cycles
from mosaic.scoring.population.metagame import (MIN_GAMES, MetaGame, _build, _check_min_games, _kind, _payoffs,
                                                _pool, _source)
from mosaic.scoring.population.nash import Nash, _max_entropy_nash, nash_averaging
from mosaic.scoring.ratings import Game, resample_tally, tally_games
from mosaic.scoring.stats import check_bootstrap


@dataclass(frozen=True, eq=False)
class PopulationBootstrap:
    """:func:`population_bootstrap`'s result: the point estimates (``meta``, ``nash``, ``alpha_rank``,
    ``cycles``) and, over ``reps`` resamples, percentile intervals of each player's Nash ``weights``, Nash
    ``ratings`` and alpha-Rank ``mass`` (``n_runs``: the player's games, ``n_tasks``: its opponents),
    ``p_support`` the share of resamples with the player in the Nash support, ``p_cyclic`` the share with
    any cycle, and ``cycle_share`` each cycle's share (the point estimate's cycles and any seen in a
    resample; a share of a cycle the enumeration's cap cut off is a lower bound, said in ``notes``)."""

    meta: MetaGame
    nash: Nash
    alpha_rank: AlphaRank
    cycles: Cycles
    weights: dict[str, Interval]
    ratings: dict[str, Interval]
    mass: dict[str, Interval]
    p_support: dict[str, float]
    p_cyclic: float
    cycle_share: dict[tuple[str, ...], float]
    reps: int
    notes: tuple[str, ...] = ()


def population_bootstrap(games: "Iterable[Game] | Mapping[str, Iterable[Game]]", reps: int = 1000,
                         confidence: float = 0.95, seed: int = 0, payoff: str = "logit", alpha: float = ALPHA,
                         m: int = POPULATION, min_games: int = MIN_GAMES,
                         max_cycles: int = MAX_CYCLES) -> PopulationBootstrap:
    """Nash averaging, alpha-Rank and cycles of ``games`` (a list of Games, or ``{game name: [Game, ...]}``
    to pool several games as :func:`pooled_meta_game` does) with a bootstrap over games: each pairing's games
    (each pooled game's separately) resampled with replacement among themselves, ``reps`` times, from
    ``np.random.default_rng(seed)``; every measure recomputed on each resample."""
    check_bootstrap(reps, confidence)
    _check_alpha(alpha, m)
    cap, kind, min_games = _check_cap(max_cycles), _kind(payoff), _check_min_games(min_games)
    if isinstance(games, Mapping):
        sources, players, notes = _pool(games)
    else:
        tally = tally_games(games)
        sources, players, notes = [_source(None, tally, tally.players)], tally.players, []
    meta = _build(sources, players, kind, min_games, notes)
    nash, ranked, point_cycles = nash_averaging(meta), alpha_rank(meta, alpha, m), cycles(meta, cap)
    n, rng = len(players), np.random.default_rng(seed)
    sample = np.mean([_payoffs(s, resample_tally(s.tally, int(reps), rng), kind, n)[0] for s in sources], axis=0)
    seen = [np.array([w > 0 for w in nash.weights.values()])]
    weights = np.zeros((int(reps), n))
    for r, a in enumerate(sample):
        weights[r] = _max_entropy_nash(a, seen)
        support = weights[r] > 0
        if not any(np.array_equal(support, s) for s in seen) and len(seen) < 16:
            seen.append(support)
    ratings = np.einsum("rij,rj->ri", sample, weights)
    mass = _alpha_mass(sample, float(alpha), int(m))
    edges = np.stack([_beats(a) for a in sample])
    keys, multiplicity = np.unique(edges.reshape(int(reps), -1), axis=0, return_counts=True)
    share: dict[tuple[str, ...], int] = {tuple(c): 0 for c in point_cycles.cycles}
    cyclic, cut = 0, 0
    for key, count in zip(keys, multiplicity):
        components, found, truncated = _cycles_of(key.reshape(n, n), cap)
        cyclic += int(count) if any(len(c) > 1 for c in components) else 0
        cut += int(count) if truncated else 0
        for c in found:
            name = tuple(players[k] for k in c)
            share[name] = share.get(name, 0) + int(count)
    tail = 100.0 * (1.0 - confidence) / 2.0
    played = meta.games.sum(axis=1)

    def intervals(point: Mapping[str, float], draws: np.ndarray) -> dict[str, Interval]:
        low, high = np.percentile(draws, [tail, 100.0 - tail], axis=0)
        return {p: Interval(float(point[p]), float(low[k]), float(high[k]), n_runs=int(played[k]), n_tasks=n - 1,
                            confidence=float(confidence)) for k, p in enumerate(players)}

    p_support = dict(zip(players, np.mean(weights > 0, axis=0).tolist()))
    notes = list(meta.notes)
    if cut:
        notes.append(f"in {cut} of {reps} resamples the cycle enumeration stopped at {cap} cycles: shares of "
                     "cycles are lower bounds")
    undecided = [p for p, s in p_support.items() if 0.05 < s < 0.95]
    if undecided:
        notes.append(f"in the Nash support in between 5% and 95% of resamples: {', '.join(undecided)}: the data "
                     "cannot tell whether they belong to the equilibrium")
    return PopulationBootstrap(
        meta=meta, nash=nash, alpha_rank=ranked, cycles=point_cycles, weights=intervals(nash.weights, weights),
        ratings=intervals(nash.ratings, ratings), mass=intervals(ranked.mass, mass), p_support=p_support,
        p_cyclic=cyclic / reps, cycle_share={c: k / reps for c, k in sorted(share.items(), key=lambda kv: -kv[1])},
        reps=int(reps), notes=tuple(notes))
