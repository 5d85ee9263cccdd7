"""Nash averaging (Balduzzi et al., NeurIPS 2018) of a meta-game: the maximum-entropy Nash equilibrium of the
symmetric zero-sum game, each player's weight in it and its payoff against it (numpy, scipy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import optimize

from mosaic.scoring.population.metagame import MetaGame


@dataclass(frozen=True)
class Nash:
    """Nash averaging of a meta-game: ``weights`` the maximum-entropy equilibrium's mass per player,
    ``ratings`` each player's expected payoff against that mixture (0 in the support, below 0 outside),
    ``support`` the players with positive weight, in the meta-game's order."""

    players: tuple[str, ...]
    weights: dict[str, float]
    ratings: dict[str, float]
    support: tuple[str, ...]


def _null_space(a: np.ndarray, scale: float) -> np.ndarray:
    """An orthonormal basis ``(k, d)`` of the null space of ``a`` ``(r, k)``."""
    _, s, vt = np.linalg.svd(a)
    rank = int(np.sum(s > 1e-9 * max(1.0, scale)))
    return vt[rank:].T


def _support_lp(a: np.ndarray) -> np.ndarray:
    """The union of the supports of all equilibria, by one linear programme: the equilibria scaled are the
    cone ``{q >= 0 : A q <= 0}``; maximising ``sum_i y_i`` with ``0 <= y_i <= min(q_i, 1)`` over it puts
    ``y_i`` = 1 on every player some equilibrium uses (a sum of scaled equilibria is one) and 0 elsewhere.
    Returns q ``(n,)`` with ``q_i >= 1`` exactly there."""
    n = len(a)
    eye = np.eye(n)
    res = optimize.linprog(np.concatenate([np.zeros(n), -np.ones(n)]),
                           A_ub=np.block([[a, np.zeros((n, n))], [-eye, eye]]), b_ub=np.zeros(2 * n),
                           bounds=[(0, None)] * n + [(0, 1)] * n, method="highs")
    if res.status != 0:
        raise RuntimeError(f"nash_averaging: the support's linear programme failed ({res.message})")
    return np.where(res.x[n:] > 0.5, res.x[:n], 0.0)


def _unique_on(a: np.ndarray, support: np.ndarray, scale: float) -> "np.ndarray | None":
    """The equilibrium with exactly this support when it is the only equilibrium, else None: the null space
    of ``A[S, S]`` is one line, its direction is positive, and every player outside does strictly worse."""
    basis = _null_space(a[np.ix_(support, support)], scale)
    if basis.shape[1] != 1 or abs(basis[:, 0].sum()) < 1e-9:
        return None
    q = basis[:, 0] / basis[:, 0].sum()
    p = np.zeros(len(a))
    p[support] = q
    outside = ~support
    if np.all(q > 1e-12) and (not outside.any() or np.all(a[outside] @ p < -1e-9 * max(1.0, scale))):
        return p
    return None


def _max_entropy_nash(a: np.ndarray, hints: Sequence[np.ndarray] = ()) -> np.ndarray:
    """The maximum-entropy symmetric equilibrium ``p`` ``(n,)`` of the antisymmetric ``a`` ``(n, n)``.

    Every equilibrium q satisfies ``(A q)_j = 0`` for each player j some equilibrium uses (j's payoff against
    q is at most 0, and averaging over an equilibrium with full support S gives 0), so on S the equilibria
    are the null vectors of ``A[S, S]`` in the simplex with ``A[j, S] q <= 0`` for the players j outside.
    When that is one point (no redundant players) it is the answer; otherwise the entropy is maximised over
    it in null-space coordinates (SLSQP, a concave objective over a polytope: the maximum is unique).
    ``hints``: supports ``(n,)`` (bool) to try before the linear programme (the bootstrap passes those it has
    met): one is used only when it gives the unique equilibrium, checked as :func:`_unique_on` says.
    """
    scale = float(np.max(np.abs(a))) if a.size else 0.0
    for hint in hints:
        p = _unique_on(a, hint, scale)
        if p is not None:
            return p
    q = _support_lp(a)
    support = q > 0
    p = np.zeros(len(a))
    basis = _null_space(a[np.ix_(support, support)], scale)
    q0 = q[support] / q[support].sum()
    if basis.shape[1] == 1:  # the equilibria are one point: the null direction (exact), or the LP's answer
        total = basis[:, 0].sum()
        line = basis[:, 0] / total if abs(total) > 1e-9 else q0
        p[support] = line if np.all(line > 0) else q0
        return p
    k = int(support.sum())
    free = _null_space(np.vstack([a[np.ix_(support, support)], np.ones((1, k))]), scale)
    outside = a[np.ix_(~support, support)]

    def neg_entropy(z: np.ndarray) -> tuple[float, np.ndarray]:
        x = np.maximum(q0 + free @ z, 1e-300)
        return float(np.sum(x * np.log(x))), free.T @ (np.log(x) + 1.0)

    constraints = [{"type": "ineq", "fun": lambda z: q0 + free @ z, "jac": lambda z: free}]
    if outside.size:
        constraints.append({"type": "ineq", "fun": lambda z: -outside @ (q0 + free @ z),
                            "jac": lambda z: -outside @ free})
    res = optimize.minimize(neg_entropy, np.zeros(free.shape[1]), jac=True, method="SLSQP",
                            constraints=constraints, options={"ftol": 1e-15, "maxiter": 500})
    x = q0 + free @ res.x
    if x.min() < -1e-9 or (outside.size and np.max(outside @ x) > 1e-9 * max(1.0, scale)):
        raise RuntimeError(f"nash_averaging: the maximum-entropy search left the equilibria ({res.message}; a bug: "
                           "please report the payoff matrix)")
    x = np.clip(x, 0.0, None)
    p[support] = x / x.sum()
    return p


def nash_averaging(meta: MetaGame) -> Nash:
    """Nash averaging of ``meta`` (a :class:`MetaGame`, ``payoff (n, n)``): the maximum-entropy equilibrium's
    weights and each player's rating against it (see :func:`_max_entropy_nash` for the method; no convex
    solver beyond scipy is needed)."""
    p = _max_entropy_nash(meta.payoff)
    ratings = meta.payoff @ p
    return Nash(meta.players, dict(zip(meta.players, p.tolist())), dict(zip(meta.players, ratings.tolist())),
                tuple(name for name, w in zip(meta.players, p) if w > 0))
