"""alpha-Rank (Omidshafiei et al., Scientific Reports 2019) of a meta-game, single population: the stationary
distribution of the evolutionary Markov chain over players, and its sweep over the ranking intensity (numpy)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from mosaic.scoring.population.metagame import MetaGame

#: alpha-Rank's defaults: ranking intensity (per unit of payoff) and population size.
ALPHA = 10.0
POPULATION = 50
#: The default alpha grid of :func:`alpha_sweep`: 10^-2 .. 10^3, ten steps a decade.
SWEEP_ALPHAS = tuple(float(a) for a in np.logspace(-2.0, 3.0, 51))
#: alpha-Rank masses closer than this share a rank.
_MASS_TIE = 1e-9


@dataclass(frozen=True)
class AlphaRank:
    """alpha-Rank of a meta-game: ``mass`` the stationary distribution over players, ``ranks`` 1 for the
    largest mass (masses within 1e-9 share a rank), at intensity ``alpha`` and population size ``m``."""

    players: tuple[str, ...]
    mass: dict[str, float]
    ranks: dict[str, int]
    alpha: float
    m: int


def _check_alpha(alpha: Any, m: Any) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha: a number >= 0, got {alpha!r}")
    if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or m < 2:
        raise ValueError(f"m: the population size, an integer >= 2, got {m!r}")


def _alpha_mass(a: np.ndarray, alpha: float, m: int) -> np.ndarray:
    """alpha-Rank's stationary distribution ``(..., n)`` for payoffs ``a`` ``(..., n, n)`` (antisymmetric).

    In a population of m playing s with k mutants playing r, a mutant's fitness minus a resident's is
    ``m / (m - 1) A[r, s]`` whatever k (the diagonal is 0), so the Fermi fixation probability is
    ``rho = (1 - exp(-u)) / (1 - exp(-m u))`` with ``u = alpha m / (m - 1) A[r, s]`` (1/m at u = 0), computed
    in logs. The chain moves from s to r with probability ``rho / (n - 1)``; its stationary distribution
    solves ``pi Q = 0``, ``sum pi = 1`` (Q the generator, one equation replaced by the sum) by a direct linear
    solve. The solution is unique for every alpha: of r -> s and s -> r one has probability at least
    ``1 / (m (n - 1))``, so the chain has one closed class even where the other underflows to 0.
    """
    n = a.shape[-1]
    u = alpha * m / (m - 1) * np.swapaxes(a, -1, -2)  # u[s, r]: mutant r in a population of s
    size = np.abs(u)
    safe = np.where(size > 0, size, 1.0)
    log_rho = np.where(size > 0, np.minimum(u, 0.0) * (m - 1) + np.log(-np.expm1(-safe))
                       - np.log(-np.expm1(-m * safe)), -math.log(m))
    rates = np.exp(log_rho) / (n - 1)
    eye = np.eye(n, dtype=bool)
    rates = np.where(eye, 0.0, rates)
    generator = rates - eye * rates.sum(axis=-1, keepdims=True)
    system = np.swapaxes(generator, -1, -2).copy()
    system[..., -1, :] = 1.0
    rhs = np.zeros(a.shape[:-1])
    rhs[..., -1] = 1.0
    pi = np.clip(np.linalg.solve(system, rhs[..., None])[..., 0], 0.0, None)
    return pi / pi.sum(axis=-1, keepdims=True)


def _ranks(mass: np.ndarray) -> np.ndarray:
    return 1 + np.sum(mass[None, :] > mass[:, None] + _MASS_TIE, axis=1)


def alpha_rank(meta: MetaGame, alpha: float = ALPHA, m: int = POPULATION) -> AlphaRank:
    """alpha-Rank of ``meta`` (``payoff (n, n)``) at ranking intensity ``alpha`` and population size ``m``
    (see :func:`_alpha_mass`)."""
    _check_alpha(alpha, m)
    if len(meta.players) == 1:
        return AlphaRank(meta.players, {meta.players[0]: 1.0}, {meta.players[0]: 1}, float(alpha), int(m))
    pi = _alpha_mass(meta.payoff, float(alpha), int(m))
    ranks = _ranks(pi)
    return AlphaRank(meta.players, dict(zip(meta.players, pi.tolist())),
                     dict(zip(meta.players, ranks.tolist())), float(alpha), int(m))


@dataclass(frozen=True, eq=False)
class AlphaSweep:
    """alpha-Rank over a grid of ``alphas`` ``(k,)``: ``mass`` ``(k, players)``, ``ranks`` ``(k, players)``.
    ``settled``: the smallest alpha of the grid from which the ranking stays the same to the grid's end (None
    when it still changed at the last step: go further)."""

    players: tuple[str, ...]
    alphas: np.ndarray
    mass: np.ndarray
    ranks: np.ndarray
    settled: "float | None"
    m: int


def alpha_sweep(meta: MetaGame, alphas: Sequence[float] = SWEEP_ALPHAS, m: int = POPULATION) -> AlphaSweep:
    """alpha-Rank of ``meta`` at each of ``alphas`` (increasing; default 10^-2 .. 10^3), and where its ranking
    settles: the paper's advice is to read the ranking at an alpha beyond that point."""
    grid = np.asarray(alphas, dtype=float)
    if grid.ndim != 1 or grid.size < 2 or np.any(np.diff(grid) <= 0):
        raise ValueError("alphas: at least two increasing values")
    for alpha in grid:
        _check_alpha(float(alpha), m)
    if len(meta.players) == 1:
        return AlphaSweep(meta.players, grid, np.ones((grid.size, 1)), np.ones((grid.size, 1), dtype=int),
                          float(grid[0]), int(m))
    mass = np.stack([_alpha_mass(meta.payoff, float(alpha), int(m)) for alpha in grid])
    ranks = np.stack([_ranks(row) for row in mass])
    same = np.all(ranks == ranks[-1], axis=1)
    first = grid.size - int(np.argmin(same[::-1])) if not same.all() else 0
    settled = float(grid[first]) if first < grid.size - 1 else None
    return AlphaSweep(meta.players, grid, mass, ranks, settled, int(m))
