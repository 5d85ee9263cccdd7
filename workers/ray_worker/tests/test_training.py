"""Real RLlib training, tiny batches, one shared Ray session for the module."""

from __future__ import annotations

import pytest

from ray_support import OFF_POLICY, train


def assert_trained(run, iterations: int = 2) -> None:
    metrics = run.of_type("metrics")
    assert len(metrics) >= iterations
    steps = [m["timesteps_total"] for m in metrics]
    assert steps == sorted(steps) and steps[-1] >= run.config.total_timesteps
    assert any(m["learner"] for m in metrics), "no learner results"
    assert run.events[0]["type"] == "run_started"


def test_ppo_parameter_sharing_reports_agents_modules_and_losses(ray_session, tmp_path):
    run = train(tmp_path, {})
    assert_trained(run)
    last = run.of_type("metrics")[-1]
    assert set(last["agent_episode_returns_mean"]) == {"agent_0", "agent_1"}
    assert set(last["module_episode_returns_mean"]) == {"shared"}
    assert {"policy_loss", "vf_loss", "entropy", "total_loss"} <= set(last["learner"]["shared"])
    assert last["episode_len_mean"] == 25
    episodes = run.of_type("episode")
    assert episodes and all(set(e["returns"]) == {"agent_0", "agent_1"} for e in episodes)
    (ckpt,) = run.of_type("checkpoint_saved")
    assert (run.run.root / "checkpoints" / "checkpoint_000002" / "mosaic_state.json").exists()
    assert ckpt["timesteps_total"] == last["timesteps_total"]
    assert list((run.run.root / "tensorboard").glob("events.out.tfevents.*"))


def test_independent_modules_on_sisl_waterworld(ray_session, tmp_path):
    run = train(tmp_path, {"policy_configuration": "INDEPENDENT",
                           "environment": {"family": "sisl", "env_id": "waterworld_v4",
                                           "env_kwargs": {"n_pursuers": 2, "max_cycles": 50}}})
    assert_trained(run)
    assert run.events[0]["modules"]["modules"] == {"pursuer_0": ["pursuer_0"], "pursuer_1": ["pursuer_1"]}
    assert set(run.of_type("metrics")[-1]["learner"]) == {"pursuer_0", "pursuer_1"}


def test_parameter_sharing_groups_agent_types(ray_session, tmp_path):
    run = train(tmp_path, {"environment": {"family": "mpe", "env_id": "simple_tag_v3",
                                           "env_kwargs": {"num_good": 1, "num_adversaries": 2,
                                                          "num_obstacles": 1, "max_cycles": 25}}})
    assert_trained(run)
    modules = run.events[0]["modules"]["modules"]
    assert modules == {"adversary": ["adversary_0", "adversary_1"], "agent": ["agent_0"]}


@pytest.mark.parametrize("algorithm,env,params", [
    ("DQN", {"family": "mpe", "env_id": "simple_spread_v3", "env_kwargs": {"N": 2, "max_cycles": 25}},
     {"train_batch_size_per_learner": 32, "num_steps_sampled_before_learning_starts": 100,
      "rollout_fragment_length": 25}),
    ("IMPALA", {"family": "mpe", "env_id": "simple_spread_v3", "env_kwargs": {"N": 2, "max_cycles": 25}},
     {"train_batch_size_per_learner": 100, "rollout_fragment_length": 25, "min_time_s_per_iteration": 0}),
    ("APPO", {"family": "mpe", "env_id": "simple_spread_v3", "env_kwargs": {"N": 2, "max_cycles": 25}},
     {"train_batch_size_per_learner": 100, "rollout_fragment_length": 25, "min_time_s_per_iteration": 0}),
    ("SAC", {"family": "sisl", "env_id": "waterworld_v4", "env_kwargs": {"n_pursuers": 2, "max_cycles": 50}},
     {"train_batch_size_per_learner": 64, "num_steps_sampled_before_learning_starts": 100,
      "rollout_fragment_length": 25}),
])
def test_each_algorithm_trains_two_iterations(ray_session, tmp_path, algorithm, env, params):
    run = train(tmp_path, {"environment": env,
        "algorithm": algorithm, "total_timesteps": 300, "algo_params": {**params, "fcnet_hiddens": [32]}})
    metrics = run.of_type("metrics")
    assert len(metrics) >= 2 and metrics[-1]["timesteps_total"] >= 300
    assert any(m["learner"] for m in metrics), f"{algorithm} never updated"


@pytest.mark.parametrize("algorithm,override", [
    ("DQN", {}),
    ("SAC", {"environment": {"family": "sisl", "env_id": "waterworld_v4",
                             "env_kwargs": {"n_pursuers": 2, "max_cycles": 50}}}),
    ("DQN", {"environment": {"family": "gymnasium", "env_id": "CartPole-v1"}}),
], ids=["dqn", "sac", "dqn-single-agent"])
def test_an_off_policy_run_repeats_with_its_seed(ray_session, tmp_path, algorithm, override):
    """RLlib's replay buffers draw their rows unseeded; the worker seeds them from the run's seed."""
    def learned(where: str) -> list:
        run = train(tmp_path / where, {"algorithm": algorithm, "seed": 7, "total_timesteps": 125,
                                       "algo_params": OFF_POLICY, **override})
        return [m["learner"] for m in run.of_type("metrics")]

    first, second = learned("a"), learned("b")
    assert any(first), f"{algorithm} never updated: nothing compared"
    assert first == second, "two runs with one seed must learn the same"


@pytest.mark.parametrize("env_id", ["connect_four_v3", "tictactoe_v3"])
def test_masked_games_never_sample_illegal_actions(ray_session, tmp_path, env_id):
    run = train(tmp_path, {"environment": {"family": "classic", "env_id": env_id, "api_type": "AEC"},
                           "total_timesteps": 600, "algo_params": {
                               "train_batch_size_per_learner": 300, "minibatch_size": 100,
                               "num_epochs": 1, "fcnet_hiddens": [32]}})
    assert_trained(run)
    episodes = run.of_type("episode")
    assert len(episodes) >= 10
    assert sum(e["illegal_actions"] for e in episodes) == 0
    assert all(m["illegal_actions"] == 0 for m in run.of_type("metrics"))


def test_illegal_move_monitor_counts_a_real_illegal_move():
    from mosaic.workerkit.envs import make_env
    from ray_worker.illegal_moves import INFO_KEY, IllegalMoveMonitor

    env = IllegalMoveMonitor(make_env("classic", "tictactoe_v3", "AEC"))
    env.reset(seed=0)
    env.step(4)  # centre: legal
    assert env.illegal_moves == 0
    env.step(4)  # centre again: illegal, and the game ends
    assert env.illegal_moves == 1
    assert all(info[INFO_KEY] == 1 for info in env.unwrapped.infos.values())
    env.reset(seed=1)
    assert env.illegal_moves == 0


def test_butterfly_images_train_with_preprocessing(ray_session, tmp_path):
    run = train(tmp_path, {"environment": {"family": "butterfly", "env_id": "pistonball_v6",
                                           "env_kwargs": {"n_pistons": 3, "max_cycles": 40}},
                           "total_timesteps": 160, "algo_params": {
                               "train_batch_size_per_learner": 80, "minibatch_size": 80, "num_epochs": 1}})
    assert_trained(run)
    assert run.events[0]["modules"]["modules"] == {"shared": ["piston_0", "piston_1", "piston_2"]}


def test_checkpoint_restore_continues_the_counters(ray_session, tmp_path):
    # Iterations of 200 env steps; a checkpoint at the first iteration end at or past each multiple of 300.
    first = train(tmp_path / "a", {"total_timesteps": 600, "checkpoint": {"every_timesteps": 300, "keep": 1}})
    saved = first.of_type("checkpoint_saved")
    assert [(c["iteration"], c["timesteps_total"]) for c in saved] == [(2, 400), (3, 600), (3, 600)]
    assert not (first.run.root / "checkpoints" / "checkpoint_000002").exists()  # keep=1
    final = saved[-1]
    resumed = train(tmp_path / "b", {"checkpoint": {"restore_from": final["path"]},
                                     "total_timesteps": 800})
    metrics = resumed.of_type("metrics")
    assert metrics[0]["iteration"] == 4
    assert metrics[0]["timesteps_total"] == final["timesteps_total"] + 200
    assert metrics[-1]["timesteps_total"] >= 800
    assert resumed.of_type("episode")[0]["episode"] == first.summary["episodes"]


def test_same_seed_same_first_iteration(ray_session, tmp_path):
    def first_returns(seed: int, where: str) -> list:
        run = train(tmp_path / where, {"seed": seed, "total_timesteps": 200})
        return [e["returns"] for e in run.of_type("episode")]

    a, b = first_returns(3, "a"), first_returns(3, "b")
    assert a and a == b
    assert first_returns(4, "c") != a


def test_wandb_offline_logs_without_network(ray_session, tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_API_KEY", "")  # no account, no server: offline must not need one
    run = train(tmp_path, {"wandb": True, "wandb_mode": "offline", "tensorboard": False,
                           "total_timesteps": 200})
    assert run.of_type("metrics")
    offline = list((run.run.root / "logs" / "wandb").glob("offline-run-*"))
    assert len(offline) == 1 and list(offline[0].glob("*.wandb"))
    assert not list((run.run.root / "tensorboard").glob("events.out.tfevents.*"))
