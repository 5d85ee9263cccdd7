"""Ratings of players from the games they played against each other, with honest intervals (numpy/scipy).

A *game* is one two-player match: :class:`Game` ``(a, b, score_a, seat_a)`` with ``score_a`` 1 (a won),
0.5 (a draw) or 0 (b won) and ``seat_a`` the seat a had (0: a moved first, 1: b did, None: no order, as in a
simultaneous-move game). A tournament is a list of games, in any order (only :func:`elo_sequence` and
:func:`openskill_ratings` read the order).

The model (:func:`fit_bradley_terry`) is Bradley-Terry with draws counted as half-games: a game adds
``s log p + (1 - s) log(1 - p)`` to the log-likelihood, with ``s`` a's score and
``p = sigmoid((r_a - r_b) / ELO_PER_LOGIT +- h)`` (``+h`` when a moved first, ``-h`` when b did, nothing
without seats). Why this and not Davidson's model of ties:

- the Elo scale is *defined* by a rating gap D predicting an expected score 1 / (1 + 10^(-D/400)) with a
  draw worth half a win; this model fits exactly that, so its ratings are Elo ratings and its gaps read as
  expected scores. Davidson's model has a flatter link (an extra draw-rate parameter), so the same results
  give wider gaps that are not Elo gaps unless draws are rare;
- its maximum-likelihood equations say "each player's points equal its expected points", as in
  Zermelo's original method (Davidson's have the same form, with his link);
- with draws it is a quasi-likelihood (a draw varies less than a coin flip), which is why no model-based
  standard error is reported: intervals come from the bootstrap over games (:func:`rating_bootstrap`),
  which does not rely on the likelihood being the true one.

Ratings are reported on the Elo scale (``ELO_PER_LOGIT`` = 400 / ln 10 points per logit), anchored so the
mean of all players is ``anchor_rating`` (1000), or so one named ``anchor`` player is. The first-move
advantage ``h`` is reported in Elo points too.

The maximum-likelihood fit does not exist when the results separate the players (one won or lost every
game, a group never scored against the rest, or the first mover won every decisive game): some
ratings would be infinite. The fit then adds a weak prior, stated in :attr:`Fit.notes`: each player plays
``prior_games`` virtual draws against an average player (rated at the mean), and the first-move parameter
as many virtual draws between equal players, which pulls infinite gaps back to finite ones and leaves
well-determined ratings nearly unchanged. By default (``prior_games=None``) the prior is used only then;
a number uses it always.

Around the fit: :func:`rating_bootstrap` / :func:`rating_intervals` (intervals, the probability that each
player is the best, rank intervals), :func:`crosstable` (per pair, per player and for the first mover:
wins, draws, losses, score with a Wilson interval), :func:`elo_sequence` (sequential Elo, for plots only)
and :func:`openskill_ratings` (Weng-Lin ratings from the ``openskill`` package, for team games).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import numpy as np
from scipy import optimize, special
from scipy import stats as scipy_stats

from mosaic.scoring.interval import Interval
from mosaic.scoring.stats import CHUNK_ELEMENTS, check_bootstrap

#: Elo points per logit of winning odds (a 400-point gap is 10:1 odds).
ELO_PER_LOGIT = 400.0 / math.log(10.0)
#: Virtual draws per player (and for the first-move parameter) when the maximum-likelihood fit does not exist.
AUTO_PRIOR_GAMES = 1.0
#: A rating this many logits from the mean (2600 Elo) marks a replicate's fit that may be running off to infinity.
_DIVERGED = 15.0
_MAX_ITER = 200
SCORES = (0.0, 0.5, 1.0)


# -- games -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Game:
    """One game of ``a`` against ``b``: ``score_a`` 1 (a won), 0.5 (draw), 0 (b won).

    ``seat_a`` 0: a moved first; 1: b moved first; None: no first mover (simultaneous moves, or unknown).
    """

    a: str
    b: str
    score_a: float
    seat_a: "int | None" = 0

    def __post_init__(self) -> None:
        for name in ("a", "b"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise ValueError(f"Game.{name}: a player's name must be a non-empty string, got {value!r}")
        if self.a == self.b:
            raise ValueError(f"Game: {self.a!r} cannot play itself")
        object.__setattr__(self, "score_a", _score(self.score_a, "Game.score_a"))
        if self.seat_a is not None and (isinstance(self.seat_a, bool) or self.seat_a not in (0, 1)):
            raise ValueError(f"Game.seat_a: 0 (a moved first), 1 (b did) or None, got {self.seat_a!r}")


@dataclass(frozen=True)
class TeamGame:
    """One game of team ``team_a`` against team ``team_b``: ``score_a`` 1 (team a won), 0.5, 0."""

    team_a: "tuple[str, ...]"
    team_b: "tuple[str, ...]"
    score_a: float

    def __post_init__(self) -> None:
        teams = []
        for name in ("team_a", "team_b"):
            value = getattr(self, name)
            members = (value,) if isinstance(value, str) else tuple(value)
            if not members or not all(isinstance(m, str) and m for m in members):
                raise ValueError(f"TeamGame.{name}: a non-empty list of player names, got {value!r}")
            if len(set(members)) != len(members):
                raise ValueError(f"TeamGame.{name}: a player is listed twice: {list(members)}")
            object.__setattr__(self, name, members)
            teams.append(set(members))
        if teams[0] & teams[1]:
            raise ValueError(f"TeamGame: {sorted(teams[0] & teams[1])} on both teams")
        object.__setattr__(self, "score_a", _score(self.score_a, "TeamGame.score_a"))


def _score(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)) \
            or float(value) not in SCORES:
        raise ValueError(f"{name}: 1 (first side won), 0.5 (draw) or 0 (second side won), got {value!r}")
    return float(value)


def games_from_results(records: Iterable[Mapping[str, Any]], sequential: bool = True) -> list[Game]:
    """:class:`Game` s from match records ``{"players": [p0, p1], "scores": [s0, s1]}`` in seat order.

    The scores may be 1/0.5/0 or any returns: the higher one won, equal ones drew. ``sequential``:
    ``p0`` moved first (``seat_a`` 0); False for simultaneous-move games (``seat_a`` None).
    """
    games = []
    for i, record in enumerate(records):
        try:
            players, scores = list(record["players"]), [float(s) for s in record["scores"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"record {i}: expected {{'players': [p0, p1], 'scores': [s0, s1]}}: {exc!r}") from None
        if len(players) != 2 or len(scores) != 2:
            raise ValueError(f"record {i}: two players and two scores, got {players!r} and {scores!r}")
        if not all(map(math.isfinite, scores)):
            raise ValueError(f"record {i}: scores must be finite, got {scores!r}")
        result = 1.0 if scores[0] > scores[1] else 0.0 if scores[0] < scores[1] else 0.5
        try:
            games.append(Game(players[0], players[1], result, 0 if sequential else None))
        except ValueError as exc:
            raise ValueError(f"record {i}: {exc}") from None
    return games


# -- the tally: games grouped by pairing and seats -----------------------------------------------------
@dataclass(frozen=True)
class Tally:
    """Games grouped into strata: one per pairing (i < j) and seat arrangement.

    ``sign`` +1: i moved first, -1: j did, 0: no seats. ``counts`` (strata, 3): i's wins, draws, i's losses.
    """

    players: tuple[str, ...]
    i: np.ndarray
    j: np.ndarray
    sign: np.ndarray
    counts: np.ndarray

    @property
    def design(self) -> np.ndarray:
        """``(strata, players + 1)``: +1 for i, -1 for j, the seat sign in the last column."""
        x = np.zeros((len(self.i), len(self.players) + 1))
        rows = np.arange(len(self.i))
        x[rows, self.i], x[rows, self.j], x[:, -1] = 1.0, -1.0, self.sign
        return x


def tally_games(games: Iterable[Game]) -> Tally:
    games = list(games)
    if not games:
        raise ValueError("games: no games to rate")
    for k, g in enumerate(games):
        if not isinstance(g, Game):
            raise ValueError(f"games[{k}]: expected a Game, got {type(g).__name__}"
                             + (" (team games are rated by openskill_ratings)" if isinstance(g, TeamGame) else ""))
    players = tuple(sorted({g.a for g in games} | {g.b for g in games}))
    index = {p: k for k, p in enumerate(players)}
    strata: dict[tuple[int, int, int], list[int]] = {}
    for g in games:
        i, j, score = index[g.a], index[g.b], g.score_a
        sign = 0 if g.seat_a is None else (1 if g.seat_a == 0 else -1)
        if i > j:
            i, j, score, sign = j, i, 1.0 - score, -sign
        row = strata.setdefault((i, j, sign), [0, 0, 0])
        row[0 if score == 1.0 else 1 if score == 0.5 else 2] += 1
    keys = sorted(strata)
    return Tally(players, np.array([k[0] for k in keys], dtype=int), np.array([k[1] for k in keys], dtype=int),
                  np.array([k[2] for k in keys], dtype=float), np.array([strata[k] for k in keys], dtype=float))


def _check_connected(tally: Tally) -> None:
    parent = list(range(len(tally.players)))

    def root(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for i, j in zip(tally.i, tally.j):
        parent[root(int(i))] = root(int(j))
    groups: dict[int, list[str]] = {}
    for k, p in enumerate(tally.players):
        groups.setdefault(root(k), []).append(p)
    if len(groups) > 1:
        listed = "; ".join("[" + ", ".join(g) + "]" for g in sorted(groups.values(), key=lambda g: (-len(g), g)))
        raise ValueError(f"games: the players form {len(groups)} groups that never played each other: {listed}; "
                         "ratings across groups are not comparable: play games between the groups, "
                         "or rate each group on its own")


def _basis(players: int, with_advantage: bool) -> np.ndarray:
    """``(players + 1, m)``: columns spanning sum-zero ratings (orthonormal), and h when fitted."""
    centred = np.eye(players) - 1.0 / players
    q, _ = np.linalg.qr(centred[:, :players - 1])
    basis = np.zeros((players + 1, players - 1 + int(with_advantage)))
    basis[:players, :players - 1] = q
    if with_advantage:
        basis[players, -1] = 1.0
    return basis


# -- fitting -------------------------------------------------------------------------------------------
# A row of the likelihood touches at most three parameters (full coordinates: the players' centred logits,
# then h): ``cols`` (R, 3) says which, ``coefs`` (R, 3) with what sign. A game row is +1 for i, -1 for j
# and the seat sign for h; a virtual draw of the prior is +1 for one player (or for h), against the mean.
def _log_sigmoid(x: np.ndarray) -> np.ndarray:
    return -np.logaddexp(0.0, -x)


def _eta(theta: np.ndarray, cols: np.ndarray, coefs: np.ndarray) -> np.ndarray:
    """Each row's logit ``(reps, R)`` from full parameters ``theta`` ``(reps, players + 1)``."""
    return np.sum(theta[:, cols] * coefs, axis=-1)


def _loglik(eta: np.ndarray, n: np.ndarray, s: np.ndarray) -> np.ndarray:
    return np.sum(s * _log_sigmoid(eta) + (n - s) * _log_sigmoid(-eta), axis=-1)


def _newton(cols: np.ndarray, coefs: np.ndarray, basis: np.ndarray, n: np.ndarray, s: np.ndarray,
            may_diverge: bool) -> tuple[np.ndarray, np.ndarray]:
    """Maximise the half-game log-likelihood of the rows for each replicate's ``n``, ``s`` ``(reps, R)``
    (games and points per row) over reduced parameters (full = ``basis`` @ reduced): damped Newton, all
    replicates at once, gradient and Hessian gathered row by row (a row touches three parameters).

    Returns ``(full parameters (reps, players + 1), failed (reps,))``; failed: no convergence, or
    (``may_diverge``) a rating running off past ``_DIVERGED`` logits from the mean, which is what a fit
    with no finite maximum does (and what a very long ladder of players may do: check, see
    :func:`_separable`).
    """
    reps, (full, m) = n.shape[0], basis.shape
    beta = np.zeros((reps, m))
    f = _loglik(np.zeros(n.shape), n, s)
    active = np.ones(reps, dtype=bool)
    failed = np.zeros(reps, dtype=bool)
    ridge = 1e-9 * np.eye(m)
    pair_index = cols[:, :, None] * full + cols[:, None, :]  # (R, 3, 3) into a (full, full) matrix
    pair_coef = coefs[:, :, None] * coefs[:, None, :]
    for _ in range(_MAX_ITER):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        a = idx.size
        b, nn, ss = beta[idx], n[idx], s[idx]
        p = special.expit(_eta(b @ basis.T, cols, coefs))
        residual, weight = ss - nn * p, nn * p * (1.0 - p)
        at = np.arange(a)[:, None, None]
        g_full = np.bincount((at * full + cols[None]).ravel(), (residual[..., None] * coefs[None]).ravel(),
                             minlength=a * full).reshape(a, full)
        h_full = np.bincount((at[..., None] * full * full + pair_index[None]).ravel(),
                             (weight[..., None, None] * pair_coef[None]).ravel(),
                             minlength=a * full * full).reshape(a, full, full)
        grad = g_full @ basis
        hess = basis.T @ h_full @ basis + ridge
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        decrement = np.einsum("ai,ai->a", grad, step)
        t = np.ones(a)
        f0 = f[idx]
        for _ in range(60):
            cand = b + t[:, None] * step
            fc = _loglik(_eta(cand @ basis.T, cols, coefs), nn, ss)
            worse = ~(fc >= f0 - 1e-12 * (1.0 + np.abs(f0)))
            if not worse.any():
                break
            t[worse] *= 0.5
        beta[idx], f[idx] = cand, fc
        done = (decrement < 1e-15) | (np.max(np.abs(t[:, None] * step), axis=1) < 1e-12)
        if may_diverge:
            off = np.max(np.abs(cand @ basis.T), axis=1) > _DIVERGED
            failed[idx[off]] = True
            done |= off
        active[idx[done]] = False
    failed |= active
    return beta @ basis.T, failed


def _rows(tally: Tally, fit_advantage: bool, prior_games: float) -> tuple[np.ndarray, np.ndarray]:
    """``cols``, ``coefs`` of the games' rows, then (``prior_games`` > 0) of the prior's virtual draws:
    one per player against the mean, and one for h between equals when it is fitted."""
    players, rows = len(tally.players), len(tally.i)
    h = np.full(rows, players)
    cols = np.stack([tally.i, tally.j, h], axis=1)
    coefs = np.stack([np.ones(rows), -np.ones(rows), tally.sign], axis=1)
    if prior_games > 0:
        virtual = np.arange(players + int(fit_advantage))
        cols = np.vstack([cols, np.stack([virtual] * 3, axis=1)])
        coefs = np.vstack([coefs, np.tile([1.0, 0.0, 0.0], (virtual.size, 1))])
    return cols.astype(int), coefs


def _fit_rows(tally: Tally, basis: np.ndarray, fit_advantage: bool, wins: np.ndarray, draws: np.ndarray,
              losses: np.ndarray, prior_games: float, may_diverge: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Fitted full parameters ``(reps, players + 1)`` (centred logits, then h) for each replicate's
    counts ``(reps, strata)``, and the failed mask (see :func:`_newton`)."""
    n = wins + draws + losses
    s = wins + 0.5 * draws
    cols, coefs = _rows(tally, fit_advantage, prior_games)
    virtual = cols.shape[0] - n.shape[1]
    if virtual:
        weight = np.full((n.shape[0], virtual), float(prior_games))
        n, s = np.concatenate([n, weight], axis=1), np.concatenate([s, 0.5 * weight], axis=1)
    out, failed = [], []
    per_rep = 12 * cols.shape[0] + 2 * basis.shape[0] ** 2
    size = max(1, CHUNK_ELEMENTS // per_rep)
    for start in range(0, n.shape[0], size):
        params, bad = _newton(cols, coefs, basis, n[start:start + size], s[start:start + size],
                              may_diverge=may_diverge)
        out.append(params)
        failed.append(bad)
    return np.concatenate(out), np.concatenate(failed)


def _separable(x: np.ndarray, counts: np.ndarray) -> bool:
    """Whether the results separate (no finite maximum-likelihood fit): a linear program looks for a
    direction of the parameters that never lowers any row's likelihood and raises one's for ever."""
    keep = counts.sum(axis=1) > 0
    x, counts = x[keep], counts[keep]
    n = counts.sum(axis=1)
    s = counts[:, 0] + 0.5 * counts[:, 1]
    all_won, all_lost = s == n, s == 0
    mixed = ~(all_won | all_lost)
    if not (all_won | all_lost).any():
        return False
    c = -(x[all_won].sum(axis=0) - x[all_lost].sum(axis=0))
    a_ub = np.vstack([-x[all_won], x[all_lost]])
    res = optimize.linprog(c, A_ub=a_ub, b_ub=np.zeros(len(a_ub)),
                           A_eq=x[mixed] if mixed.any() else None, b_eq=np.zeros(int(mixed.sum())) if mixed.any()
                           else None, bounds=[(-1.0, 1.0)] * x.shape[1], method="highs")
    return bool(res.status == 0 and -res.fun > 1e-9)


@dataclass(frozen=True)
class Fit:
    """A Bradley-Terry fit: ratings on the Elo scale, best first.

    ``advantage``: the first mover's edge in Elo points (None when not fitted). ``log_likelihood``: the
    half-game log-likelihood of the games at the fit (the prior's virtual games left out). ``games``: how
    many games. ``prior_games``: virtual draws per player in the fit (0: plain maximum likelihood).
    ``notes``: what to know before trusting it (a rating resting on the prior, an unfitted advantage).
    """

    ratings: dict[str, float]
    advantage: "float | None"
    log_likelihood: float
    games: int
    notes: tuple[str, ...] = ()
    prior_games: float = 0.0

    def expected_score(self, a: str, b: str, seat_a: "int | None" = None) -> float:
        """The fitted expected score of ``a`` against ``b`` (a draw counting half); ``seat_a`` as in :class:`Game`."""
        for p in (a, b):
            if p not in self.ratings:
                raise ValueError(f"expected_score: {p!r} is not rated in this fit")
        gap = (self.ratings[a] - self.ratings[b]) / ELO_PER_LOGIT
        if seat_a is not None and self.advantage is not None:
            gap += (1.0 if seat_a == 0 else -1.0) * self.advantage / ELO_PER_LOGIT
        return float(special.expit(gap))


@dataclass(frozen=True)
class _Model:
    tally: Tally
    x: np.ndarray
    basis: np.ndarray
    fit_advantage: bool
    notes: tuple[str, ...]


def _model(games: Iterable[Game], first_move_advantage: bool, anchor: "str | None") -> _Model:
    tally = tally_games(games)
    if len(tally.players) < 2:
        raise ValueError("games: at least two players are needed")
    if anchor is not None and anchor not in tally.players:
        raise ValueError(f"anchor: {anchor!r} played none of these games (players: {', '.join(tally.players)})")
    _check_connected(tally)
    notes = []
    seated = bool(np.any(tally.sign != 0))
    fit_advantage = bool(first_move_advantage) and seated
    if first_move_advantage and not seated:
        notes.append("no game records a first mover (seat_a None): no first-move advantage was fitted")
    basis = _basis(len(tally.players), fit_advantage)
    x = tally.design
    if fit_advantage and np.linalg.matrix_rank(x @ basis) < basis.shape[1]:
        raise ValueError("first_move_advantage: the first mover's edge cannot be told apart from the ratings in "
                         "these games (the seats never alternate where it would tell): let players swap seats "
                         "within pairings, or pass first_move_advantage=False")
    return _Model(tally, x, basis, fit_advantage, tuple(notes))


def _check_prior(prior_games: "float | None") -> None:
    if prior_games is not None and (isinstance(prior_games, bool) or not isinstance(prior_games, (int, float))
                                    or not (math.isfinite(prior_games) and prior_games >= 0)):
        raise ValueError(f"prior_games: None (only when needed) or a number >= 0, got {prior_games!r}")


def _extremes(tally: Tally) -> list[str]:
    out = []
    for k, p in enumerate(tally.players):
        won = tally.counts[tally.i == k][:, 0].sum() + tally.counts[tally.j == k][:, 2].sum()
        lost = tally.counts[tally.i == k][:, 2].sum() + tally.counts[tally.j == k][:, 0].sum()
        total = tally.counts[(tally.i == k) | (tally.j == k)].sum()
        if won == total:
            out.append(f"{p} won every game")
        elif lost == total:
            out.append(f"{p} lost every game")
    return out


def _to_elo(params: np.ndarray, players: int, anchor_index: "int | None", anchor_rating: float) -> np.ndarray:
    theta = params[..., :players]
    if anchor_index is not None:
        theta = theta - theta[..., anchor_index:anchor_index + 1]
    return anchor_rating + ELO_PER_LOGIT * theta


def _half_game_loglik(x: np.ndarray, counts: np.ndarray, params: np.ndarray) -> float:
    return float(_loglik(x @ params, counts.sum(axis=1), counts[:, 0] + 0.5 * counts[:, 1]))


def _point_fit(model: _Model, prior_games: "float | None", anchor: "str | None",
               anchor_rating: float) -> tuple[Fit, np.ndarray]:
    tally, x, basis = model.tally, model.x, model.basis
    p = len(tally.players)
    notes = list(model.notes)
    separable = _separable(x @ basis, tally.counts)
    extremes = _extremes(tally)
    if prior_games is None:
        prior = AUTO_PRIOR_GAMES if separable else 0.0
    else:
        prior = float(prior_games)
        if prior == 0 and separable:
            raise ValueError("prior_games=0: these games have no finite maximum-likelihood fit ("
                             + ("; ".join(extremes) or "the results separate the players, or the first mover "
                                "won every decisive game") + "): pass prior_games > 0, or None")
    if separable:
        why = "; ".join(extremes) or "some players never lost (or never won) against the rest, or the first " \
                                     "mover won (or lost) every decisive game"
        notes.append(f"no finite maximum-likelihood fit ({why}): the ratings rest on the prior, {prior:g} virtual "
                     "draw(s) per player against an average player"
                     + (" and as many between equals for the first-move advantage" if model.fit_advantage else "")
                     + "; such a rating says 'at least this far from the field', not how far")
    c = tally.counts
    params, failed = _fit_rows(tally, basis, model.fit_advantage, c[None, :, 0], c[None, :, 1], c[None, :, 2],
                               prior)
    if failed[0]:
        raise RuntimeError("fit_bradley_terry: the Newton iterations did not converge (a bug: please report the "
                           "games)")
    anchor_index = None if anchor is None else tally.players.index(anchor)
    elo = _to_elo(params[0], p, anchor_index, anchor_rating)
    order = sorted(range(p), key=lambda k: (-elo[k], tally.players[k]))
    fit = Fit(ratings={tally.players[k]: float(elo[k]) for k in order},
              advantage=float(ELO_PER_LOGIT * params[0, p]) if model.fit_advantage else None,
              log_likelihood=_half_game_loglik(x, c, params[0]), games=int(c.sum()), notes=tuple(notes),
              prior_games=prior)
    return fit, params[0]


def fit_bradley_terry(games: Iterable[Game], first_move_advantage: bool = True, prior_games: "float | None" = None,
                      anchor: "str | None" = None, anchor_rating: float = 1000.0) -> Fit:
    """Bradley-Terry ratings of the players of ``games`` (draws as half-games), by maximum likelihood.

    ``first_move_advantage``: also fit h, the first mover's edge, P(first mover wins) =
    sigmoid(r_first - r_second + h) on the logit scale (games with ``seat_a`` None take no part in it).
    ``prior_games``: None fits plain maximum likelihood when it exists and otherwise
    ``AUTO_PRIOR_GAMES`` (1) virtual draw per player against an average player (and one between equals for
    h), said in the notes; a number: always that many (0: plain maximum likelihood, a :class:`ValueError`
    when it does not exist). ``anchor``: the player rated ``anchor_rating``; None: the players' mean is.

    Raises :class:`ValueError` when the games split the players into groups that never met (naming them),
    or when the first-move advantage cannot be told apart from the ratings (seats never swapped).
    """
    _check_prior(prior_games)
    model = _model(games, first_move_advantage, anchor)
    return _point_fit(model, prior_games, anchor, float(anchor_rating))[0]


# -- the bootstrap ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RatingBootstrap:
    """:func:`rating_bootstrap`'s result.

    ``intervals``: each player's rating with its percentile interval (:class:`mosaic.scoring.interval.Interval`;
    ``n_runs`` is the player's games, ``n_tasks`` its distinct opponents). ``advantage``: the same for the
    first-move advantage (None when not fitted). ``p_best``: the fraction of replicates in which each
    player rates highest. ``ranks``: each player's rank (1 best) in the fit and its percentile interval over
    replicates. ``replicates``: ``(reps, players)`` Elo ratings, columns in the order of ``players``.
    """

    fit: Fit
    intervals: dict[str, Interval]
    advantage: "Interval | None"
    p_best: dict[str, float]
    ranks: dict[str, Interval]
    players: tuple[str, ...]
    replicates: np.ndarray
    notes: tuple[str, ...] = ()


def _separated(model: _Model, drawn: np.ndarray) -> np.ndarray:
    """For each replicate's counts ``(reps, strata, 3)``: whether it has no finite maximum-likelihood fit.

    Exact: without the first-move parameter the fit exists if and only if the digraph "k scored (won or
    drew) against l" is strongly connected (else the players of a group that never scored against the
    rest can be pushed down for ever); with it, strongly connected replicates are checked by
    :func:`_separable`'s linear program.
    """
    tally, players = model.tally, len(model.tally.players)
    reach = np.broadcast_to(np.eye(players), (drawn.shape[0], players, players)).copy()
    rep, row = np.nonzero(drawn[..., 0] + drawn[..., 1] > 0)  # i scored against j
    reach[rep, tally.i[row], tally.j[row]] = 1.0
    rep, row = np.nonzero(drawn[..., 2] + drawn[..., 1] > 0)  # j scored against i
    reach[rep, tally.j[row], tally.i[row]] = 1.0
    for _ in range(max(1, math.ceil(math.log2(players)))):  # paths of length 2, 4, 8, ...
        reach = np.minimum(reach @ reach, 1.0)
    separated = ~np.all(reach > 0, axis=(1, 2))
    if model.fit_advantage:
        xr = model.x @ model.basis
        for k in np.flatnonzero(~separated):
            separated[k] = _separable(xr, drawn[k])
    return separated


def resample_tally(tally: Tally, reps: int, rng: np.random.Generator) -> np.ndarray:
    """Stratified resamples of the games as counts ``(reps, strata, 3)``: each pairing's games drawn with
    replacement among themselves (their seats with them), as multinomial counts over the pairing's
    (seat arrangement, result) categories."""
    pairs, pair_of = np.unique(np.stack([tally.i, tally.j], axis=1), axis=0, return_inverse=True)
    pair_of = np.asarray(pair_of).reshape(-1)
    slot = (1 - tally.sign).astype(int)  # seat sign +1, 0, -1 -> slot 0, 1, 2
    table = np.zeros((len(pairs), 3, 3))
    table[pair_of, slot] = tally.counts
    table = table.reshape(len(pairs), 9)
    totals = table.sum(axis=1)
    drawn = rng.multinomial(totals.astype(int), table / totals[:, None], size=(reps, len(pairs)))
    return drawn.reshape(reps, len(pairs), 3, 3)[:, pair_of, slot].astype(float)


def rating_bootstrap(games: Iterable[Game], reps: int = 1000, confidence: float = 0.95, seed: int = 0,
                     first_move_advantage: bool = True, prior_games: "float | None" = None,
                     anchor: "str | None" = None, anchor_rating: float = 1000.0) -> RatingBootstrap:
    """:func:`fit_bradley_terry` with percentile intervals from a bootstrap over games.

    The bootstrap is stratified by pairing: each pairing's games are resampled with replacement among
    themselves (each with its seats), so every pairing keeps its game count (the schedule of who meets
    whom is fixed; the results are random). A pairing's resample is drawn as multinomial counts over its
    (seat arrangement, result) categories, which is the same thing; all from
    ``np.random.default_rng(seed)``. (Keeping the seat balance too, by resampling within each seat
    arrangement, was tried and rejected: with one or two games per arrangement a replicate barely
    differs from the data and the intervals collapse.)
    Each replicate is refitted with the point fit's prior; a replicate with no finite maximum-likelihood
    fit (a player that won or lost all its resampled games) is fitted with ``AUTO_PRIOR_GAMES`` virtual
    draws instead, and counted in ``notes``.

    Percentile intervals run somewhat narrow. Measured by simulation (tests/test_ratings.py: 6 players
    0-600 Elo, draws, a first-move edge), a nominal 95% interval for a gap to an anchor covered the truth
    0.905-0.936 of the time at 20 games per pairing, 0.84-0.89 at 6 and 0.69-0.78 at 2. So: trust the
    stated level only roughly from about 20 games per pairing, and read intervals from fewer than about
    10 as optimistic (there players sweep their resampled games and the ends rest on the prior too).
    A rating against the mean (no ``anchor``) is an interval for that player's gap to the field's
    average; with an ``anchor`` it is the gap to that player.
    """
    _check_prior(prior_games)
    check_bootstrap(reps, confidence)
    model = _model(games, first_move_advantage, anchor)
    fit, _ = _point_fit(model, prior_games, anchor, float(anchor_rating))
    tally, basis = model.tally, model.basis
    p = len(tally.players)
    counts = tally.counts
    drawn = resample_tally(tally, int(reps), np.random.default_rng(seed))
    pure = fit.prior_games == 0
    params, failed = _fit_rows(tally, basis, model.fit_advantage, drawn[..., 0], drawn[..., 1], drawn[..., 2],
                               fit.prior_games, may_diverge=pure)
    notes = list(fit.notes)
    if failed.any() and not pure:
        raise RuntimeError("rating_bootstrap: a replicate's fit did not converge (a bug: please report the games)")
    if failed.any():
        flagged = np.flatnonzero(failed)
        separated = _separated(model, drawn[flagged])
        for subset, prior in ((flagged[separated], AUTO_PRIOR_GAMES), (flagged[~separated], 0.0)):
            if subset.size:
                again, still = _fit_rows(tally, basis, model.fit_advantage, drawn[subset, :, 0], drawn[subset, :, 1],
                                         drawn[subset, :, 2], prior)
                if still.any():
                    raise RuntimeError("rating_bootstrap: a replicate's fit did not converge (a bug: please report "
                                       "the games)")
                params[subset] = again
        if separated.any():
            notes.append(f"{int(separated.sum())} of {reps} bootstrap replicates had no finite maximum-likelihood fit "
                         "(a player, or a group, won or lost all its resampled games against the rest): they were "
                         "fitted with "
                         f"{AUTO_PRIOR_GAMES:g} virtual draw(s) per player; beyond a few percent the intervals' ends "
                         "rest on that prior: play more games per pairing")
    anchor_index = None if anchor is None else tally.players.index(anchor)
    elo = _to_elo(params, p, anchor_index, float(anchor_rating))
    tail = 100.0 * (1.0 - confidence) / 2.0
    low, high = np.percentile(elo, [tail, 100.0 - tail], axis=0)
    opponents = {k: set(tally.j[tally.i == k].tolist()) | set(tally.i[tally.j == k].tolist()) for k in range(p)}
    played = {k: int(counts[(tally.i == k) | (tally.j == k)].sum()) for k in range(p)}
    intervals = {name: Interval(fit.ratings[name], float(low[tally.players.index(name)]),
                                float(high[tally.players.index(name)]), n_runs=played[tally.players.index(name)],
                                n_tasks=len(opponents[tally.players.index(name)]), confidence=float(confidence))
                 for name in fit.ratings}
    advantage = None
    if model.fit_advantage:
        h = ELO_PER_LOGIT * params[:, p]
        a_low, a_high = np.percentile(h, [tail, 100.0 - tail])
        advantage = Interval(fit.advantage, float(a_low), float(a_high), n_runs=int(counts[tally.sign != 0].sum()),
                             n_tasks=0, confidence=float(confidence))
    rank = 1 + np.sum(elo[:, None, :] > elo[:, :, None], axis=2)  # (reps, players): how many rate higher, + 1
    point_elo = np.array([fit.ratings[name] for name in tally.players])
    point_rank = 1 + np.sum(point_elo[None, :] > point_elo[:, None], axis=1)
    r_low, r_high = np.quantile(rank, [(1.0 - confidence) / 2.0, 1.0 - (1.0 - confidence) / 2.0], axis=0,
                                method="inverted_cdf")
    ranks = {name: Interval(int(point_rank[k]), int(r_low[k]), int(r_high[k]), n_runs=played[k],
                            n_tasks=len(opponents[k]), confidence=float(confidence))
             for name in fit.ratings for k in [tally.players.index(name)]}
    best = np.mean(rank == 1, axis=0)
    p_best = {name: float(best[tally.players.index(name)]) for name in fit.ratings}
    return RatingBootstrap(fit=fit, intervals=intervals, advantage=advantage, p_best=p_best, ranks=ranks,
                           players=tally.players, replicates=elo, notes=tuple(notes))


def rating_intervals(games: Iterable[Game], reps: int = 1000, confidence: float = 0.95, seed: int = 0,
                     first_move_advantage: bool = True, prior_games: "float | None" = None,
                     anchor: "str | None" = None, anchor_rating: float = 1000.0) -> dict[str, Interval]:
    """Each player's Bradley-Terry rating with its bootstrap percentile interval, best first
    (:func:`rating_bootstrap`'s ``intervals``; see there for the resampling and when to distrust it)."""
    return rating_bootstrap(games, reps, confidence, seed, first_move_advantage, prior_games, anchor,
                            anchor_rating).intervals


# -- the crosstable --------------------------------------------------------------------------------
def wilson_interval(successes: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a proportion ``successes / n``: the proportions p with
    ``(successes / n - p)^2 <= z^2 p (1 - p) / n``. Unlike the normal (Wald) interval it stays inside
    [0, 1] and does not collapse at 0 or n successes. ``successes`` may be fractional (half-points)."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n: must be an integer >= 1, got {n!r}")
    if not (0.0 <= float(successes) <= n):
        raise ValueError(f"successes: must lie in [0, n] = [0, {n}], got {successes!r}")
    check_bootstrap(1, confidence)
    z = float(scipy_stats.norm.ppf(0.5 + confidence / 2.0))
    phat, z2 = float(successes) / n, z * z
    centre = (phat + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(phat * (1 - phat) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Record:
    """Wins, draws and losses over ``games``, and the score: (wins + draws / 2) / games, the win rate
    counting a draw as half a win (what Bradley-Terry models), with its Wilson interval: ``interval``, also
    read as ``score``, ``low``, ``high`` and ``confidence``.

    With draws the Wilson interval is conservative: it assumes each game scores 0 or 1, and a draw (1/2)
    varies less than that.
    """

    games: int
    wins: int
    draws: int
    losses: int
    interval: Interval

    @property
    def score(self) -> float:
        return self.interval.point

    @property
    def low(self) -> float:
        return self.interval.low

    @property
    def high(self) -> float:
        return self.interval.high

    @property
    def confidence(self) -> float:
        return self.interval.confidence


def _record(wins: int, draws: int, losses: int, confidence: float) -> Record:
    wins, draws, losses = int(wins), int(draws), int(losses)
    games = wins + draws + losses
    low, high = wilson_interval(wins + 0.5 * draws, games, confidence)
    return Record(games, wins, draws, losses,
                  Interval((wins + 0.5 * draws) / games, low, high, n_runs=games, confidence=float(confidence)))


@dataclass(frozen=True)
class Crosstable:
    """``pairs[(a, b)]``: a's record against b, for every ordered pair that met (both orders).
    ``totals[a]``: a's record over all its games. ``first_mover``: the first mover's record over every
    game with a first mover (None without one): a score above 1/2 is a first-move advantage."""

    players: tuple[str, ...]
    pairs: dict[tuple[str, str], Record]
    totals: dict[str, Record]
    first_mover: "Record | None"


def crosstable(games: Iterable[Game], confidence: float = 0.95) -> Crosstable:
    """Per ordered pair, per player and per seat: games, wins, draws, losses and score with a Wilson interval."""
    tally = tally_games(games)
    pairs: dict[tuple[str, str], list[int]] = {}
    totals: dict[str, list[int]] = {p: [0, 0, 0] for p in tally.players}
    first = [0, 0, 0]
    for i, j, sign, (w, d, lo) in zip(tally.i, tally.j, tally.sign, tally.counts.astype(int)):
        a, b = tally.players[i], tally.players[j]
        for key, add in (((a, b), (w, d, lo)), ((b, a), (lo, d, w))):
            row = pairs.setdefault(key, [0, 0, 0])
            for k in range(3):
                row[k] += add[k]
                totals[key[0]][k] += add[k]
        if sign != 0:
            mover = (w, d, lo) if sign > 0 else (lo, d, w)
            for k in range(3):
                first[k] += mover[k]
    return Crosstable(players=tally.players,
                      pairs={key: _record(*row, confidence) for key, row in sorted(pairs.items())},
                      totals={p: _record(*row, confidence) for p, row in totals.items()},
                      first_mover=_record(*first, confidence) if sum(first) else None)


# -- sequential ratings --------------------------------------------------------------------------------
def elo_sequence(games: Iterable[Game], k: float = 16.0, initial: float = 1000.0) -> list[dict[str, float]]:
    """Classic sequential Elo: after each game, every player seen so far and its rating.

    For plotting how a snapshot's rating moves over training, nothing more: it depends on the order of
    the games (the same games shuffled end elsewhere), ignores seats, and lags behind. The estimate to
    report is :func:`fit_bradley_terry` with :func:`rating_intervals`.
    """
    if isinstance(k, bool) or not isinstance(k, (int, float)) or not (math.isfinite(k) and k > 0):
        raise ValueError(f"k: must be a number > 0, got {k!r}")
    ratings: dict[str, float] = {}
    out = []
    for n, g in enumerate(games):
        if not isinstance(g, Game):
            raise ValueError(f"games[{n}]: expected a Game, got {type(g).__name__}")
        ra, rb = ratings.setdefault(g.a, float(initial)), ratings.setdefault(g.b, float(initial))
        change = k * (g.score_a - 1.0 / (1.0 + 10.0 ** ((rb - ra) / 400.0)))
        ratings[g.a], ratings[g.b] = ra + change, rb - change
        out.append(dict(ratings))
    return out


# -- openskill ----------------------------------------------------------------------------------------
def openskill_ratings(games: Iterable["Game | TeamGame"], model: str = "PlackettLuce",
                      **options: Any) -> dict[str, tuple[float, float]]:
    """Each player's ``(mu, sigma)`` after openskill's (Weng-Lin) incremental updates over ``games`` in order.

    ``model``: one of openskill's models (PlackettLuce, BradleyTerryFull, BradleyTerryPart,
    ThurstoneMostellerFull, ThurstoneMostellerPart); ``options`` go to its constructor (mu, sigma, beta,
    tau, ...). :class:`TeamGame` s rate each member; a :class:`Game` is a game of two teams of one. A draw
    is a shared rank. Seats are ignored. Like Elo, the result depends on the order of the games; it is
    meant for many-player and team games that Bradley-Terry here does not model. Needs the ``openskill``
    package.
    """
    try:
        from openskill import models as os_models
    except ImportError:
        raise ModuleNotFoundError("openskill_ratings needs the openskill package (pip install openskill)") from None
    classes = {cls.__name__: cls for cls in os_models.MODELS}
    if model not in classes:
        raise ValueError(f"model: {model!r} is not one of {', '.join(sorted(classes))}")
    rater = classes[model](**options)
    state: dict[str, Any] = {}
    for n, g in enumerate(games):
        if isinstance(g, Game):
            g = TeamGame((g.a,), (g.b,), g.score_a)
        elif not isinstance(g, TeamGame):
            raise ValueError(f"games[{n}]: expected a Game or a TeamGame, got {type(g).__name__}")
        teams = [[state.setdefault(p, rater.rating(name=p)) for p in team] for team in (g.team_a, g.team_b)]
        ranks = [0.0, 0.0] if g.score_a == 0.5 else [0.0, 1.0] if g.score_a == 1.0 else [1.0, 0.0]
        for team, new in zip((g.team_a, g.team_b), rater.rate(teams, ranks=ranks)):
            for p, rating in zip(team, new):
                state[p] = rating
    return {p: (float(r.mu), float(r.sigma)) for p, r in state.items()}
