"""Adaptive scheduling (mosaic.arena.schedule): the policy's pure functions against independent computations,
simulated populations (vectorised: hundreds of tournaments at once) for the games it saves and its intervals'
coverage, the spec's bad input, and a connect four tournament of graded scripted players through the real
`mosaic arena run` and `mosaic arena report`."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import optimize

from cli_support import run_cli
from mosaic.arena import schedule
from mosaic.arena.tournament import parse_spec
from mosaic.errors import UserError

pytestmark = pytest.mark.xdist_group("arena")

#: one clear pairing (the last player far ahead) and several close ones (the others 40 Elo apart)
CLOSE_AND_CLEAR = (0.0, 40.0, 80.0, 120.0, 600.0)
WIDTH = 250.0


def test_the_fit_is_the_penalised_maximum_likelihood():
    """Newton's fit against scipy's minimiser of the same likelihood (one virtual draw per player against a
    rating of 0), on a table with a whitewash."""
    points = np.array([[0, 3, 5], [1, 0, 2.5], [0, 1.5, 0]], float)
    played = np.array([[0, 4, 5], [4, 0, 4], [5, 4, 0]], float)

    def nll(r):
        d = r[:, None] - r[None, :]
        like = np.sum(points * -np.logaddexp(0, -d))
        prior = np.sum(0.5 * -np.logaddexp(0, -r) + 0.5 * -np.logaddexp(0, r))
        return -(like + prior)

    expected = optimize.minimize(nll, np.zeros(3), method="BFGS", options={"gtol": 1e-10}).x
    assert schedule.fit(points, played) == pytest.approx(expected - expected.mean(), abs=1e-6)


def test_interval_widths_are_the_inverse_information_and_shrink_as_one_over_root_games():
    r = np.array([-0.5, 0.0, 0.7])
    played = np.ones((3, 3)) - np.eye(3)
    narrow = schedule.widths(schedule.information(r, 400 * played))
    wide = schedule.widths(schedule.information(r, 100 * played))
    assert narrow == pytest.approx(wide / 2, rel=0.01)  # the virtual draws weigh little at 100 games a pairing
    # the width from the covariance of the centred ratings, by a numerical second derivative of the likelihood
    h = schedule.information(r, 10 * played)
    eps, n = 1e-4, 3
    numeric = np.zeros((n, n))

    def grad(x):
        p = 1 / (1 + np.exp(-(x[:, None] - x[None, :])))
        return -(np.sum(10 * played * (0.5 - p), axis=1) + (0.5 - 1 / (1 + np.exp(-x))))

    for k in range(n):
        step = np.zeros(n)
        step[k] = eps
        numeric[:, k] = (grad(r + step) - grad(r - step)) / (2 * eps)
    assert numeric == pytest.approx(h, abs=1e-6)


def test_the_choice_is_the_pairing_that_narrows_the_widest_interval_most():
    """Sherman-Morrison's shortcut against the widths recomputed with each candidate's games added; a close
    pairing is chosen, never the foregone one."""
    r = np.array(CLOSE_AND_CLEAR) / schedule.ELO
    r -= r.mean()
    n = len(r)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    played = np.zeros((n, n))
    for i, j in pairs:
        played[i, j] = played[j, i] = 4
    played[0, 1] = played[1, 0] = 12  # one close pairing already well played
    brute = []
    for i, j in pairs:
        more = played.copy()
        more[i, j] += 2
        more[j, i] += 2
        brute.append(schedule.widths(schedule.information(r, more)).max())
    (best,) = schedule.choose(r, played, pairs, 2)
    assert best == int(np.argmin(brute))
    # the clear player's interval is the widest: its closest opponent's games narrow it most, not the
    # foregone pairing (600 Elo apart) nor the well-played close one
    assert pairs[best] == (3, 4) and brute[pairs.index((0, 4))] > brute[best]
    batched = schedule.choose(np.stack([r, r]), np.stack([played, played]), pairs, 2, picks=3)
    assert batched.shape == (2, 3) and batched[0, 0] == best and (batched[0] == batched[1]).all()


def test_decide_stops_at_the_width_or_the_budget_and_leaves_out_the_unbeaten():
    pairs = [("a", "b"), ("a", "c"), ("b", "c")]
    games = [(a, b, float(k % 2)) for a, b in pairs for k in range(4)]  # every pairing even: 2-2
    go = schedule.decide("abc", pairs, games, width=300, budget=100, step=2, picks=2)
    assert go.done == "" and len(go.pairings) == 2 and go.played == 12 and go.unbounded == ()
    assert go.uniform > go.played and go.saved == go.uniform - go.played
    assert schedule.decide("abc", pairs, games, width=300, budget=13, step=2).done == "budget"
    assert schedule.decide("abc", pairs, games, width=2000, budget=13, step=2).done == "width"
    room = schedule.decide("abc", pairs, games, width=300, budget=16, step=2, picks=5)
    assert len(room.pairings) == 2  # two steps of 2 fit in the budget's 4 games left
    unbeaten = games + [("d", x, 1.0) for x in "abc" for _ in range(4)]
    pairs_d = pairs + [("a", "d"), ("b", "d"), ("c", "d")]
    d = schedule.decide("abcd", pairs_d, unbeaten, width=300, budget=100, step=2)
    assert d.unbounded == ("d",) and d.widths["d"] > max(d.widths[p] for p in "abc")


def test_on_a_simulated_population_it_reaches_the_width_with_fewer_games_than_the_round_robin():
    """400 round robins of one clear and several close pairings (4 games a pairing first), played until every
    rating's 95% interval is under 250 Elo: adaptively (2 games at a time to the chosen pairing) and as the
    full round robin grown 2 games a pairing at a time."""
    adaptive = schedule.simulate(CLOSE_AND_CLEAR, 4, WIDTH, 5000, 2, sims=400, seed=1)
    full = schedule.simulate(CLOSE_AND_CLEAR, 4, WIDTH, 5000, 2, sims=400, seed=1, adaptive=False)
    assert adaptive.reached.all() and full.reached.all()
    assert (adaptive.widths.max(axis=1) < WIDTH).all()
    # measured: 153 games on average against 278 (45% fewer); fewer in 90% of the tournaments (the round robin
    # grows 20 games at a time, so a lucky one stops early)
    assert adaptive.games.mean() < 0.7 * full.games.mean()
    assert np.mean(adaptive.games < full.games) > 0.8


def test_the_intervals_cover_at_the_nominal_level_under_the_adaptive_schedule():
    """500 adaptive tournaments (as above); each player's 95% Wald interval around its fitted rating (centred)
    against its true rating (centred): measured coverage 0.95, Monte Carlo standard error about 0.005 (from
    the spread of the per-tournament coverage over the 500 tournaments of 5 players): within 3 points of 95%."""
    sims = 500
    result = schedule.simulate(CLOSE_AND_CLEAR, 4, WIDTH, 5000, 2, sims=sims, seed=7)
    true = np.array(CLOSE_AND_CLEAR) - np.mean(CLOSE_AND_CLEAR)
    covered = np.abs(result.ratings - true) <= result.widths / 2
    per_tournament = covered.mean(axis=1)
    coverage = per_tournament.mean()
    mc_error = per_tournament.std(ddof=1) / math.sqrt(sims)
    assert mc_error < 0.01
    assert abs(coverage - 0.95) <= 0.03, (coverage, mc_error)


@pytest.mark.parametrize("adaptive, field", [
    ({"width": 0, "budget": 100}, "adaptive.width: 0"), ({"width": -50, "budget": 100}, "adaptive.width: -50"),
    ({"width": 200, "budget": 20}, "adaptive.budget: 20 is below one round (3 pairings x 10 games_per_pairing = 30)"),
    ({"width": 200, "budget": 100, "step": 3}, "adaptive.step: 3"), ({"budget": 100}, "adaptive.width"),
    ({"width": 200, "budget": 100, "steps": 2}, "adaptive.steps: unknown field"),
])
def test_bad_adaptive_settings_are_refused_naming_the_field(adaptive, field):
    with pytest.raises(UserError) as err:
        parse_spec({"name": "t", "environment": {"family": "classic", "env_id": "connect_four_v3"},
                    "players": {"a": "random", "b": "random", "c": "random"}, "adaptive": adaptive})
    assert str(err.value).startswith(field), str(err.value)


GRADED = {"random": "random", "random_too": "random", "lowest": "scripted:mosaic.arena.heuristics:first_legal",
          "heuristic": "scripted:mosaic.arena.heuristics:connect_four"}


def test_a_connect_four_tournament_of_graded_scripted_players_stops_at_the_width(tmp_path):
    """Two random players, the lowest legal move and the connect-four heuristic (which wins every game: its
    interval does not count), 4 games a pairing first, then 2 at a time to the chosen pairing, until every
    counted interval is under 350 Elo; the report says how many games a round robin at that width needs."""
    spec = tmp_path / "adaptive.json"
    spec.write_text(json.dumps({"name": "ad", "environment": {"family": "classic", "env_id": "connect_four_v3"},
                                "players": GRADED, "games_per_pairing": 4, "opening_moves": 2, "seed": 1,
                                "report": {"reps": 200}, "adaptive": {"width": 350, "budget": 200}}))
    home = tmp_path / "home"
    played = run_cli("arena", "run", str(spec), home=home, timeout=600)
    assert played.returncode == 0, played.stderr[-2000:]
    folder = home / "arena" / "ad"
    games = [json.loads(x) for x in (folder / "games.jsonl").read_text().splitlines()]
    decisions = [json.loads(x) for x in (folder / "adaptive.jsonl").read_text().splitlines()]
    assert 24 < len(games) < 200 and len(games) == 24 + 2 * len(decisions)
    per_pairing = {}
    for g in games:
        per_pairing[g["pairing"]] = per_pairing.get(g["pairing"], 0) + 1
    for d in decisions:
        assert d["games"] == 2 and len(d["pairings"]) == 1
    assert f"adaptive schedule: stopped after {len(games)} games (every interval narrower than the width" in \
        played.stderr
    for pairing, count in per_pairing.items():  # the seats alternate in every pairing's games
        firsts = [g["first"] for g in games if g["pairing"] == pairing]
        assert count % 2 == 0 and abs(firsts.count(pairing.split("~")[0]) - count / 2) == 0
    again = run_cli("arena", "run", str(spec), home=home, timeout=600)  # resumed: nothing more to play
    assert again.returncode == 0 and "played 0 game(s)" in again.stderr
    report = run_cli("arena", "report", "ad", home=home, timeout=600)
    assert report.returncode == 0, report.stderr[-2000:]
    adaptive = json.loads((folder / "report" / "ratings.json").read_text())["adaptive"]
    assert adaptive["played"] == len(games) and adaptive["stopped"] == "width"
    assert adaptive["games_per_pairing"] == per_pairing
    assert adaptive["unbounded"] == ["heuristic"]
    assert max(w for p, w in adaptive["widths_elo"].items() if p != "heuristic") < 350
    assert adaptive["saved"] == adaptive["round_robin_games"] - len(games)
    text = (folder / "report" / "report.md").read_text()
    assert f"- Stopped after {len(games)} games: every interval narrower than the width" in text
    assert f"needs {adaptive['round_robin_games']} games" in text and f"saved {adaptive['saved']} games" in text


def test_bad_adaptive_settings_exit_2_with_one_line_before_anything_is_written(tmp_path):
    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps({"name": "bad", "environment": {"family": "classic", "env_id": "connect_four_v3"},
                                "players": GRADED, "games_per_pairing": 4, "adaptive": {"width": 0, "budget": 100}}))
    refused = run_cli("arena", "run", str(spec), home=tmp_path / "home", timeout=300)
    assert refused.returncode == 2
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("mosaic: error: adaptive.width: 0; allowed: a number > 0 (Elo)"), line
    assert not (tmp_path / "home" / "arena").exists()


def test_with_parallel_shards_each_decision_gives_games_to_as_many_pairings(tmp_path):
    """--parallel 2: each step's games are shard runs on the daemon (started for the home), two pairings a
    decision; it stops at the width as in-process play does, every game journaled from a shard run."""
    from mosaic.testing.daemon import stop_home_daemon

    spec = tmp_path / "adaptive.json"
    spec.write_text(json.dumps({"name": "par", "environment": {"family": "classic", "env_id": "connect_four_v3"},
                                "players": GRADED, "games_per_pairing": 4, "opening_moves": 2, "seed": 1,
                                "adaptive": {"width": 350, "budget": 200}}))
    home = tmp_path / "home"
    try:
        played = run_cli("arena", "run", str(spec), "--parallel", "2", home=home, timeout=600)
    finally:
        stop_home_daemon(home)
    assert played.returncode == 0, played.stderr[-2000:]
    folder = home / "arena" / "par"
    games = [json.loads(x) for x in (folder / "games.jsonl").read_text().splitlines()]
    decisions = [json.loads(x) for x in (folder / "adaptive.jsonl").read_text().splitlines()]
    assert decisions and all(len(d["pairings"]) == 2 and d["games"] == 2 for d in decisions)
    assert len(games) == 24 + 4 * len(decisions) and all(g.get("run_id") for g in games)
    assert f"adaptive schedule: stopped after {len(games)} games (every interval narrower than the width" in \
        played.stderr


def test_the_adaptive_example_spec_reads():
    from cli_support import EXAMPLES
    from mosaic.arena.tournament import read_specs

    (spec,) = read_specs(EXAMPLES / "arena" / "connect_four_adaptive.yaml")
    assert spec.adaptive == {"width": 350.0, "budget": 200, "step": 2}
    assert len(list(spec.schedule())) == 6 * 4  # the first round; the rest is decided as it goes
