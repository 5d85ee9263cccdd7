"""Adaptive scheduling of a tournament: after a first round, games go to the pairings that narrow the widest
rating interval most, until every rating's interval is narrower than a stated width or a game budget is spent.

The spec's ``adaptive: {width, budget, step}`` turns it on (:mod:`mosaic.arena.tournament`): the first round is
``games_per_pairing`` games of every pairing; then, one decision at a time, ``step`` more games (an even
number: the seats alternate) go to the pairing chosen here, until every player's interval is narrower than
``width`` Elo or the next step would pass ``budget`` games in all. The decisions are kept in the tournament's
``adaptive.jsonl``, so a resumed tournament plays the games it had decided on, and, the games being seeded,
decides the same again.

The intervals here are Wald intervals of a Bradley-Terry fit on the Elo scale (400 / ln 10 per logit), from
its observed information: fast enough to decide after every step, and vectorised over many tournaments at
once (the simulations of tests/test_arena_schedule.py run thousands). The fit adds one virtual draw per player
against a player of rating 0 (as the ratings do where no finite fit exists), which keeps it finite after a
whitewash; ratings are centred (their mean is 0, the report's 1000), and a rating's interval is that of the
centred rating: ``z * sqrt(diag(P H^-1 P))`` either side, H the information, P the centring projection. The
report's bootstrap intervals are computed afterwards from the games, as for any tournament.

The choice: for each pairing (i, j) it could play, ``step`` more games add ``step * p (1 - p) (e_i - e_j)
(e_i - e_j)^T`` to the information at the fitted win probability p; the pairing whose games leave the widest
interval narrowest is chosen (the result least certain where it matters: a close pairing between players
whose ratings rest on few games, never a foregone one). A round robin at the same width, for comparison
(:func:`uniform_games`), is the fewest even games per pairing whose uniform schedule gives every interval
under ``width`` at the same fitted ratings: the report says how many games the adaptive schedule saved
against it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Sequence

import numpy as np

#: Elo points per logit.
ELO = 400.0 / math.log(10.0)
_NEWTON_STEPS = 60


def _z(confidence: float) -> float:
    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def tally(players: Sequence[str], games: Sequence[tuple[str, str, float]]) -> tuple[np.ndarray, np.ndarray]:
    """``(points, played)`` ``(n, n)``: ``points[i, j]`` i's score against j (wins + draws/2), ``played[i, j]``
    their games, from ``(a, b, a's score)`` triples."""
    where = {p: k for k, p in enumerate(players)}
    n = len(players)
    points, played = np.zeros((n, n)), np.zeros((n, n))
    for a, b, score in games:
        i, j = where[a], where[b]
        points[i, j] += score
        points[j, i] += 1.0 - score
        played[i, j] += 1
        played[j, i] += 1
    return points, played


def fit(points: np.ndarray, played: np.ndarray, start: "np.ndarray | None" = None) -> np.ndarray:
    """Bradley-Terry ratings in logits ``(..., n)``, centred, by Newton's method on ``points`` and ``played``
    ``(..., n, n)`` (any leading batch shape), with one virtual draw per player against a rating of 0
    (``start``: where Newton's method starts, e.g. the fit before the last games)."""
    points, played = np.asarray(points, float), np.asarray(played, float)
    r = np.zeros(points.shape[:-1]) if start is None else np.array(start, dtype=float)
    for _ in range(_NEWTON_STEPS):
        p = _sigmoid(r[..., :, None] - r[..., None, :])
        own = _sigmoid(r)
        grad = np.sum(points - played * p, axis=-1) + (0.5 - own)
        h = information(r, played)
        step = np.linalg.solve(h, grad[..., None])[..., 0]
        r = r + np.clip(step, -2.0, 2.0)
        if np.max(np.abs(step)) < 1e-10:
            break
    return r - r.mean(axis=-1, keepdims=True)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def information(r: np.ndarray, played: np.ndarray) -> np.ndarray:
    """The fit's observed information ``(..., n, n)`` at ratings ``r`` ``(..., n)`` (logits)."""
    p = _sigmoid(r[..., :, None] - r[..., None, :])
    w = played * p * (1.0 - p)
    h = -w
    n = r.shape[-1]
    diagonal = w.sum(axis=-1) + _sigmoid(r) * (1.0 - _sigmoid(r))
    h = h * (1.0 - np.eye(n)) + np.eye(n) * diagonal[..., None, :]
    return h


def widths(h: np.ndarray, confidence: float = 0.95) -> np.ndarray:
    """Each player's interval width in Elo ``(..., n)`` from the information ``h`` ``(..., n, n)``: the Wald
    interval of the centred rating at ``confidence``."""
    n = h.shape[-1]
    centre = np.eye(n) - 1.0 / n
    cov = centre @ np.linalg.inv(h) @ centre
    var = np.clip(np.diagonal(cov, axis1=-2, axis2=-1), 0.0, None)
    return 2.0 * _z(confidence) * np.sqrt(var) * ELO


def settled(points: np.ndarray, played: np.ndarray) -> np.ndarray:
    """``(..., n)`` bool: the players whose interval counts, those that have neither won nor lost every game
    (an unbeaten player's rating has no upper end in the data: only the fit's virtual draw bounds it, and
    more wins do not narrow it). Where no player counts, all do."""
    scored, games = points.sum(axis=-1), played.sum(axis=-1)
    counted = (scored > 0) & (scored < games)
    return np.where(counted.any(axis=-1, keepdims=True), counted, True)


def choose(r: np.ndarray, played: np.ndarray, pairs: Sequence[tuple[int, int]], step: int, picks: int = 1,
           confidence: float = 0.95, counted: "np.ndarray | None" = None) -> np.ndarray:
    """The pairings (indices into ``pairs``) to give ``step`` more games to, ``(..., picks)``: one after the
    other, each the pairing whose games leave the widest interval (of the ``counted`` players ``(..., n)``,
    default all) narrowest, as if the ones before had been played at the fitted win probabilities."""
    pairs_arr = np.asarray(pairs, dtype=int)
    n = r.shape[-1]
    played = np.array(played, dtype=float)
    out = []
    z = _z(confidence)
    i, j = pairs_arr[:, 0], pairs_arr[:, 1]
    u = np.zeros((len(pairs_arr), n))
    u[np.arange(len(pairs_arr)), i] = 1.0
    u[np.arange(len(pairs_arr)), j] = -1.0
    centre = np.eye(n) - 1.0 / n
    for _ in range(picks):
        c = np.linalg.inv(information(r, played))  # (..., n, n)
        base = np.diagonal(centre @ c @ centre, axis1=-2, axis2=-1)  # (..., n)
        # a candidate's games add s u u^T to the information (s = step p (1 - p)); Sherman-Morrison gives the
        # centred variances after it: base - s (P C u)^2 / (1 + s u^T C u), for every candidate at once
        cu = np.einsum("...ab,pb->...pa", c, u)  # (..., P, n)
        s_ = step * _sigmoid(r[..., i] - r[..., j]) * (1.0 - _sigmoid(r[..., i] - r[..., j]))  # (..., P)
        quad = np.einsum("...pa,pa->...p", cu, u)
        pcu = cu - cu.mean(axis=-1, keepdims=True)
        var = base[..., None, :] - (s_ / (1.0 + s_ * quad))[..., None] * pcu ** 2
        if counted is not None:
            var = np.where(counted[..., None, :], var, 0.0)
        widest = 2.0 * z * np.sqrt(np.clip(var, 0.0, None)).max(axis=-1) * ELO  # (..., P)
        best = np.argmin(widest, axis=-1)
        out.append(best)
        bi, bj = pairs_arr[best, 0], pairs_arr[best, 1]
        index = np.indices(best.shape) if best.ndim else ()
        played[(*index, bi, bj)] += step
        played[(*index, bj, bi)] += step
    return np.stack(out, axis=-1)


def uniform_games(r: np.ndarray, pairs: Sequence[tuple[int, int]], width: float, confidence: float = 0.95,
                  limit: int = 1 << 20, counted: "np.ndarray | None" = None) -> np.ndarray:
    """The fewest even games per pairing ``(...)`` with which a uniform schedule of ``pairs`` gives every
    (``counted``) player's interval under ``width`` Elo at ratings ``r`` ``(..., n)`` (``limit`` where even
    that does not)."""
    n = r.shape[-1]
    shape = np.zeros((n, n))
    for i, j in pairs:
        shape[i, j] = shape[j, i] = 1.0
    lo = np.zeros(r.shape[:-1], dtype=np.int64)          # half-games: k = 2 * halves
    hi = np.full(r.shape[:-1], limit // 2, dtype=np.int64)
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        now = widths(information(r, shape * (2 * mid)[..., None, None]), confidence)
        ok = (now if counted is None else np.where(counted, now, 0.0)).max(axis=-1) < width
        hi = np.where(ok & (lo < hi), mid, hi)
        lo = np.where(~ok & (lo < hi), mid + 1, lo)
    return 2 * hi


@dataclass(frozen=True)
class Decision:
    """Where an adaptive tournament stands: ``widths`` each player's interval in Elo (``unbounded``: the
    players who won or lost every game, whose interval the data cannot close and which do not count), ``done``
    why it stops ("width": every interval narrower than the target; "budget": the next step would pass it; ""
    to go on),
    ``pairings`` the pairings to give ``step`` more games to next (empty when done), ``played`` the games so far
    and ``uniform`` the games a round robin reaching the same width would take at the fitted ratings."""

    widths: dict[str, float]
    done: str
    pairings: tuple[tuple[str, str], ...]
    played: int
    uniform: int
    unbounded: tuple[str, ...] = ()

    @property
    def saved(self) -> int:
        """Games saved against the round robin at the same width (negative: it took more)."""
        return self.uniform - self.played


def decide(players: Sequence[str], pairs: Sequence[tuple[str, str]], games: Sequence[tuple[str, str, float]],
           width: float, budget: int, step: int, picks: int = 1, confidence: float = 0.95) -> Decision:
    """The next step of an adaptive schedule from the games so far (``(a, b, a's score)``; every pairing of
    ``pairs`` played at least once): stop at the width or the budget, else the ``picks`` pairings (at most as
    many as the budget leaves room for) to give ``step`` more games each."""
    players = list(players)
    where = {p: k for k, p in enumerate(players)}
    index = [(where[a], where[b]) for a, b in pairs]
    points, played = tally(players, games)
    r = fit(points, played)
    now = widths(information(r, played), confidence)
    counted = settled(points, played)
    uniform = int(uniform_games(r, index, width, confidence, counted=counted)) * len(index)
    count = len(games)
    done = "width" if now[counted].max() < width else "budget" if count + step > budget else ""
    chosen: tuple[tuple[str, str], ...] = ()
    if not done:
        room = min(picks, (budget - count) // step)
        chosen = tuple(pairs[k] for k in choose(r, played, index, step, room, confidence, counted).tolist())
    return Decision(dict(zip(players, now.tolist())), done, chosen, count, uniform,
                    tuple(p for p, c in zip(players, counted) if not c))


@dataclass(frozen=True, eq=False)
class Simulation:
    """:func:`simulate`'s result over ``sims`` tournaments: ``games`` each one's games played ``(sims,)``,
    ``ratings`` its final fit in Elo, centred ``(sims, n)``, ``widths`` its final intervals ``(sims, n)``,
    ``reached`` whether it stopped at the width (else at the budget)."""

    games: np.ndarray
    ratings: np.ndarray
    widths: np.ndarray
    reached: np.ndarray


def simulate(strengths: Sequence[float], first: int, width: float, budget: int, step: int = 2, sims: int = 1000,
             seed: int = 0, confidence: float = 0.95, adaptive: bool = True) -> Simulation:
    """``sims`` round robins between players of Bradley-Terry ``strengths`` (Elo), played as
    :func:`decide` schedules them (``adaptive`` false: ``step`` more games on every pairing at a time, the full
    round robin grown until the width), all at once (vectorised): each game a Bernoulli draw at the true win
    probability, from ``np.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    true = np.asarray(strengths, float) / ELO
    n = true.size
    pairs = np.array([(i, j) for i in range(n) for j in range(i + 1, n)])
    prob = _sigmoid(true[:, None] - true[None, :])
    points, played = np.zeros((sims, n, n)), np.zeros((sims, n, n))

    def play(rows: np.ndarray, i: np.ndarray, j: np.ndarray, k: int) -> None:
        wins = rng.binomial(k, prob[i, j])
        points[rows, i, j] += wins
        points[rows, j, i] += k - wins
        played[rows, i, j] += k
        played[rows, j, i] += k

    every = np.arange(sims)
    for i, j in pairs:
        play(every, np.full(sims, i), np.full(sims, j), first)
    active = np.ones(sims, dtype=bool)
    reached = np.zeros(sims, dtype=bool)
    last = np.zeros((sims, n))
    per_step = step if adaptive else step * len(pairs)
    while active.any():
        rows = np.flatnonzero(active)
        r = fit(points[rows], played[rows], last[rows])
        last[rows] = r
        counted = settled(points[rows], played[rows])
        now = np.where(counted, widths(information(r, played[rows]), confidence), 0.0).max(axis=-1)
        count = played[rows].sum(axis=(-1, -2)) / 2
        hit = now < width
        reached[rows[hit]] = True
        stop = hit | (count + per_step > budget)
        active[rows[stop]] = False
        rows, r = rows[~stop], r[~stop]
        if not rows.size:
            break
        if adaptive:
            best = choose(r, played[rows], [tuple(p) for p in pairs], step, 1, confidence, counted[~stop])[:, 0]
            play(rows, pairs[best, 0], pairs[best, 1], step)
        else:
            for i, j in pairs:
                play(rows, np.full(rows.size, i), np.full(rows.size, j), step)
    r = fit(points, played)
    return Simulation(played.sum(axis=(-1, -2)) / 2, r * ELO, widths(information(r, played), confidence), reached)
