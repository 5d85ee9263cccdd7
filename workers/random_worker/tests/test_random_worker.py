"""The reference worker: contract conformance and mask-respecting play."""

from __future__ import annotations

import json

import pytest

from mosaic.workerkit.envs import make_env
from mosaic.testing import check_worker
from random_worker.runtime import RandomPolicy, legal_mask


@pytest.mark.parametrize("environment", [
    {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"},
    {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL", "env_kwargs": {"max_cycles": 10}},
    {"family": "sisl", "env_id": "pursuit_v4", "api_type": "AEC", "env_kwargs": {"max_cycles": 20}},
    {"family": "butterfly", "env_id": "cooperative_pong_v5", "api_type": "PARALLEL", "env_kwargs": {"max_cycles": 20}},
])
def test_conformance(tmp_path, environment):
    report = check_worker("random", {"seed": 3, "environment": environment, "total_timesteps": 120,
                                     "reporting": {"every_timesteps": 40}}, home=tmp_path,
                          resume=environment["family"] == "mpe")
    assert report.of_type("metrics")[-1]["timesteps_total"] == 120  # exactly the budget: the last episode is cut
    assert report.of_type("run_started")[0]["env"]["env_id"] == environment["env_id"]


@pytest.mark.parametrize("env_id", ["connect_four_v3", "tictactoe_v3", "chess_v6"])
def test_random_play_never_picks_an_illegal_move(env_id):
    env = make_env("classic", env_id, "AEC")
    policy = RandomPolicy(env, seed=0)
    moves = 0
    for episode in range(3 if env_id == "chess_v6" else 20):
        env.reset(seed=episode)
        for agent in env.agent_iter(max_iter=200):
            obs, _, term, trunc, info = env.last()
            if term or trunc:
                env.step(None)
                continue
            action = policy.act(agent, obs, info)
            assert legal_mask(obs, info)[action] == 1
            env.step(action)
            moves += 1
    assert moves > 0


def test_same_seed_same_episodes(tmp_path):
    cfg = {"seed": 11, "environment": {"family": "classic", "env_id": "connect_four_v3"},
           "total_timesteps": 200}
    first = check_worker("random", cfg, home=tmp_path / "a", check_raw_stdout=False)
    second = check_worker("random", cfg, home=tmp_path / "b", check_raw_stdout=False)
    strip = lambda evs: [(e["length"], e["returns"]) for e in evs]  # noqa: E731
    assert strip(first.of_type("episode")) == strip(second.of_type("episode"))
    other = check_worker("random", {**cfg, "seed": 12}, home=tmp_path / "c", check_raw_stdout=False)
    assert strip(other.of_type("episode")) != strip(first.of_type("episode"))


def test_checkpoint_and_restore_continue_the_same_run(tmp_path):
    env = {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
           "env_kwargs": {"max_cycles": 10}}
    base = {"seed": 5, "environment": env, "total_timesteps": 400, "reporting": {"every_timesteps": 100}}
    full = check_worker("random", {**base, "checkpoint": {"every_timesteps": 100}}, home=tmp_path / "a",
                        check_raw_stdout=False)
    saved = full.of_type("checkpoint_saved")
    assert [c["iteration"] for c in saved] == [1, 2, 3, 4]
    mid = saved[1]
    resumed = check_worker("random", {**base, "checkpoint": {"restore_from": mid["path"]}}, home=tmp_path / "b",
                           check_raw_stdout=False)
    assert resumed.of_type("metrics")[0]["iteration"] == 3
    assert resumed.of_type("metrics")[0]["timesteps_total"] > mid["timesteps_total"]
    after = lambda evs: [(e["episode"], e["returns"]) for e in evs if e["episode"] >= 20]  # noqa: E731
    assert after(resumed.of_type("episode")) == after(full.of_type("episode"))
    assert resumed.of_type("episode")[0]["episode"] == 20  # 10-step episodes: 200 steps = 20 episodes


def test_restore_from_missing_checkpoint_is_a_config_error(tmp_path):
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-m", "random_worker.cli", "--validate", "--config", "-"],
                          input=json.dumps({"checkpoint": {"restore_from": str(tmp_path / "nope")}}),
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.startswith("mosaic: error: checkpoint.restore_from:")


def validate(config):
    import subprocess
    import sys
    return subprocess.run([sys.executable, "-m", "random_worker.cli", "--validate", "--config", "-"],
                          input=json.dumps(config), capture_output=True, text=True)


@pytest.mark.parametrize("path", sorted(__import__("random_worker.config", fromlist=["x"])
                                        .RandomWorkerConfig.FIELDS.refused))
def test_each_refused_shared_field_is_refused_by_name(path):
    """A shared field the worker cannot honour is refused naming it, with the value allowed."""
    from random_worker.config import RandomWorkerConfig

    value = {"environment.env_ids": ["tictactoe_v3"], "algo_params": {"lr": 1}, "gamma": 0.5}.get(path, 3)
    config: dict = {}
    *parents, leaf = path.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
    node[leaf] = value
    proc = validate(config)
    assert proc.returncode == 2, proc.stdout
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith(f"mosaic: error: {path}: ") and "allowed: " in line, line
    assert RandomWorkerConfig.FIELDS.refused[path] in line


def test_the_algorithm_is_accepted_in_any_case_and_normalised():
    proc = validate({"algorithm": "RANDOM"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["algorithm"] == "random"
    proc = validate({"algorithm": "ppo"})
    assert proc.returncode == 2 and "algorithm: 'ppo' is not one of random" in proc.stderr


def test_a_run_folder_or_another_envs_checkpoint_as_restore_from_is_refused_before_anything_is_created(
        tmp_path):
    import os
    import subprocess
    import sys
    home = tmp_path / "home"
    env = {**os.environ, "MOSAIC_HOME": str(home)}
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"worker": "random", "total_timesteps": 50}))
    first = subprocess.run([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", "first"],
                           capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    run_folder = home / "trainer" / "runs" / "first"
    for flags in ((), ("--dry-run",)):
        config.write_text(json.dumps({"worker": "random", "checkpoint": {"restore_from": str(run_folder)}}))
        proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", "second", *flags],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("mosaic: error: checkpoint.restore_from: ") and "is a run folder" in line, line
        assert str(run_folder / "checkpoints") in line
        assert sorted(p.name for p in (home / "trainer" / "runs").iterdir()) == ["first"]
    # a checkpoint of another env's run: its agents' sampling state does not fit (it failed the run mid-way)
    (checkpoint,) = sorted((run_folder / "checkpoints").iterdir())[-1:]
    for flags in ((), ("--dry-run",)):
        config.write_text(json.dumps({"worker": "random", "environment": {"family": "mpe", "env_id":
                                      "simple_spread_v3"}, "checkpoint": {"restore_from": str(checkpoint)}}))
        proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", "second", *flags],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("mosaic: error: checkpoint.restore_from: was trained with env classic/connect_four_v3")
        assert "this config has env mpe/simple_spread_v3, policy layout [agent_0, agent_1, agent_2]" in line, line
        assert "allowed: a checkpoint of a random run with env mpe/simple_spread_v3" in line, line
        assert sorted(p.name for p in (home / "trainer" / "runs").iterdir()) == ["first"]


def test_a_null_budget_is_the_default_written_into_the_config():
    """total_timesteps is integer-or-null like every worker's; null means the default (2000), written into the
    run's config, never a run that fails at its first step comparing a count with None."""
    from random_worker.config import DEFAULT_TOTAL_TIMESTEPS, RandomWorkerConfig

    config = RandomWorkerConfig.from_dict({"run_id": "r", "total_timesteps": None})
    assert config.total_timesteps == DEFAULT_TOTAL_TIMESTEPS == 2000
    assert config.to_dict()["total_timesteps"] == 2000
