"""mosaic.scoring.population against known answers, OpenSpiel's numbers, a linear programme, power iteration,
networkx, and by simulation.

Cycles by simulation. A tournament here is 40 games a pairing among a, b, c with seeds None (the generator is
:func:`tournament`). Measured once, over 200 tournaments (generator seeds 1000-1199, 1000 resamples each,
bootstrap seed = tournament index):

- a planted 3-cycle (a beats b, b beats c, c beats a, each with probability 0.75): the share of resamples in
  which the cycle (a, b, c) appears was at least 0.95 in 79.5% of tournaments; median 0.991, mean 0.965,
  lowest 0.661. The shortfall comes from tournaments where a pairing's observed score fell to about 25 of 40;
- a transitive set (Bradley-Terry strengths 0, 0.5, 1.0 logits): the share of resamples with any cycle was at
  most 0.05 in 84.5% of tournaments; median 0.003, mean 0.025, highest 0.339 (when both neighbouring pairings
  came out near 20 of 40).

So "found in at least 95% of resamples" and "a cycle in at most 5%" describe a typical tournament at 40 games
a pairing, not every one: the test checks the median over ten tournaments (seeds 0-9, 300 resamples each:
measured 0.988 and 0.0), and a share between 5% and 95% is the bootstrap saying the data cannot tell.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from scipy.special import expit

from mosaic.scoring import population as pop
from mosaic.scoring.population import MetaGame
from mosaic.scoring.ratings import Game, fit_bradley_terry


def tournament(win: dict[tuple[str, str], float], seed: int, games: int = 40) -> list[Game]:
    """``games`` games for each pairing (a, b) of ``win``, a winning with probability ``win[(a, b)]``."""
    rng = np.random.default_rng(seed)
    out = []
    for (a, b), p in sorted(win.items()):
        out += [Game(a, b, float(w), None) for w in rng.random(games) < p]
    return out


def bradley_terry(strengths: dict[str, float]) -> dict[tuple[str, str], float]:
    names = sorted(strengths)
    return {(a, b): float(expit(strengths[a] - strengths[b])) for k, a in enumerate(names) for b in names[k + 1:]}


def fixed(a: str, b: str, wins: int, games: int, draws: int = 0) -> list[Game]:
    """a's results against b: ``wins`` wins, ``draws`` draws, the rest losses."""
    return ([Game(a, b, 1.0, None)] * wins + [Game(a, b, 0.5, None)] * draws
            + [Game(a, b, 0.0, None)] * (games - wins - draws))


def antisym(upper: list[list[float]]) -> np.ndarray:
    """The antisymmetric matrix with these entries above the diagonal, row by row."""
    n = len(upper) + 1
    a = np.zeros((n, n))
    for i, row in enumerate(upper):
        a[i, i + 1:] = row
    return a - a.T


def table(a: np.ndarray) -> MetaGame:
    return MetaGame.of([chr(ord("a") + k) for k in range(len(a))], a)


RPS = fixed("paper", "rock", 30, 40) + fixed("rock", "scissors", 30, 40) + fixed("scissors", "paper", 30, 40)
CYCLE = {("a", "b"): 0.75, ("b", "c"): 0.75, ("a", "c"): 0.25}
TRANSITIVE = bradley_terry({"a": 0.0, "b": 0.5, "c": 1.0})
LADDER = bradley_terry({"a": 0.0, "b": 1.0, "c": 2.0, "d": 3.0, "e": 4.0})

# The tables OpenSpiel was run on: T2 is T1 with a copy of player b (index 1) added as player e.
T1 = antisym([[0.8, -0.4, 0.3], [1.2, 0.5], [0.2]])
T2 = np.zeros((5, 5))
T2[:4, :4], T2[4, :4], T2[:4, 4] = T1, T1[1], T1[:, 1]
T3 = antisym([[0.6, -0.9, 0.3, 1.1], [0.7, -0.5, 0.4], [0.25, -0.8], [0.9]])


# -- the meta-game --------------------------------------------------------------------------------------
def test_the_meta_game_is_the_corrected_log_odds_or_the_win_rate():
    games = fixed("a", "b", 7, 14, draws=4) + fixed("a", "c", 10, 10) + fixed("b", "c", 5, 10)
    meta = pop.meta_game(games)
    assert meta.players == ("a", "b", "c") and meta.kind == "logit"
    assert meta.payoff[0, 1] == pytest.approx(math.log((9 + 0.5) / (5 + 0.5)), abs=1e-12)
    assert meta.payoff[0, 2] == pytest.approx(math.log(10.5 / 0.5), abs=1e-12)  # 10 of 10: finite
    assert meta.payoff[1, 2] == 0.0  # even: exactly 0
    np.testing.assert_array_equal(meta.payoff, -meta.payoff.T)
    np.testing.assert_array_equal(meta.games, [[0, 14, 10], [14, 0, 10], [10, 10, 0]])
    rate = pop.meta_game(games, payoff="win_rate")
    assert rate.payoff[0, 1] == pytest.approx(9 / 14 - 0.5) and rate.payoff[0, 2] == 0.5
    assert meta.thin == () and meta.parts == {}


def test_a_missing_pairing_is_refused_by_name_and_a_thin_one_flagged():
    with pytest.raises(ValueError, match=r"1 pairing\(s\) never played: a vs c"):
        pop.meta_game(fixed("a", "b", 3, 6) + fixed("b", "c", 3, 6))
    meta = pop.meta_game(fixed("a", "b", 3, 6) + fixed("b", "c", 3, 6) + fixed("a", "c", 1, 2))
    assert meta.thin == ((None, "a", "c", 2),)
    assert any("fewer than 5 games: a vs c (2)" in n for n in meta.notes)
    assert pop.meta_game(fixed("a", "b", 1, 2), min_games=2).thin == ()


def test_pooling_weighs_each_game_equally_over_the_common_players():
    chess = tournament(bradley_terry({"a": 0.0, "b": 1.0, "c": 2.0}), seed=1, games=100)
    go = tournament(bradley_terry({"a": 2.0, "b": 1.0, "c": 0.0, "d": 0.5}), seed=2, games=10)
    pooled = pop.pooled_meta_game({"go": go, "chess": chess})
    assert pooled.players == ("a", "b", "c") and set(pooled.parts) == {"chess", "go"}
    assert any("d left out" in n for n in pooled.notes)
    own = {"chess": pop.meta_game(chess).payoff, "go": pop.meta_game(go).payoff[:3, :3]}
    for name, payoff in own.items():
        np.testing.assert_allclose(pooled.parts[name].payoff, payoff, atol=1e-12)
    np.testing.assert_allclose(pooled.payoff, (own["chess"] + own["go"]) / 2, atol=1e-12)
    # one table of all the games would let chess's 100 games a pairing outweigh go's 10
    together = pop.meta_game(chess + [g for g in go if "d" not in (g.a, g.b)]).payoff
    assert np.max(np.abs(together - pooled.payoff)) > 0.3
    assert pooled.games[0, 1] == 110
    boot = pop.population_bootstrap({"go": go, "chess": chess}, reps=50, seed=3)
    again = pop.population_bootstrap({"chess": chess, "go": go}, reps=50, seed=3)
    assert boot.weights == again.weights and boot.mass == again.mass
    with pytest.raises(ValueError, match="fewer than two players"):
        pop.pooled_meta_game({"x": fixed("a", "b", 1, 5), "y": fixed("c", "d", 1, 5)})


# -- the acceptance ---------------------------------------------------------------------------
@pytest.mark.parametrize("payoff", pop.PAYOFFS)
def test_rock_paper_scissors_gives_uniform_nash_weights_and_alpha_rank_mass(payoff):
    meta = pop.meta_game(RPS, payoff=payoff)
    nash = pop.nash_averaging(meta)
    assert list(nash.weights.values()) == pytest.approx([1 / 3] * 3, abs=1e-12)
    assert list(nash.ratings.values()) == pytest.approx([0.0] * 3, abs=1e-12)
    for alpha in (0.1, pop.ALPHA, 1000.0):
        ranked = pop.alpha_rank(meta, alpha=alpha)
        assert list(ranked.mass.values()) == pytest.approx([1 / 3] * 3, abs=1e-12)
        assert set(ranked.ranks.values()) == {1}
    found = pop.cycles(meta)
    assert not found.transitive and found.cycles == (("paper", "rock", "scissors"),)
    assert found.components == (("paper", "rock", "scissors"),)
    boot = pop.population_bootstrap(RPS, reps=100, payoff=payoff)
    assert boot.nash == nash and boot.cycle_share[("paper", "rock", "scissors")] >= 0.95
    assert all(boot.weights[p].low < 1 / 3 < boot.weights[p].high for p in boot.meta.players)


def test_a_transitive_population_puts_all_nash_weight_and_the_alpha_rank_mass_on_the_strongest():
    meta = pop.meta_game(tournament(LADDER, seed=0))
    nash = pop.nash_averaging(meta)
    assert nash.weights["e"] == 1.0 and nash.support == ("e",)
    assert nash.ratings["e"] == 0.0 and all(nash.ratings[p] < 0 for p in "abcd")
    assert pop.alpha_rank(meta).mass["e"] > 0.999
    assert pop.alpha_rank(meta, alpha=0.01).mass["e"] < 0.5  # near-neutral selection spreads the mass
    sweep = pop.alpha_sweep(meta)
    assert np.all(np.diff(sweep.mass[:, -1]) > -1e-12)  # e's mass grows with alpha
    assert sweep.settled is not None and sweep.mass[-1, -1] == pytest.approx(1.0, abs=1e-12)
    found = pop.cycles(meta)
    assert found.transitive and found.cycles == ()
    assert found.components == (("e",), ("d",), ("c",), ("b",), ("a",))


def test_an_exact_copy_leaves_nash_ratings_unchanged_and_moves_bradley_terry():
    weak = fixed("paper", "weak", 35, 40) + fixed("rock", "weak", 34, 40) + fixed("scissors", "weak", 33, 40)
    base = fixed("paper", "rock", 28, 40) + fixed("rock", "scissors", 30, 40) + fixed("scissors", "paper", 26, 40) + weak
    copy = [Game("rock2" if g.a == "rock" else g.a, "rock2" if g.b == "rock" else g.b, g.score_a, None)
            for g in base if "rock" in (g.a, g.b)]
    more = base + copy + fixed("rock", "rock2", 0, 20, draws=20)
    before, after = pop.nash_averaging(pop.meta_game(base)), pop.nash_averaging(pop.meta_game(more))
    for player, rating in before.ratings.items():
        assert after.ratings[player] == pytest.approx(rating, abs=1e-9)
    assert after.ratings["rock2"] == pytest.approx(before.ratings["rock"], abs=1e-9)
    assert after.weights["rock"] == pytest.approx(after.weights["rock2"], abs=1e-8)
    assert after.weights["rock"] + after.weights["rock2"] == pytest.approx(before.weights["rock"], abs=1e-8)
    assert before.weights["weak"] == 0.0 and before.ratings["weak"] < 0
    elo_before = fit_bradley_terry(base, anchor="weak").ratings
    elo_after = fit_bradley_terry(more, anchor="weak").ratings
    assert elo_after["paper"] - elo_before["paper"] > 20  # paper beats rock, now twice
    assert elo_after["scissors"] - elo_before["scissors"] < -20


def test_a_planted_three_cycle_is_found_and_a_transitive_set_is_not():
    """The median over ten tournaments (the module docstring says why not one, and what was measured)."""
    planted = [pop.population_bootstrap(tournament(CYCLE, seed), reps=300, seed=seed) for seed in range(10)]
    assert all(b.cycles.cycles == (("a", "b", "c"),) for b in planted)
    assert np.median([b.cycle_share[("a", "b", "c")] for b in planted]) >= 0.95
    ordered = [pop.population_bootstrap(tournament(TRANSITIVE, seed), reps=300, seed=seed) for seed in range(10)]
    assert np.median([b.p_cyclic for b in ordered]) <= 0.05
    assert all(b.p_cyclic == sum(s for c, s in b.cycle_share.items()) for b in ordered)  # 3 players: one cycle at most


# -- independent checks -------------------------------------------------------------------------------
# OpenSpiel 2.0.2 (not a dependency of MOSAIC), run once in a throwaway venv:
#   python -m venv /tmp/osvenv && /tmp/osvenv/bin/pip install open-spiel==2.0.2 matplotlib cvxpy
#   (open_spiel.python.egt.alpharank imports matplotlib, open_spiel.python.algorithms.nash_averaging cvxpy;
#   the wheel declares neither)
#   /tmp/osvenv/bin/python os_numbers.py, where os_numbers.py builds T1, T2, T3 as above and prints, for each,
#     p, ratings = nash_averaging.nash_averaging(pyspiel.create_matrix_game(a.tolist(), (-a).tolist()))
#     np.round(p.ravel(), 6), np.round(ratings.ravel(), 6)
#     and for alpha in (0.1, 1.0, 10.0):
#       _, _, pi, _, _ = alpharank.compute([a], m=50, alpha=alpha, use_local_selection_model=False)
#       np.round(pi, 10)
# use_local_selection_model=False is alpha-Rank's population fitness, the model used here (OpenSpiel's default,
# True, takes the fitness against the current opponent only). Tolerances: Nash 1e-5 (cvxpy's solver tolerance,
# printed to 6 decimals), alpha-Rank 1e-9 (both solve a linear system; printed to 10 decimals).
OPENSPIEL_NASH = {
    "T1": ([0.5, 0.166667, 0.333333, 0.0], [0.0, 0.0, 0.0, -0.3]),
    "T2": ([0.5, 0.083333, 0.333333, 0.0, 0.083333], [0.0, 0.0, 0.0, -0.3, 0.0]),
    "T3": ([0.0, 0.172414, 0.344828, 0.482759, -0.0], [-0.062069, 0.0, 0.0, 0.0, -0.227586]),
}
OPENSPIEL_ALPHARANK = {
    ("T1", 0.1): [0.4729327587, 0.2895237474, 0.1778042481, 0.0597392458],
    ("T1", 1.0): [0.4818646635, 0.2894297286, 0.2287033015, 2.3064e-06],
    ("T1", 10.0): [0.3370947306, 0.3314990648, 0.3314062046, -0.0],
    ("T2", 0.1): [0.5151840062, 0.1720953008, 0.1006365291, 0.0399888632, 0.1720953008],
    ("T2", 1.0): [0.5440814451, 0.1634003742, 0.129116904, 9.026e-07, 0.1634003742],
    ("T2", 10.0): [0.404046487, 0.1986697216, 0.1986140698, -0.0, 0.1986697216],
    ("T3", 0.1): [0.284379241, 0.16657391, 0.2146175903, 0.2580724188, 0.0763568398],
    ("T3", 1.0): [0.3102984063, 0.1625546039, 0.2224669648, 0.2276066982, 0.0770733268],
    ("T3", 10.0): [0.3730793636, 0.1650090657, 0.247350716, 0.131664475, 0.0828963798],
}
TABLES = {"T1": T1, "T2": T2, "T3": T3}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_nash_averaging_agrees_with_openspiel(name):
    nash = pop.nash_averaging(table(TABLES[name]))
    weights, ratings = OPENSPIEL_NASH[name]
    assert list(nash.weights.values()) == pytest.approx(weights, abs=1e-5)
    assert list(nash.ratings.values()) == pytest.approx(ratings, abs=1e-5)


@pytest.mark.parametrize("name, alpha", sorted(OPENSPIEL_ALPHARANK))
def test_alpha_rank_agrees_with_openspiel(name, alpha):
    ranked = pop.alpha_rank(table(TABLES[name]), alpha=alpha, m=50)
    assert list(ranked.mass.values()) == pytest.approx(OPENSPIEL_ALPHARANK[(name, alpha)], abs=1e-9)


def maximin(a: np.ndarray) -> tuple[np.ndarray, float]:
    """An equilibrium and the game's value by the textbook linear programme: max v, A^T p >= v, p a mixture."""
    n = len(a)
    res = optimize.linprog(np.r_[np.zeros(n), -1.0], A_ub=np.c_[-a.T, np.ones(n)], b_ub=np.zeros(n),
                           A_eq=np.r_[np.ones(n), 0.0][None], b_eq=[1.0], bounds=[(0, None)] * n + [(None, None)],
                           method="highs")
    assert res.status == 0
    return res.x[:n], -res.fun


def entropy(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-np.sum(p * np.log(p)))


def test_nash_averaging_agrees_with_a_linear_programme():
    rng = np.random.default_rng(5)
    generic = [antisym([list(rng.normal(size=n - 1 - k)) for k in range(n - 1)]) for n in (4, 6, 7, 9)]
    for a in [T1, T3] + generic:  # one equilibrium each: the programme's is it
        p, value = maximin(a)
        assert value == pytest.approx(0.0, abs=1e-9)
        mine = np.array(list(pop.nash_averaging(table(a)).weights.values()))
        np.testing.assert_allclose(mine, p, atol=1e-7)
    # with a copy the equilibria are a segment: the programme finds one end, the maximum entropy its middle
    p, value = maximin(T2)
    mine = np.array(list(pop.nash_averaging(table(T2)).weights.values()))
    assert value == pytest.approx(0.0, abs=1e-9) and np.min(T2.T @ mine) > -1e-9
    assert entropy(mine) > entropy(p) + 0.05
    for t in np.linspace(0.05, 1.0, 20):  # every mixture with the programme's end is an equilibrium of less entropy
        assert entropy((1 - t) * mine + t * p) <= entropy(mine) + 1e-12
    np.testing.assert_allclose(mine, [0.5, 1 / 12, 1 / 3, 0.0, 1 / 12], atol=1e-8)


def alpha_rank_by_power_iteration(a: np.ndarray, alpha: float, m: int) -> np.ndarray:
    """alpha-Rank from its definition: the fixation probability as the sum over the mutants' count of
    products of Fermi terms, with each side's fitness in the mixed population, then pi <- pi C until it stops."""
    n = len(a)
    chain = np.zeros((n, n))
    for s in range(n):
        for r in range(n):
            if r == s:
                continue
            total, product = 1.0, 1.0
            for k in range(1, m):  # k mutants playing r among m
                f_r = ((k - 1) * a[r, r] + (m - k) * a[r, s]) / (m - 1)
                f_s = (k * a[s, r] + (m - k - 1) * a[s, s]) / (m - 1)
                product *= math.exp(-alpha * (f_r - f_s))
                total += product
            chain[s, r] = 1.0 / total / (n - 1)
        chain[s, s] = 1.0 - chain[s].sum()
    pi = np.full(n, 1.0 / n)
    for _ in range(200_000):
        step = pi @ chain
        if np.abs(step - pi).sum() < 1e-15:
            return step
        pi = step
    raise AssertionError("power iteration did not converge")


def test_alpha_rank_agrees_with_power_iteration():
    rng = np.random.default_rng(7)
    random6 = antisym([list(rng.normal(scale=0.5, size=5 - k)) for k in range(5)])
    for a in (T1, T3, random6):
        for alpha in (0.1, 1.0, 3.0):
            expected = alpha_rank_by_power_iteration(a, alpha, 20)
            mass = list(pop.alpha_rank(table(a), alpha=alpha, m=20).mass.values())
            assert mass == pytest.approx(expected.tolist(), abs=1e-10)


def test_components_and_cycles_of_a_known_graph():
    a = np.zeros((6, 6))
    for i, j in ((0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)):
        a[i, j] = 1.0
    a[:3, 3:] = 0.5
    found = pop.cycles(table(a - a.T))
    assert found.components == (("a", "b", "c"), ("d", "e", "f"))
    assert found.cycles == (("a", "b", "c"), ("d", "e", "f")) and not found.transitive and not found.truncated
    ties = pop.cycles(table(antisym([[1.0, 0.0], [1.0]])))  # a beats b beats c, a and c even
    assert ties.transitive and ties.ties == (("a", "c"),) and ties.beats == (("a", "b"), ("b", "c"))
    assert ties.components == (("a",), ("b",), ("c",))
    regular = np.zeros((5, 5))  # each beats the next two
    for i in range(5):
        regular[i, (i + 1) % 5] = regular[i, (i + 2) % 5] = 1.0
    capped = pop.cycles(table(regular - regular.T), max_cycles=3)
    assert capped.truncated and len(capped.cycles) == 3


def rotated(cycle: list) -> tuple:
    k = cycle.index(min(cycle))
    return tuple(cycle[k:] + cycle[:k])


def test_components_and_cycles_agree_with_networkx():
    nx = pytest.importorskip("networkx")
    rng = np.random.default_rng(11)
    for _ in range(20):
        n = int(rng.integers(3, 8))
        sign = np.triu(rng.choice([-1.0, 0.0, 1.0], size=(n, n), p=[0.45, 0.1, 0.45]), 1)
        meta = table(sign - sign.T)
        graph = nx.DiGraph()
        graph.add_nodes_from(meta.players)
        graph.add_edges_from(pop.cycles(meta).beats)
        found = pop.cycles(meta, max_cycles=10_000)
        assert {frozenset(c) for c in found.components} == \
            {frozenset(c) for c in nx.strongly_connected_components(graph)}
        assert set(found.cycles) == {rotated(c) for c in nx.simple_cycles(graph)}
        assert len(found.cycles) == len(set(found.cycles)) and not found.truncated
        assert found.transitive == nx.is_directed_acyclic_graph(graph)


# -- the bootstrap and the rest -----------------------------------------------------------------------
def test_bootstrap_summaries_are_consistent_and_seeded():
    games = tournament(LADDER, seed=0)
    boot = pop.population_bootstrap(games, reps=200, seed=4)
    assert boot.reps == 200 and boot.nash == pop.nash_averaging(boot.meta)
    assert boot.alpha_rank == pop.alpha_rank(boot.meta) and boot.cycles == pop.cycles(boot.meta)
    for measure in (boot.weights, boot.ratings, boot.mass):
        for player, interval in measure.items():
            assert interval.low <= interval.high and interval.n_runs == 160 and interval.n_tasks == 4
    assert boot.weights["e"].point == 1.0 and boot.p_support["e"] > 0.95 and boot.p_support["a"] == 0.0
    assert boot.mass["e"].low > 0.9 and boot.ratings["a"].high < 0
    again = pop.population_bootstrap(games, reps=200, seed=4)
    assert again.weights == boot.weights and again.mass == boot.mass and again.cycle_share == boot.cycle_share
    assert pop.population_bootstrap(games, reps=200, seed=5).ratings != boot.ratings


def test_the_bootstrap_says_when_the_data_cannot_tell():
    games = fixed("a", "b", 2, 3) + fixed("b", "c", 2, 3) + fixed("c", "a", 2, 3)
    boot = pop.population_bootstrap(games, reps=200, seed=0)
    assert len(boot.meta.thin) == 3 and any("fewer than 5 games" in n for n in boot.notes)
    assert 0.05 < boot.cycle_share[("a", "b", "c")] < 0.95
    assert any("cannot tell whether they belong to the equilibrium" in n for n in boot.notes)


def test_the_alpha_sweep_of_a_cycle_never_changes_its_ranking():
    sweep = pop.alpha_sweep(pop.meta_game(RPS))
    assert sweep.settled == pop.SWEEP_ALPHAS[0] and np.all(sweep.ranks == 1)
    with pytest.raises(ValueError, match="increasing"):
        pop.alpha_sweep(pop.meta_game(RPS), alphas=[1.0, 0.5])


@pytest.mark.parametrize("call, match", [
    (lambda: pop.meta_game(RPS, payoff="elo"), "payoff: one of logit, win_rate"),
    (lambda: pop.alpha_rank(pop.meta_game(RPS), alpha=-1.0), "alpha: a number >= 0"),
    (lambda: pop.alpha_rank(pop.meta_game(RPS), m=1), "m: the population size"),
    (lambda: pop.cycles(pop.meta_game(RPS), max_cycles=0), "max_cycles"),
    (lambda: pop.population_bootstrap(RPS, reps=0), "reps"),
    (lambda: pop.meta_game(RPS, min_games=0), "min_games"),
    (lambda: MetaGame.of(["a", "b"], [[0.0, 1.0], [1.0, 0.0]]), "antisymmetric"),
])
def test_bad_input_is_a_clear_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
