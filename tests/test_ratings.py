"""mosaic.scoring.ratings against closed forms, a published fit, an independent fit, a naive bootstrap, and by simulation.

Coverage. N simulated tournaments give a coverage with binomial standard deviation sqrt(c (1 - c) / N); we
accept 3 of them. Measured once over 1500 tournaments (6 players, true Elo 0 to 600 in steps of 120, draws
up to half the games between equals, the first mover +50 Elo, 200 replicates each, each gap to the weakest
player as anchor), a nominal 95% percentile interval for a rating gap covered the truth:

- at 20 games per pairing: 0.905 to 0.936, lowest for the gap farthest from the anchor (600 Elo, where the
  maximum-likelihood gap is biased outward by about 13 Elo on a spread of 62); the first-move advantage 0.925
  (with 1000 replicates instead of 200, over 500 tournaments: 0.918 to 0.940, so not a matter of replicates);
- at 6 games per pairing: 0.84 to 0.89 (the advantage 0.91); at 2: 0.69 to 0.78 (the advantage 0.83; and
  in many tournaments some replicates need the prior).

So the intervals run slightly narrow even at 20 games per pairing, and are not to be trusted at their
stated level below about 10 games per pairing: the simulation test checks 20 games per pairing against
0.925, and that 2 per pairing covers clearly less.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy.special import expit

from mosaic.scoring import ratings
from mosaic.scoring.ratings import ELO_PER_LOGIT, Game, TeamGame

N_TOURNAMENTS = 200
SIM_REPS = 200
TRUE_ELO = np.array([0.0, 120.0, 240.0, 360.0, 480.0, 600.0])
TRUE_ADVANTAGE = 50.0
DRAW_SHARE = 0.5
COVERAGE_AT_20 = 0.925  # measured (module docstring)


def binomial_tolerance(p: float, n: int = N_TOURNAMENTS) -> float:
    return 3.0 * math.sqrt(p * (1.0 - p) / n)


def logit(p: float) -> float:
    return math.log(p / (1.0 - p))


# -- known answers ---------------------------------------------------------------------------------------
def test_two_players_closed_form_with_draws_as_half_games():
    """Two players: the maximum-likelihood logit gap is log((w + d/2) / (l + d/2))."""
    games = [Game("a", "b", 1.0, None)] * 7 + [Game("a", "b", 0.5, None)] * 4 + [Game("b", "a", 1.0, None)] * 3
    fit = ratings.fit_bradley_terry(games)
    assert fit.advantage is None and any("first mover" in n for n in fit.notes)
    gap = (fit.ratings["a"] - fit.ratings["b"]) / ELO_PER_LOGIT
    assert gap == pytest.approx(math.log((7 + 2) / (3 + 2)), abs=1e-9)
    assert (fit.ratings["a"] + fit.ratings["b"]) / 2 == pytest.approx(1000.0, abs=1e-9)
    assert fit.prior_games == 0.0 and fit.games == 14
    p = expit(gap)  # the log-likelihood, game by game: s log p + (1 - s) log(1 - p)
    by_game = sum(g.score_a * math.log(p if g.a == "a" else 1 - p)
                  + (1 - g.score_a) * math.log(1 - p if g.a == "a" else p) for g in games)
    assert fit.log_likelihood == pytest.approx(by_game, abs=1e-9)
    assert fit.expected_score("a", "b") == pytest.approx(9 / 14, abs=1e-12)


def test_two_players_closed_form_with_first_move_advantage():
    """a first in 9 games scoring 6.5; b first in 11, a scoring 4. The model is saturated:
    sigmoid(delta + h) = 6.5/9 and sigmoid(delta - h) = 4/11, so delta and h have closed forms."""
    games = ([Game("a", "b", 1.0, 0)] * 5 + [Game("a", "b", 0.5, 0)] * 3 + [Game("a", "b", 0.0, 0)]
             + [Game("b", "a", 0.0, 0)] * 3 + [Game("b", "a", 0.5, 0)] * 2 + [Game("b", "a", 1.0, 0)] * 6)
    fit = ratings.fit_bradley_terry(games)
    first, second = logit(6.5 / 9), logit(4 / 11)
    assert (fit.ratings["a"] - fit.ratings["b"]) / ELO_PER_LOGIT == pytest.approx((first + second) / 2, abs=1e-9)
    assert fit.advantage / ELO_PER_LOGIT == pytest.approx((first - second) / 2, abs=1e-9)
    assert fit.expected_score("a", "b", seat_a=0) == pytest.approx(6.5 / 9, abs=1e-9)
    assert fit.expected_score("a", "b", seat_a=1) == pytest.approx(4 / 11, abs=1e-9)
    # the same games written from the other side (seat_a=1) fit the same
    flipped = ratings.fit_bradley_terry([Game(g.b, g.a, 1.0 - g.score_a, 1 - g.seat_a) for g in games])
    assert flipped.ratings == pytest.approx(fit.ratings, abs=1e-9)
    assert flipped.advantage == pytest.approx(fit.advantage, abs=1e-9)


#: Agresti (2002), Categorical Data Analysis, 2nd ed., Sec. 10.6, pp. 437-438: the 1987 season of the
#: American League East, one (home team, away team, home wins, away wins) per line, as in the `baseball`
#: data of the R package BradleyTerry2.
BASEBALL = """\
Milwaukee,Detroit,4,3;Milwaukee,Toronto,4,2;Milwaukee,New York,4,3;Milwaukee,Boston,6,1;Milwaukee,Cleveland,4,2
Milwaukee,Baltimore,6,0;Detroit,Milwaukee,3,3;Detroit,Toronto,4,2;Detroit,New York,4,3;Detroit,Boston,6,0
Detroit,Cleveland,6,1;Detroit,Baltimore,4,3;Toronto,Milwaukee,2,5;Toronto,Detroit,4,3;Toronto,New York,2,4
Toronto,Boston,4,3;Toronto,Cleveland,4,2;Toronto,Baltimore,6,0;New York,Milwaukee,3,3;New York,Detroit,5,1
New York,Toronto,2,5;New York,Boston,4,3;New York,Cleveland,4,2;New York,Baltimore,6,1;Boston,Milwaukee,5,1
Boston,Detroit,2,5;Boston,Toronto,3,3;Boston,New York,4,2;Boston,Cleveland,5,2;Boston,Baltimore,6,0
Cleveland,Milwaukee,2,5;Cleveland,Detroit,3,3;Cleveland,Toronto,3,4;Cleveland,New York,4,3;Cleveland,Boston,4,2
Cleveland,Baltimore,2,4;Baltimore,Milwaukee,2,5;Baltimore,Detroit,1,5;Baltimore,Toronto,1,6;Baltimore,New York,2,4
Baltimore,Boston,1,6;Baltimore,Cleveland,3,4"""
#: The published fits (logits, Baltimore 0), Agresti's Table 10.11, to the 4 decimals BradleyTerry2 prints.
AGRESTI_PLAIN = {"Boston": 1.1077, "Cleveland": 0.6839, "Detroit": 1.4364, "Milwaukee": 1.5814,
                 "New York": 1.2476, "Toronto": 1.2945}
AGRESTI_HOME = {"Boston": 1.1438, "Cleveland": 0.7047, "Detroit": 1.4754, "Milwaukee": 1.6196,
                "New York": 1.2813, "Toronto": 1.3271}
AGRESTI_HOME_ADVANTAGE = 0.3023


def baseball_games() -> list[Game]:
    games = []
    for record in BASEBALL.replace("\n", ";").split(";"):
        home, away, home_wins, away_wins = record.split(",")
        games += [Game(home, away, 1.0, 0)] * int(home_wins) + [Game(home, away, 0.0, 0)] * int(away_wins)
    return games


@pytest.mark.parametrize("home", [False, True], ids=["plain", "home-advantage"])
def test_agresti_baseball_published_fit(home):
    """The published Bradley-Terry fits of Agresti's baseball data, with and without the home advantage
    (the home team plays the first mover's part), agree to the 4 printed decimals."""
    games = baseball_games()
    assert len(games) == 273
    fit = ratings.fit_bradley_terry(games, first_move_advantage=home, anchor="Baltimore", anchor_rating=0.0)
    published = AGRESTI_HOME if home else AGRESTI_PLAIN
    assert fit.ratings["Baltimore"] == 0.0
    for team, value in published.items():
        assert fit.ratings[team] / ELO_PER_LOGIT == pytest.approx(value, abs=5e-5 + 1e-12), team
    if home:
        assert fit.advantage / ELO_PER_LOGIT == pytest.approx(AGRESTI_HOME_ADVANTAGE, abs=5e-5)
    else:
        assert fit.advantage is None
    assert list(fit.ratings)[0] == "Milwaukee" and fit.notes == ()


def irls(games: list[Game], players: list[str], with_advantage: bool) -> np.ndarray:
    """An independent fit: logistic regression of each game's score (draws 0.5) on a +-1 design matrix,
    one row per game, the first player's column dropped (its logit 0), by iteratively reweighted least squares."""
    column = {p: k - 1 for k, p in enumerate(players)}
    width = len(players) - 1 + int(with_advantage)
    x = np.zeros((len(games), width))
    y = np.zeros(len(games))
    for row, g in enumerate(games):
        if column[g.a] >= 0:
            x[row, column[g.a]] += 1.0
        if column[g.b] >= 0:
            x[row, column[g.b]] -= 1.0
        if with_advantage and g.seat_a is not None:
            x[row, -1] = 1.0 if g.seat_a == 0 else -1.0
        y[row] = g.score_a
    beta = np.zeros(width)
    for _ in range(100):
        p = expit(x @ beta)
        w = p * (1 - p)
        z = x @ beta + (y - p) / w
        new = np.linalg.solve(x.T @ (w[:, None] * x), x.T @ (w * z))
        if np.max(np.abs(new - beta)) < 1e-13:
            return new
        beta = new
    return beta


def random_tournament(seed: int, draws: bool = True) -> list[Game]:
    """5 players, unequal game counts, one pairing never played, seats unbalanced, a few seatless games."""
    rng = random.Random(seed)
    strength = {"p": 0.0, "q": 0.4, "r": -0.3, "s": 1.0, "t": 0.2}
    games = []
    for a, b, n in [("p", "q", 9), ("p", "r", 6), ("p", "s", 12), ("q", "r", 7), ("q", "t", 10), ("r", "s", 8),
                    ("s", "t", 5), ("r", "t", 11), ("p", "t", 4)]:
        for k in range(n):
            seat = None if k == 0 else (0 if rng.random() < 0.6 else 1)
            pa = expit(strength[a] - strength[b] + (0.2 if seat == 0 else -0.2 if seat == 1 else 0.0))
            u = rng.random()
            d = 0.3 * min(pa, 1 - pa) if draws else 0.0
            games.append(Game(a, b, 1.0 if u < pa - d else 0.5 if u < pa + d else 0.0, seat))
    return games


@pytest.mark.parametrize("with_advantage", [False, True])
def test_fit_agrees_with_an_independent_logistic_regression(with_advantage):
    games = random_tournament(3)
    players = sorted({g.a for g in games} | {g.b for g in games})
    beta = irls(games, players, with_advantage)
    fit = ratings.fit_bradley_terry(games, first_move_advantage=with_advantage, anchor=players[0], anchor_rating=0.0)
    assert fit.prior_games == 0.0 and fit.notes == ()
    for k, p in enumerate(players[1:]):
        assert fit.ratings[p] / ELO_PER_LOGIT == pytest.approx(beta[k], abs=1e-6), p
    if with_advantage:
        assert fit.advantage / ELO_PER_LOGIT == pytest.approx(beta[-1], abs=1e-6)
    # mean-anchored ratings are the same gaps, shifted
    centred = ratings.fit_bradley_terry(games, first_move_advantage=with_advantage)
    assert np.mean(list(centred.ratings.values())) == pytest.approx(1000.0, abs=1e-9)
    shift = centred.ratings[players[0]]
    for p in players:
        assert centred.ratings[p] - shift == pytest.approx(fit.ratings[p], abs=1e-6)


# -- the weak prior, errors ----------------------------------------------------------------------------
def sweep() -> list[Game]:
    """x wins every game; y and z play a balanced, drawn-and-split series."""
    return ([Game("x", "y", 1.0, k % 2) for k in range(6)] + [Game("y", "z", 0.5, k % 2) for k in range(4)]
            + [Game("z", "y", 1.0, k % 2) for k in range(2)] + [Game("y", "z", 1.0, k % 2) for k in range(2)])


def test_a_player_who_won_every_game_gets_a_finite_rating_and_a_note():
    fit = ratings.fit_bradley_terry(sweep())
    assert all(math.isfinite(r) for r in fit.ratings.values())
    assert list(fit.ratings) [0] == "x" and fit.prior_games == ratings.AUTO_PRIOR_GAMES
    assert any("x won every game" in n and "prior" in n for n in fit.notes), fit.notes
    assert fit.ratings["x"] - fit.ratings["y"] > 300  # far ahead, not infinitely
    with pytest.raises(ValueError, match="no finite maximum-likelihood fit.*x won every game"):
        ratings.fit_bradley_terry(sweep(), prior_games=0)
    stronger = ratings.fit_bradley_terry(sweep(), prior_games=5)  # more virtual draws: pulled nearer the mean
    assert stronger.ratings["x"] < fit.ratings["x"]
    boot = ratings.rating_bootstrap(sweep(), reps=100)
    assert all(math.isfinite(v) for iv in boot.intervals.values() for v in (iv.low, iv.high))


def test_the_first_mover_winning_every_decisive_game_needs_the_prior_too():
    """No player swept, yet no finite fit: a first wins, b first draws (delta + h -> infinity, delta - h = 0)."""
    games = [Game("a", "b", 1.0, 0)] * 3 + [Game("a", "b", 0.5, 1)] * 3
    with pytest.raises(ValueError, match="no finite maximum-likelihood fit"):
        ratings.fit_bradley_terry(games, prior_games=0)
    fit = ratings.fit_bradley_terry(games)
    assert fit.prior_games > 0 and math.isfinite(fit.advantage) and fit.advantage > 100
    plain = ratings.fit_bradley_terry(games, first_move_advantage=False)  # without h the ML exists
    assert plain.prior_games == 0 and plain.notes == ()


def test_a_prior_leaves_well_determined_ratings_nearly_unchanged():
    games = baseball_games()
    ml = ratings.fit_bradley_terry(games)
    prior = ratings.fit_bradley_terry(games, prior_games=1)
    assert prior.prior_games == 1.0
    for team in ml.ratings:
        assert abs(prior.ratings[team] - ml.ratings[team]) < 3.0  # Elo; the spread is about 280


def test_a_long_ladder_has_large_finite_gaps():
    """30 training snapshots, each playing only the next one, winning 32 of 40: a tree of pairings, so each
    gap is log(32/8) exactly; the ends lie about 20 logits (3500 Elo) from the mean, far enough to look like
    a fit running off to infinity, which it is not (replicates are checked exactly before any prior)."""
    names = [f"s{k:02d}" for k in range(30)]
    games = [Game(names[k + 1], names[k], 1.0 if g < 32 else 0.0, g % 2) for k in range(29) for g in range(40)]
    boot = ratings.rating_bootstrap(games, reps=100, seed=3, first_move_advantage=False)
    fit = boot.fit
    assert fit.prior_games == 0 and fit.notes == ()
    for k in range(29):
        assert (fit.ratings[names[k + 1]] - fit.ratings[names[k]]) / ELO_PER_LOGIT == pytest.approx(math.log(4))
    assert all(iv.low < iv.point < iv.high for iv in boot.intervals.values())
    assert all(math.isfinite(v) for v in boot.replicates.ravel())


def test_replicates_without_a_finite_fit_are_found_exactly_and_counted():
    """Two exact tests of "no finite maximum-likelihood fit" agree on random sparse results: the
    "scored against" digraph not strongly connected (used for replicates), and the linear program."""
    rng = np.random.default_rng(4)
    games = [Game(a, b, 0.5, None) for a, b in (("a", "b"), ("b", "c"), ("c", "d"), ("a", "c"), ("b", "d"))]
    model = ratings._model(games, first_move_advantage=False, anchor=None)
    drawn = rng.multinomial(2, [0.45, 0.1, 0.45], size=(300, len(model.tally.i))).astype(float)
    by_graph = ratings._separated(model, drawn)
    by_lp = np.array([ratings._separable(model.x @ model.basis, d) for d in drawn])
    assert np.array_equal(by_graph, by_lp) and 0 < by_graph.sum() < 300
    # a tournament whose fit exists but whose resamples often do not
    few = [Game("a", "b", 1.0, 0), Game("a", "b", 0.0, 1), Game("b", "c", 1.0, 0), Game("b", "c", 0.5, 1),
           Game("c", "a", 1.0, 0), Game("c", "a", 0.0, 1)]
    boot = ratings.rating_bootstrap(few, reps=200, seed=0, first_move_advantage=False)
    assert boot.fit.prior_games == 0 and boot.fit.notes == ()
    assert any("bootstrap replicates had no finite" in n for n in boot.notes), boot.notes
    assert np.all(np.isfinite(boot.replicates))


def test_disconnected_players_are_an_error_naming_the_groups():
    games = [Game("a", "b", 1.0), Game("b", "a", 0.5), Game("c", "d", 0.0), Game("d", "e", 1.0)]
    with pytest.raises(ValueError, match=r"2 groups.*\[c, d, e\]; \[a, b\]"):
        ratings.fit_bradley_terry(games)
    with pytest.raises(ValueError, match="2 groups"):
        ratings.rating_intervals(games, reps=10)


def test_an_advantage_that_cannot_be_told_from_the_ratings_is_an_error():
    """A gauntlet where the candidate always moves first: its edge and h are the same thing."""
    games = [Game("cand", opp, s, 0) for opp in ("o1", "o2", "o3") for s in (1.0, 0.0, 0.5)]
    with pytest.raises(ValueError, match="first_move_advantage=False"):
        ratings.fit_bradley_terry(games)
    assert ratings.fit_bradley_terry(games, first_move_advantage=False).advantage is None


@pytest.mark.parametrize("bad, match", [
    (lambda: Game("a", "a", 1.0), "cannot play itself"),
    (lambda: Game("a", "b", 0.7), "score_a"),
    (lambda: Game("a", "b", True), "score_a"),
    (lambda: Game("a", "", 1.0), "Game.b"),
    (lambda: Game("a", "b", 1.0, 2), "seat_a"),
    (lambda: TeamGame(["a", "b"], ["b"], 1.0), "both teams"),
    (lambda: TeamGame([], ["b"], 1.0), "team_a"),
    (lambda: ratings.fit_bradley_terry([]), "no games"),
    (lambda: ratings.fit_bradley_terry([TeamGame(["a"], ["b"], 1.0)]), "openskill_ratings"),
    (lambda: ratings.fit_bradley_terry([Game("a", "b", 1.0)] * 2 + [Game("b", "a", 1.0)], anchor="z"), "anchor"),
    (lambda: ratings.fit_bradley_terry([Game("a", "b", 0.5)], prior_games=-1), "prior_games"),
    (lambda: ratings.rating_intervals([Game("a", "b", 0.5)], reps=0), "reps"),
    (lambda: ratings.rating_intervals([Game("a", "b", 0.5)], confidence=1.0), "confidence"),
    (lambda: ratings.wilson_interval(3, 2), "successes"),
    (lambda: ratings.elo_sequence([Game("a", "b", 1.0)], k=0), "k"),
])
def test_bad_input_is_a_clear_value_error(bad, match):
    with pytest.raises(ValueError, match=match):
        bad()


def test_games_from_results():
    records = [{"players": ["a", "b"], "scores": [1, 0]}, {"players": ["b", "a"], "scores": [0.5, 0.5]},
               {"players": ["a", "b"], "scores": [-3.0, 12.5]}]
    assert ratings.games_from_results(records) == [Game("a", "b", 1.0, 0), Game("b", "a", 0.5, 0),
                                                   Game("a", "b", 0.0, 0)]
    assert ratings.games_from_results(records[:1], sequential=False) == [Game("a", "b", 1.0, None)]
    for bad in ({"players": ["a"], "scores": [1]}, {"players": ["a", "b"]}, {"players": ["a", "a"], "scores": [1, 0]},
                {"players": ["a", "b"], "scores": [float("nan"), 0]}):
        with pytest.raises(ValueError, match="record 0"):
            ratings.games_from_results([bad])


# -- the bootstrap ---------------------------------------------------------------------------------------
def test_bootstrap_is_deterministic_with_a_seed():
    games = random_tournament(4)
    one = ratings.rating_bootstrap(games, reps=300, seed=7)
    two = ratings.rating_bootstrap(list(reversed(games)), reps=300, seed=7)  # the order of games does not matter
    assert np.array_equal(one.replicates, two.replicates)
    assert one.intervals == two.intervals and one.p_best == two.p_best
    other = ratings.rating_bootstrap(games, reps=300, seed=8)
    assert not np.array_equal(one.replicates, other.replicates)
    assert ratings.rating_intervals(games, reps=300, seed=7) == one.intervals


def test_bootstrap_summaries_are_consistent():
    boot = ratings.rating_bootstrap(random_tournament(5), reps=400, seed=1)
    assert list(boot.intervals) == list(boot.fit.ratings)
    for player, iv in boot.intervals.items():
        assert iv.low <= iv.point <= iv.high and iv.point == boot.fit.ratings[player]
        rank = boot.ranks[player]
        assert 1 <= rank.low <= rank.point <= rank.high <= len(boot.players)
    assert sum(boot.p_best.values()) == pytest.approx(1.0)
    assert max(boot.p_best, key=boot.p_best.get) == list(boot.fit.ratings)[0]
    top = np.argmax(boot.replicates, axis=1)
    for k, player in enumerate(boot.players):
        assert boot.p_best[player] == pytest.approx(np.mean(top == k))
        ranks = 1 + np.sum(boot.replicates > boot.replicates[:, [k]], axis=1)
        assert boot.ranks[player].low == np.quantile(ranks, 0.025, method="inverted_cdf")
    assert boot.advantage.low <= boot.advantage.point <= boot.advantage.high
    assert boot.intervals["p"].n_runs == 9 + 6 + 12 + 4 and boot.intervals["p"].n_tasks == 4
    assert boot.replicates.shape == (400, 5)
    # an anchor's own interval is a point; the others are gaps to it
    anchored = ratings.rating_bootstrap(random_tournament(5), reps=400, seed=1, anchor="p", anchor_rating=0.0)
    assert (anchored.intervals["p"].low, anchored.intervals["p"].high) == (0.0, 0.0)


def test_bootstrap_matches_a_naive_loop_over_games():
    """Our multinomial draws per pairing against resampling each pairing's games with Python's own RNG
    and refitting each resample with fit_bradley_terry. Endpoints must agree up to Monte-Carlo error:
    an estimated p-quantile from B draws sits at a true level p +- sqrt(p (1 - p) / B), so ours must lie
    between the naive distribution's quantiles at p -+ 4 sqrt(p (1 - p) (1/B1 + 1/B2))."""
    games = random_tournament(6)
    b_own, b_ref = 2000, 300
    boot = ratings.rating_bootstrap(games, reps=b_own, seed=2, anchor="p", anchor_rating=0.0)
    by_pair: dict[frozenset, list[Game]] = {}
    for g in games:
        by_pair.setdefault(frozenset((g.a, g.b)), []).append(g)
    rng = random.Random(9)
    naive = []
    for _ in range(b_ref):
        resample = [rng.choice(pool) for pool in by_pair.values() for _ in pool]
        fit = ratings.fit_bradley_terry(resample, anchor="p", anchor_rating=0.0)
        naive.append([fit.ratings[p] for p in boot.players] + [fit.advantage])
    naive = np.array(naive)
    ours = np.column_stack([boot.replicates, [np.nan] * b_own])
    for col, name in enumerate([*boot.players, "advantage"]):
        if name == "p":
            continue
        iv = boot.advantage if name == "advantage" else boot.intervals[name]
        for value, p in ((iv.low, 0.025), (iv.high, 0.975)):
            d = 4.0 * math.sqrt(p * (1 - p) * (1 / b_own + 1 / b_ref))
            lo, hi = np.quantile(naive[:, col], [max(0.0, p - d), min(1.0, p + d)])
            assert lo <= value <= hi, (name, p, value, lo, hi)
        if name != "advantage":
            assert np.std(ours[:, col]) == pytest.approx(np.std(naive[:, col]), rel=0.15), name


def simulate(rng: np.random.Generator, per_pair: int) -> list[Game]:
    """A round robin of 6 players with TRUE_ELO, per_pair games per pairing (seats alternating), the first
    mover TRUE_ADVANTAGE ahead, draws taking DRAW_SHARE of the closer side's chance (so a player's expected
    score is exactly the Bradley-Terry one, draws counting half)."""
    names = [f"p{k}" for k in range(len(TRUE_ELO))]
    games = []
    for i in range(len(names)):
        for j in range(i + 1, len(names)):
            seats = np.arange(per_pair) % 2
            p = expit((TRUE_ELO[i] - TRUE_ELO[j] + np.where(seats == 0, TRUE_ADVANTAGE, -TRUE_ADVANTAGE))
                      / ELO_PER_LOGIT)
            d = DRAW_SHARE * 2 * np.minimum(p, 1 - p)
            u = rng.random(per_pair)
            scores = np.where(u < p - d / 2, 1.0, np.where(u < p + d / 2, 0.5, 0.0))
            games += [Game(names[i], names[j], float(s), int(seat)) for s, seat in zip(scores, seats)]
    return games


def coverage(per_pair: int, seed: int) -> tuple[np.ndarray, float]:
    rng = np.random.default_rng(seed)
    hits, advantage_hits = np.zeros(len(TRUE_ELO)), 0
    for n in range(N_TOURNAMENTS):
        boot = ratings.rating_bootstrap(simulate(rng, per_pair), reps=SIM_REPS, seed=n, anchor="p0",
                                        anchor_rating=0.0)
        for k, truth in enumerate(TRUE_ELO):
            hits[k] += boot.intervals[f"p{k}"].low <= truth <= boot.intervals[f"p{k}"].high
        advantage_hits += boot.advantage.low <= TRUE_ADVANTAGE <= boot.advantage.high
    return hits[1:] / N_TOURNAMENTS, advantage_hits / N_TOURNAMENTS


def test_interval_coverage_by_simulation():
    at20, advantage20 = coverage(per_pair=20, seed=11)
    for k, c in enumerate(at20, start=1):
        assert abs(c - COVERAGE_AT_20) <= binomial_tolerance(COVERAGE_AT_20), (f"p{k}", c)
        assert c <= 0.95 + binomial_tolerance(0.95), (f"p{k}", c)  # not wider than needed
    assert abs(advantage20 - COVERAGE_AT_20) <= binomial_tolerance(COVERAGE_AT_20), advantage20
    # when to distrust: at 2 games per pairing a "95%" interval misses far more often
    at2, _ = coverage(per_pair=2, seed=12)
    assert 0.6 < np.mean(at2) < 0.85 and np.mean(at2) < np.mean(at20) - 0.08, (at2, at20)  # low, not collapsed


# -- the crosstable ------------------------------------------------------------------------------------
def wilson_by_quadratic(successes: float, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson interval as the roots of (phat - p)^2 = z^2 p (1 - p) / n, a quadratic in p."""
    phat = successes / n
    roots = np.roots([1 + z * z / n, -(2 * phat + z * z / n), phat * phat])
    return float(min(roots.real)), float(max(roots.real))


@pytest.mark.parametrize("successes, n", [(0, 10), (10, 10), (3, 10), (7.5, 12), (1, 1), (154, 273)])
def test_wilson_interval_against_the_quadratic(successes, n):
    low, high = ratings.wilson_interval(successes, n)
    ref = wilson_by_quadratic(successes, n)
    assert low == pytest.approx(ref[0], abs=1e-12) and high == pytest.approx(ref[1], abs=1e-12)
    if successes == 0:  # closed form at zero successes: [0, z^2 / (n + z^2)]
        assert low == 0.0 and high == pytest.approx(1.959963984540054 ** 2 / (n + 1.959963984540054 ** 2))


def test_crosstable():
    games = [Game("a", "b", 1.0, 0), Game("a", "b", 0.5, 1), Game("b", "a", 1.0, 0), Game("a", "c", 0.0, None),
             Game("c", "b", 0.5, 0)]
    table = ratings.crosstable(games)
    ab, ba = table.pairs[("a", "b")], table.pairs[("b", "a")]
    assert (ab.games, ab.wins, ab.draws, ab.losses) == (3, 1, 1, 1) and ab.score == 0.5
    assert (ba.wins, ba.draws, ba.losses) == (1, 1, 1)
    assert (ab.low, ab.high) == pytest.approx(ratings.wilson_interval(1.5, 3))
    assert table.pairs[("c", "a")].wins == 1 and ("b", "c") in table.pairs and ("a", "a") not in table.pairs
    assert (table.totals["a"].games, table.totals["a"].losses) == (4, 2)
    first = table.first_mover  # a first won, b first drew, b first won, (a-c seatless), c first drew
    assert (first.games, first.wins, first.draws, first.losses) == (4, 2, 2, 0)
    assert first.score == 0.75 and (first.low, first.high) == pytest.approx(ratings.wilson_interval(3, 4))
    assert ratings.crosstable([Game("a", "b", 1.0, None)]).first_mover is None
    home = ratings.crosstable(baseball_games()).first_mover
    assert (home.games, home.wins, home.losses) == (273, 154, 119)


# -- sequential ratings ------------------------------------------------------------------------------------
def test_elo_sequence_is_zero_sum_and_order_dependent():
    games = [Game("a", "b", 1.0), Game("b", "c", 0.5), Game("c", "a", 1.0), Game("a", "b", 0.0)]
    seq = ratings.elo_sequence(games, k=16)
    assert len(seq) == 4 and seq[0] == {"a": 1008.0, "b": 992.0}
    assert sum(seq[-1].values()) == pytest.approx(3000.0)
    assert ratings.elo_sequence(list(reversed(games)), k=16)[-1] != seq[-1]


# -- openskill ---------------------------------------------------------------------------------------------
def test_openskill_team_games():
    import openskill  # noqa: F401  (the experiments extra installs it: a missing one fails here)
    games = [TeamGame(["a", "b"], ["c", "d"], 1.0), TeamGame(["a", "c"], ["b", "d"], 0.5), Game("a", "d", 1.0)]
    rated = ratings.openskill_ratings(games)
    assert set(rated) == {"a", "b", "c", "d"}
    mu = {p: m for p, (m, _) in rated.items()}
    assert mu["a"] > 25.0 > mu["d"] and mu["b"] > mu["c"]
    assert all(0 < s < 25.0 / 3.0 + 1.0 for _, s in rated.values())
    draw = ratings.openskill_ratings([TeamGame(["x"], ["y"], 0.5)])
    assert draw["x"] == pytest.approx(draw["y"]) and draw["x"][0] == pytest.approx(25.0)
    assert ratings.openskill_ratings(games, model="BradleyTerryFull")["a"][0] > 25.0
    with pytest.raises(ValueError, match="model"):
        ratings.openskill_ratings(games, model="Glicko")
