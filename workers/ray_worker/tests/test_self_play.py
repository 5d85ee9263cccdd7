"""SELF_PLAY is real: main trains against frozen snapshots of itself that never change."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ray_support import train
from ray_worker.self_play import ALL_SEATS, MAIN, League, outcome

GAME = {"policy_configuration": "SELF_PLAY",
        "environment": {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"},
        "total_timesteps": 1800, "algo_params": {
            "train_batch_size_per_learner": 300, "minibatch_size": 100, "num_epochs": 2,
            "fcnet_hiddens": [32], "lr": 0.001},
        # A low bar so the mechanism shows within a tiny budget; the default is 0.95.
        "self_play": {"snapshot_win_rate": 0.3, "window_episodes": 20, "min_iterations_between_snapshots": 1,
                      "max_pool_size": 2}}


class Cfg:
    window_episodes = 4
    snapshot_win_rate = 0.75
    min_iterations_between_snapshots = 2
    max_pool_size = 2
    eviction = "oldest"
    opponent_sampling = "uniform"
    latest_probability = 0.5
    baselines: list = []
    main_exploiters = 0
    exploiter_episode_share = 0.3
    exploiter_win_rate = 0.7
    exploiter_patience_iterations = 0


def cfg(**changes) -> Cfg:
    c = Cfg()
    for key, value in changes.items():
        setattr(c, key, value)
    return c


class Episode:
    def __init__(self, id_: str) -> None:
        self.id_ = id_


SEATS = {ALL_SEATS: ("p0", "p1")}
TEAMS = {"adversary": ("adversary_0", "adversary_1"), "agent": ("agent_0",)}


def test_mapping_is_consistent_within_an_episode_and_varies_across():
    league = League(cfg(max_pool_size=5), SEATS, seed=0)
    league.snapshots[ALL_SEATS].append("main_v1")
    mapping = league.mapping()
    seats, opponents = set(), set()
    for i in range(60):
        ep = Episode(f"ep{i}")
        a, b = mapping("p0", ep), mapping("p1", ep)
        assert sorted([a, b]).count(MAIN) == 1  # exactly one seat is main
        seats.add("p0" if a == MAIN else "p1")
        opponents.add(b if a == MAIN else a)
    assert seats == {"p0", "p1"} and opponents == {"main_v0", "main_v1"}


def test_latest_sampling_prefers_the_newest_snapshot():
    league = League(cfg(opponent_sampling="latest", latest_probability=0.8, max_pool_size=5), SEATS, seed=0)
    league.snapshots[ALL_SEATS] = ["main_v0", "main_v1", "main_v2"]
    assert league.sampling_weights(ALL_SEATS) == pytest.approx([0.1, 0.1, 0.8])


def test_snapshot_rule_window_threshold_guard_and_eviction():
    league = League(cfg(), SEATS, seed=0)
    win = {"returns": {"p0": 1.0, "p1": -1.0}, "modules": {"p0": MAIN, "p1": "main_v0"}}
    loss = {"returns": {"p0": -1.0, "p1": 1.0}, "modules": {"p0": MAIN, "p1": "main_v0"}}
    assert outcome(win["returns"], win["modules"], MAIN) == ("main_v0", "win")
    summary = league.record([win, win, win, loss])
    assert summary["win_rate"] == 0.75 and summary["loss_rate"] == 0.25
    assert not league.should_snapshot(iteration=1)  # guard: too soon after iteration 0
    assert league.should_snapshot(iteration=2)
    assert league.admit(2) == ("main_v1", None)
    league.record([win] * 4)
    assert not league.should_snapshot(iteration=3)  # guard again
    assert league.admit(4) == ("main_v2", "main_v0")  # pool of 2: the oldest leaves
    assert league.pool == ["main_v1", "main_v2"]


def test_each_version_is_rated_against_the_pool_over_training():
    """A learner's games count for the snapshot it trains towards; the ratings (main_v0 = 1000) are the
    Bradley-Terry fit of exactly those games, and survive a checkpoint."""
    from mosaic.scoring.ratings import Game, fit_bradley_terry

    league = League(cfg(baselines=["random"]), SEATS, seed=0)

    def game(opponent: str, result: str) -> dict:
        mine, theirs = {"win": (1.0, -1.0), "loss": (-1.0, 1.0), "draw": (0.0, 0.0)}[result]
        return {"returns": {"p0": mine, "p1": theirs}, "modules": {"p0": MAIN, "p1": opponent}}

    league.record([game("main_v0", r) for r in ("win", "win", "loss", "draw")] +
                  [game("random", r) for r in ("win", "win", "win", "loss")])
    assert league.admit(2) == ("main_v1", None)
    summary = league.record([game("main_v1", r) for r in ("win", "win", "win", "loss")] +
                            [game("main_v0", r) for r in ("win", "win", "win", "draw")])
    ratings = summary["ratings"]
    assert ratings["anchor"] == "main_v0" and ratings["elo"]["main_v0"] == 1000.0
    assert ratings["training"] == {MAIN: "main_v2"} and ratings["games"] == 16
    scores = {"win": 1.0, "draw": 0.5, "loss": 0.0}
    games = ([Game("main_v1", "main_v0", scores[r], None) for r in ("win", "win", "loss", "draw")] +
             [Game("main_v1", "random", scores[r], None) for r in ("win", "win", "win", "loss")] +
             [Game("main_v2", "main_v1", scores[r], None) for r in ("win", "win", "win", "loss")] +
             [Game("main_v2", "main_v0", scores[r], None) for r in ("win", "win", "win", "draw")])
    fit = fit_bradley_terry(games, first_move_advantage=False, anchor="main_v0")
    assert ratings["elo"] == pytest.approx({k: round(v, 1) for k, v in fit.ratings.items()}, abs=0.051)
    assert ratings["elo"]["main_v2"] > ratings["elo"]["main_v1"] > ratings["elo"]["main_v0"]  # skill rises
    for version in ratings["elo"]:
        assert ratings["low"][version] <= ratings["elo"][version] <= ratings["high"][version]
    again = League(cfg(baselines=["random"]), SEATS, seed=0)
    again.load(league.state())
    assert again.ratings() == league.ratings()


def test_baselines_stay_in_the_pool_and_are_never_evicted():
    league = League(cfg(baselines=["random"], max_pool_size=1), SEATS, seed=0)
    assert league.pool == ["random", "main_v0"]
    assert league.admit(5) == ("main_v1", "main_v0")
    assert league.pool == ["random", "main_v1"]
    drawn = {league.mapping().draw(f"e{i}")["p1"] for i in range(80)} - {MAIN}
    assert drawn == {"random", "main_v1"}


def test_team_wise_sides_each_have_a_main_and_face_the_other_sides_pool():
    league = League(cfg(max_pool_size=3), TEAMS, seed=1)
    assert [l.module_id for l in league.learners] == ["main_adversary", "main_agent"]
    assert league.pool == ["main_adversary_v0", "main_agent_v0"]
    mapping = league.mapping()
    focus = set()
    for i in range(60):
        drawn = mapping.draw(f"e{i}")
        adv = {drawn["adversary_0"], drawn["adversary_1"]}
        assert len(adv) == 1  # a side is played by one module
        if drawn["adversary_0"] == "main_adversary":
            assert drawn["agent_0"] == "main_agent_v0"
            focus.add("adversary")
        else:
            assert drawn["adversary_0"] == "main_adversary_v0" and drawn["agent_0"] == "main_agent"
            focus.add("agent")
    assert focus == {"adversary", "agent"}
    # The adversaries' main scores its games against the frozen good agent, and only those.
    game = {"returns": {"adversary_0": 10.0, "adversary_1": 10.0, "agent_0": -10.0},
            "modules": {"adversary_0": "main_adversary", "adversary_1": "main_adversary",
                        "agent_0": "main_agent_v0"}}
    summary = league.record([game] * 4)
    assert summary["learners"]["main_adversary"]["win_rate"] == 1.0
    assert summary["learners"]["main_agent"]["games"] == 0
    assert [l.module_id for l in league.due(iteration=2)] == ["main_adversary"]
    assert league.admit(2, "main_adversary") == ("main_adversary_v1", None)
    assert league.pool_of("adversary") == ["main_adversary_v0", "main_adversary_v1"]
    assert league.pool_of("agent") == ["main_agent_v0"]


def test_win_returns_score_general_sum_sides_on_their_own_scale():
    league = League(cfg(win_returns={"agent": -5.0}), TEAMS, seed=0)
    caught = {"returns": {"adversary_0": 10.0, "adversary_1": 10.0, "agent_0": -10.0},
              "modules": {"adversary_0": "main_adversary_v0", "adversary_1": "main_adversary_v0",
                          "agent_0": "main_agent"}}
    escaped = {**caught, "returns": {"adversary_0": 0.0, "adversary_1": 0.0, "agent_0": -1.0}}
    summary = league.record([caught, escaped, escaped])
    assert summary["learners"]["main_agent"]["win_rate"] == pytest.approx(2 / 3)
    assert summary["learners"]["main_agent"]["draw_rate"] == 0.0


def test_exploiters_play_the_current_main_and_freeze_when_they_beat_it():
    league = League(cfg(main_exploiters=1, exploiter_episode_share=0.5), SEATS, seed=2)
    assert league.trainable == [MAIN, "exploiter_0"]
    mapping = league.mapping()
    pairs = set()
    for i in range(100):
        drawn = mapping.draw(f"e{i}")
        pairs.add(frozenset(drawn.values()))
    assert pairs == {frozenset({MAIN, "main_v0"}), frozenset({MAIN, "exploiter_0"})}
    beats_main = {"returns": {"p0": 1.0, "p1": -1.0}, "modules": {"p0": "exploiter_0", "p1": MAIN}}
    summary = league.record([beats_main] * 4)
    assert summary["learners"]["exploiter_0"]["win_rate"] == 1.0
    assert summary["learners"][MAIN]["games"] == 0  # games against an exploiter are not pool games
    assert summary["learners"][MAIN]["win_rate_vs"] == {"exploiter_0": 0.0}
    assert [l.module_id for l in league.due(iteration=3)] == ["exploiter_0"]
    assert league.admit(3, "exploiter_0") == ("exploiter_0_v1", None)
    assert "exploiter_0_v1" in league.pool  # main must now learn to beat it


def test_exploiters_without_success_restart_after_their_patience():
    league = League(cfg(main_exploiters=2, exploiter_patience_iterations=5), SEATS, seed=0)
    assert league.stale(4) == []
    league.last_event_iteration["exploiter_1"] = 3  # exploiter_1 froze a snapshot at iteration 3
    assert [l.module_id for l in league.stale(5)] == ["exploiter_0"]
    assert league.stale(6) == []  # the restart counts as a fresh start
    assert [l.module_id for l in league.stale(8)] == ["exploiter_1"]
    assert League(cfg(main_exploiters=1), SEATS, seed=0).stale(100) == []  # 0 = never


def test_league_state_round_trips():
    league = League(cfg(main_exploiters=1, baselines=["random"]), TEAMS, seed=0)
    league.admit(3, "main_agent")
    league.record([{"returns": {"adversary_0": 1.0, "adversary_1": 1.0, "agent_0": 0.0},
                    "modules": {"adversary_0": "main_adversary", "adversary_1": "main_adversary",
                                "agent_0": "main_agent_v1"}}])
    again = League(cfg(main_exploiters=1, baselines=["random"]), TEAMS, seed=0)
    again.load(league.state())
    assert again.pool == league.pool and again.state() == league.state()
    with pytest.raises(ValueError, match="sides"):
        League(cfg(), SEATS, seed=0).load(league.state())


def _weights(algo, module_id):
    from ray_worker.self_play import snapshot_weights

    return {k: v.copy() if isinstance(v, np.ndarray) else torch.as_tensor(v).clone()
            for k, v in snapshot_weights(algo, module_id).items()}


def test_self_play_adds_frozen_snapshots_that_never_change(ray_session, tmp_path, monkeypatch):
    seen = _spy_weights(monkeypatch)
    run = train(tmp_path, {**GAME, "rllib": {"num_env_runners": 0}}, tiny=False)
    metrics = run.of_type("metrics")
    added = [m["self_play"]["snapshot_added"] for m in metrics if m["self_play"].get("snapshot_added")]
    assert added, [m["self_play"] for m in metrics]
    assert all(m["self_play"]["games"] > 0 for m in metrics)
    assert {"win_rate", "draw_rate", "loss_rate", "pool", "pool_size"} <= set(metrics[-1]["self_play"])
    assert metrics[-1]["self_play"]["pool_size"] <= 2
    ratings = metrics[-1]["self_play"]["ratings"]  # every version that played, rated each iteration
    assert ratings["anchor"] == "main_v0" and ratings["elo"]["main_v0"] == 1000.0
    assert set(added) <= set(ratings["elo"]) and ratings["training"][MAIN] in ratings["elo"]
    assert ratings["games"] == sum(m["self_play"]["games"] for m in metrics)
    assert any(e.get("self_play_event") == "snapshot_added" for e in run.of_type("log"))
    assert sum(e["illegal_actions"] for e in run.of_type("episode")) == 0
    # Every frozen snapshot keeps exactly its weights while main keeps changing.
    _assert_learners_train_and_frozen_stay(seen, {MAIN})
    assert run.of_type("checkpoint_saved")


def test_snapshots_survive_checkpoint_and_resume(ray_session, tmp_path, monkeypatch):
    from ray_worker import runtime as runtime_module

    captured: list[dict] = []
    original = runtime_module.RayWorkerRuntime._self_play_step

    def spy(self, algo, league, records, iteration):
        before = {m: _weights(algo, m) for m in league.pool}
        summary = original(self, algo, league, records, iteration)
        after = {m: _weights(algo, m) for m in league.pool}
        captured.append({"before": before, "after": after})
        return summary

    monkeypatch.setattr(runtime_module.RayWorkerRuntime, "_self_play_step", spy)
    game = {**GAME, "rllib": {"num_env_runners": 0}, "total_timesteps": 900}
    first = train(tmp_path / "a", game, tiny=False)
    saved = captured[-1]["after"]  # the pool the final checkpoint holds
    assert first.of_type("metrics")[-1]["self_play"]["pool"] == list(saved)
    captured.clear()
    resumed = train(tmp_path / "b", {**game, "checkpoint": {"restore_from": first.of_type("checkpoint_saved")[-1]["path"]},
                                     "total_timesteps": 1200}, tiny=False)
    restored = captured[0]["before"]
    assert list(restored) == list(saved)
    assert all(_equal(restored[m], saved[m]) for m in saved), "snapshot weights changed across resume"
    assert resumed.of_type("metrics")[0]["iteration"] == first.of_type("metrics")[-1]["iteration"] + 1


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def _layout(env_id: str, **self_play):
    from ray_worker.config import RayWorkerConfig
    from ray_worker.policies import prepare

    config = RayWorkerConfig.from_dict({"run_id": "x", "policy_configuration": "SELF_PLAY",
                                        "environment": {"family": "mpe", "env_id": env_id},
                                        "self_play": self_play})
    return prepare(config)[2]


def test_agent_types_become_sides_of_team_wise_self_play():
    layout = _layout("simple_tag_v3", baselines=["random"], main_exploiters=1)
    assert layout.sides == {"adversary": ("adversary_0", "adversary_1", "adversary_2"), "agent": ("agent_0",)}
    assert layout.agent_to_module == {"adversary_0": "main_adversary", "adversary_1": "main_adversary",
                                      "adversary_2": "main_adversary", "agent_0": "main_agent"}
    assert layout.trainable == ("main_adversary", "exploiter_adversary_0", "main_agent", "exploiter_agent_0")
    assert set(layout.modules) == {*layout.trainable, "main_adversary_v0", "main_agent_v0",
                                   "random_adversary", "random_agent"}
    assert layout.baselines == ("random_adversary", "random_agent")


@pytest.mark.parametrize("self_play, field, message", [
    ({"teams": {"a": ["adversary_0", "agent_0"], "b": ["agent_1"]}}, "self_play.teams.a", "share"),
    ({"teams": {"a": ["adversary_0"], "b": ["agent_0"]}}, "self_play.teams", "missing"),
    ({"teams": {"a": ["adversary_0", "agent_0", "agent_1"]}}, "self_play.teams", "two or more"),
    ({"teams": {"a": ["nobody"], "b": ["adversary_0", "agent_0", "agent_1"]}}, "self_play.teams", "unknown"),
    ({"baselines": ["minimax"]}, "self_play.baselines", "random"),
    ({"win_returns": {"good": 0.0}}, "self_play.win_returns", "adversary, agent"),
])
def test_bad_self_play_settings_name_the_field(self_play, field, message):
    from mosaic.errors import ConfigError

    with pytest.raises(ConfigError, match=message) as info:
        _layout("simple_adversary_v3", **self_play)
    assert info.value.field == field


def _spy_weights(monkeypatch) -> dict[str, list]:
    """Record every learner's and frozen module's weights after each self-play step."""
    from ray_worker import runtime as runtime_module

    seen: dict[str, list] = {}
    original = runtime_module.RayWorkerRuntime._self_play_step

    def spy(self, algo, league, records, iteration):
        summary = original(self, algo, league, records, iteration)
        for module_id in [*league.trainable, *league.pool]:
            if not module_id.startswith("random"):
                seen.setdefault(module_id, []).append(_weights(algo, module_id))
        for exploiter in summary.get("exploiters_reset", []):  # restarted from main's weights
            seen.setdefault("resets", []).append(
                _equal(_weights(algo, exploiter), _weights(algo, league.main_of(league.learner(exploiter).side))))
        return summary

    monkeypatch.setattr(runtime_module.RayWorkerRuntime, "_self_play_step", spy)
    return seen


def _assert_learners_train_and_frozen_stay(seen: dict[str, list], learners: set[str]) -> None:
    for module_id, history in seen.items():
        if module_id in learners:
            assert any(not _equal(a, b) for a, b in zip(history, history[1:])), f"{module_id} never trained"
        else:
            assert all(_equal(history[0], h) for h in history[1:]), f"{module_id} changed"


def test_league_with_an_exploiter_and_a_random_baseline(ray_session, tmp_path, monkeypatch):
    seen = _spy_weights(monkeypatch)
    league = {**GAME, "rllib": {"num_env_runners": 0}, "total_timesteps": 1200,
              "self_play": {**GAME["self_play"], "baselines": ["random"], "main_exploiters": 1,
                            "exploiter_episode_share": 0.4, "exploiter_win_rate": 0.3}}
    run = train(tmp_path, league, tiny=False)
    episodes = run.of_type("episode")
    pairs = {frozenset(e["modules"].values()) for e in episodes}
    assert frozenset({MAIN, "exploiter_0"}) in pairs  # the exploiter plays the current main
    assert frozenset({MAIN, "random"}) in pairs  # the baseline is in the pool
    assert not any("exploiter_0" in p and MAIN not in p for p in pairs)
    assert sum(e["illegal_actions"] for e in episodes) == 0  # the random baseline respects the mask
    last = run.of_type("metrics")[-1]["self_play"]
    assert last["learners"]["exploiter_0"]["games"] + last["learners"][MAIN]["games"] > 0
    assert "random" in last["pool"]
    resets = seen.pop("resets", [])
    _assert_learners_train_and_frozen_stay(seen, {MAIN, "exploiter_0"})
    events = [e for e in run.of_type("log") if e.get("self_play_event") == "snapshot_added"]
    frozen_exploiters = [e for e in events if e["source"] == "exploiter_0"]
    assert frozen_exploiters and all(e["exploiter_reset"] for e in frozen_exploiters)
    assert all(e["module_id"].startswith("exploiter_0_v") for e in frozen_exploiters)
    assert resets and all(resets)
    # The checkpoint evaluates main; the random baseline is not a policy to load.
    from mosaic.errors import UserError
    from ray_worker.policy_actor import RayPolicyConfig, create_ray_actor

    checkpoint = run.of_type("checkpoint_saved")[-1]["path"]
    assert create_ray_actor(RayPolicyConfig(checkpoint)).module_id == MAIN
    with pytest.raises(UserError, match="'random' is not in"):
        create_ray_actor(RayPolicyConfig(checkpoint, module_id="random"))


def test_the_same_seed_draws_the_same_league_games(ray_session, tmp_path):
    """Who plays whom is drawn per episode from the seed and the episode's number in its env runner; it was
    keyed by RLlib's random episode ids, so each run of a league played another schedule (and a test that needs
    the exploiter to beat main by a budget passed or failed by chance)."""
    league = {**GAME, "rllib": {"num_env_runners": 0}, "total_timesteps": 600,
              "self_play": {**GAME["self_play"], "baselines": ["random"], "main_exploiters": 1,
                            "exploiter_episode_share": 0.4}}
    runs = [train(tmp_path / name, league, tiny=False) for name in ("first", "second")]
    games = [[(e["modules"], e["returns"], e["length"]) for e in run.of_type("episode")] for run in runs]
    assert len(games[0]) > 20 and games[0] == games[1]
    assert len({frozenset(m.values()) for m, _, _ in games[0]}) >= 2  # more than one pairing was drawn


def test_team_wise_self_play_on_an_asymmetric_mpe_env(ray_session, tmp_path, monkeypatch):
    seen = _spy_weights(monkeypatch)
    run = train(tmp_path, {
        "policy_configuration": "SELF_PLAY", "rllib": {"num_env_runners": 0},
        "environment": {"family": "mpe", "env_id": "simple_adversary_v3", "api_type": "PARALLEL",
                        "env_kwargs": {"N": 2, "max_cycles": 25}},
        "algorithm": "ppo", "total_timesteps": 1500,
                     "algo_params": {"train_batch_size_per_learner": 300, "minibatch_size": 150,
                                     "num_epochs": 1, "fcnet_hiddens": [32]},
        "self_play": {"snapshot_win_rate": 0.0, "window_episodes": 4, "min_iterations_between_snapshots": 1,
                      "max_pool_size": 2}}, tiny=False)
    episodes = run.of_type("episode")
    for e in episodes:
        adversary, agents = e["modules"]["adversary_0"], {e["modules"]["agent_0"], e["modules"]["agent_1"]}
        assert len(agents) == 1  # a side is one module
        assert (adversary == "main_adversary") != (agents == {"main_agent"})  # one learning side per episode
    metrics = run.of_type("metrics")
    added = [m for x in metrics for m in x["self_play"].get("snapshots_added", [])]
    assert any(m.startswith("main_adversary_v") for m in added) and any(m.startswith("main_agent_v") for m in added)
    from ray_worker.policy_actor import RayPolicyController

    controller = RayPolicyController.from_checkpoint(run.of_type("checkpoint_saved")[-1]["path"])
    assert {a: actor.module_id for a, actor in controller.actors.items()} == {
        "adversary_0": "main_adversary", "agent_0": "main_agent", "agent_1": "main_agent"}
    pools = metrics[-1]["self_play"]["pools"]
    assert all(m.startswith("main_adversary_v") for m in pools["adversary"])
    assert all(m.startswith("main_agent_v") for m in pools["agent"])
    _assert_learners_train_and_frozen_stay(seen, {"main_adversary", "main_agent"})


def test_chess_self_play_trains_with_masks(ray_session, tmp_path):
    run = train(tmp_path, {
        "policy_configuration": "SELF_PLAY", "rllib": {"num_env_runners": 0},
        "environment": {"family": "classic", "env_id": "chess_v6", "api_type": "AEC"},
        "algorithm": "ppo", "total_timesteps": 200,
                     "algo_params": {"train_batch_size_per_learner": 200, "minibatch_size": 100,
                                     "num_epochs": 1, "fcnet_hiddens": [32]},
        "self_play": {"baselines": ["random"]}}, tiny=False)
    metrics = run.of_type("metrics")
    assert metrics and "main" in metrics[-1]["learner"]
    assert np.isfinite(metrics[-1]["learner"]["main"]["policy_loss"])
    assert sum(e["illegal_actions"] for e in run.of_type("episode")) == 0
    # Training games are too long to finish in this budget, so check the masks move by move:
    # the trained main plays both colours for 120 plies (over as many games as that takes: a
    # barely trained policy may repeat a position three times, which ends a chess game early)
    # and never picks an illegal move. (PettingZoo may log one "Illegal move made" while the
    # run starts: RLlib's env pre-check steps a random action once, before any episode.)
    from pettingzoo.classic import chess_v6

    from ray_worker.policy_actor import RayPolicyConfig, create_ray_actor

    main = create_ray_actor(RayPolicyConfig(run.of_type("checkpoint_saved")[-1]["path"]))
    env = chess_v6.env()
    plies, games = 0, 0
    while plies < 120:
        env.reset(seed=games)
        games += 1
        for agent in env.agent_iter(max_iter=120 - plies):
            obs, _, term, trunc, _ = env.last()
            if term or trunc:
                break
            action = int(main.compute_action(obs))
            assert obs["action_mask"][action] == 1, f"illegal move {action} at ply {plies}"
            env.step(action)
            plies += 1
    env.close()
    assert plies == 120
