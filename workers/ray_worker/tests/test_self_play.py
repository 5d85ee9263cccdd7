"""SELF_PLAY is real: main trains against frozen snapshots of itself that never change."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ray_support import train
from ray_worker.self_play import MAIN, SelfPlayManager, SelfPlayMapping, outcome

GAME = {"policy_configuration": "SELF_PLAY",
        "environment": {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"},
        "training": {"total_timesteps": 1800, "algo_params": {
            "train_batch_size_per_learner": 300, "minibatch_size": 100, "num_epochs": 2,
            "fcnet_hiddens": [32], "lr": 0.001}},
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


class Episode:
    def __init__(self, id_: str) -> None:
        self.id_ = id_


def test_mapping_is_consistent_within_an_episode_and_varies_across():
    mapping = SelfPlayMapping(["p0", "p1"], ["main_v0", "main_v1"], [1.0, 1.0], seed=0)
    seats, opponents = set(), set()
    for i in range(60):
        ep = Episode(f"ep{i}")
        a, b = mapping("p0", ep), mapping("p1", ep)
        assert sorted([a, b]).count(MAIN) == 1  # exactly one seat is main
        seats.add("p0" if a == MAIN else "p1")
        opponents.add(b if a == MAIN else a)
    assert seats == {"p0", "p1"} and opponents == {"main_v0", "main_v1"}


def test_latest_sampling_prefers_the_newest_snapshot():
    cfg = Cfg()
    cfg.opponent_sampling, cfg.latest_probability, cfg.max_pool_size = "latest", 0.8, 5
    league = SelfPlayManager(cfg, ["p0", "p1"], seed=0)
    league.pool = ["main_v0", "main_v1", "main_v2"]
    assert league.sampling_weights() == pytest.approx([0.1, 0.1, 0.8])


def test_snapshot_rule_window_threshold_guard_and_eviction():
    league = SelfPlayManager(Cfg(), ["p0", "p1"], seed=0)
    win = {"returns": {"p0": 1.0, "p1": -1.0}, "modules": {"p0": MAIN, "p1": "main_v0"}}
    loss = {"returns": {"p0": -1.0, "p1": 1.0}, "modules": {"p0": MAIN, "p1": "main_v0"}}
    assert outcome(win["returns"], win["modules"]) == ("main_v0", "win")
    summary = league.record([win, win, win, loss])
    assert summary["win_rate"] == 0.75 and summary["loss_rate"] == 0.25
    assert not league.should_snapshot(iteration=1)  # guard: too soon after iteration 0
    assert league.should_snapshot(iteration=2)
    assert league.admit(2) == ("main_v1", None)
    league.record([win] * 4)
    assert not league.should_snapshot(iteration=3)  # guard again
    assert league.admit(4) == ("main_v2", "main_v0")  # pool of 2: the oldest leaves
    assert league.pool == ["main_v1", "main_v2"]


def _weights(algo, module_id):
    from ray_worker.self_play import snapshot_weights

    return {k: v.copy() if isinstance(v, np.ndarray) else torch.as_tensor(v).clone()
            for k, v in snapshot_weights(algo, module_id).items()}


def test_self_play_adds_frozen_snapshots_that_never_change(ray_session, tmp_path, monkeypatch):
    from ray_worker import runtime as runtime_module

    seen: dict[str, list] = {}
    original = runtime_module.RayWorkerRuntime._self_play_step

    def spy(self, algo, league, records, iteration):
        summary = original(self, algo, league, records, iteration)
        for module_id in [MAIN, *league.pool]:
            seen.setdefault(module_id, []).append(_weights(algo, module_id))
        return summary

    monkeypatch.setattr(runtime_module.RayWorkerRuntime, "_self_play_step", spy)
    run = train(tmp_path, {**GAME, "resources": {"num_workers": 0}}, tiny=False)
    metrics = run.of_type("metrics")
    added = [m["self_play"]["snapshot_added"] for m in metrics if m["self_play"].get("snapshot_added")]
    assert added, [m["self_play"] for m in metrics]
    assert all(m["self_play"]["games"] > 0 for m in metrics)
    assert {"win_rate", "draw_rate", "loss_rate", "pool", "pool_size"} <= set(metrics[-1]["self_play"])
    assert metrics[-1]["self_play"]["pool_size"] <= 2
    assert any(e.get("self_play_event") == "snapshot_added" for e in run.of_type("log"))
    assert sum(e["illegal_actions"] for e in run.of_type("episode")) == 0
    # Every frozen snapshot keeps exactly its weights while main keeps changing.
    for module_id, history in seen.items():
        if module_id == MAIN:
            assert any(not _equal(a, b) for a, b in zip(history, history[1:])), "main never trained"
        else:
            assert all(_equal(history[0], h) for h in history[1:]), f"{module_id} changed"
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
    game = {**GAME, "resources": {"num_workers": 0}, "training": {**GAME["training"], "total_timesteps": 900}}
    first = train(tmp_path / "a", game, tiny=False)
    saved = captured[-1]["after"]  # the pool the final checkpoint holds
    assert first.of_type("metrics")[-1]["self_play"]["pool"] == list(saved)
    captured.clear()
    resumed = train(tmp_path / "b", {**game, "checkpoint": {"restore_from": first.of_type("checkpoint_saved")[-1]["path"]},
                                     "training": {**game["training"], "total_timesteps": 1200}}, tiny=False)
    restored = captured[0]["before"]
    assert list(restored) == list(saved)
    assert all(_equal(restored[m], saved[m]) for m in saved), "snapshot weights changed across resume"
    assert resumed.of_type("metrics")[0]["iteration"] == first.of_type("metrics")[-1]["iteration"] + 1


def _equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)


def test_teams_with_different_spaces_are_refused(tmp_path):
    from mosaic.errors import ConfigError
    from ray_worker.config import RayWorkerConfig
    from ray_worker.policies import prepare

    config = RayWorkerConfig.from_dict({"run_id": "x", "policy_configuration": "SELF_PLAY",
                                        "environment": {"family": "mpe", "env_id": "simple_tag_v3"}})
    with pytest.raises(ConfigError, match="team-wise self-play"):
        prepare(config)
