"""Every shipped example config is accepted by its worker (checked without training)."""

from __future__ import annotations

import json

import pytest

from cli_support import EXAMPLES
from mosaic.host.discovery import discover_workers
from mosaic.host.launcher import validate_config
from mosaic.testing.stub_llm_server import pointed_at

CONFIGS = sorted(EXAMPLES.glob("*.json"))


@pytest.fixture(scope="module")
def model_server():
    """Examples that play a language model name an endpoint; a local one stands in for it here."""
    from mosaic.testing.stub_llm_server import StubServer

    with StubServer(["ACTION: done"]) as server:
        yield server


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_example_validates(path, model_server, monkeypatch):
    data = json.loads(path.read_text())
    monkeypatch.setenv("MOSAIC_EXAMPLE_KEY", "local")
    data = pointed_at(data, model_server, "MOSAIC_EXAMPLE_KEY")  # the endpoint it names is not running here
    worker = discover_workers().get(data["worker"])
    normalised = validate_config(worker, {**data, "run_id": "example-check"})
    assert normalised["run_id"] == "example-check"
    assert normalised["seed"] == data.get("seed", normalised["seed"])


def test_examples_cover_the_documented_set():
    names = {p.stem for p in CONFIGS}
    assert {"random_connect_four", "ray_pistonball_ppo_shared", "ray_waterworld_independent",
            "ray_simple_spread_dqn", "ray_multiwalker_sac", "ray_connect_four_self_play",
            "ray_simple_spread_mappo", "ray_simple_spread_a2c", "ray_pistonball_mappo",
            "ray_connect_four_league", "ray_simple_tag_self_play", "cleanrl_ppo_cartpole",
            "cleanrl_dqn_cartpole", "cleanrl_c51_cartpole", "cleanrl_sac_pendulum", "cleanrl_td3_pendulum",
            "cleanrl_ddpg_pendulum", "xuance_mappo_spread", "xuance_ippo_spread", "xuance_qmix_spread",
            "xuance_vdn_spread", "xuance_iql_spread", "xuance_maddpg_spread", "xuance_mappo_waterworld",
            "balrog_babyai", "tianshou_dqn_cartpole", "tianshou_ppo_cartpole", "tianshou_sac_pendulum",
            "tianshou_cql_cartpole", "llm_tictactoe_vs_random", "llm_spread_message_round",
            "benchmarl_mappo_balance", "benchmarl_mappo_simple_spread", "benchmarl_qmix_navigation"} <= names


#: The configuration examples of the specification (reference/worker-examples.rst), as written there,
#: with only the worker named: each runs with the worker's defaults for what it leaves out.
SPEC_EXAMPLES = {
    "cleanrl": {"algorithm": "ppo", "learning_rate": 3e-4, "total_timesteps": 1_000_000, "num_envs": 4,
                "capture_video": True},
    "xuance": {"algorithm": "mappo", "learning_rate": 5e-4, "batch_size": 256, "backend": "torch"},
    "ray": {"algorithm": "PPO", "num_workers": 8, "num_envs_per_worker": 4, "framework": "torch"},
}


@pytest.mark.parametrize("name", sorted(SPEC_EXAMPLES))
def test_the_specifications_example_configs_run_as_written(name, tmp_path):
    """`mosaic run --dry-run` checks each as a run would (RLlib's 8 env runners are not started) and
    prints the normalised config, which keeps every value the example gave."""
    import os
    import subprocess
    import sys

    from mosaic.runs import RunStore

    example = SPEC_EXAMPLES[name]
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"worker": name, **example}))
    runs = RunStore().runs_dir  # the home whose worker environments are built
    before = sorted(runs.iterdir()) if runs.is_dir() else []
    proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(path), "--dry-run"], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    config = json.loads(proc.stdout)["config"]
    assert config["worker"] == name and config["algorithm"] == example["algorithm"].lower()
    for key in ("learning_rate", "total_timesteps", "num_envs", "batch_size", "capture_video", "backend"):
        if key in example:
            assert config[key] == example[key], (key, config[key])
    if name == "ray":
        assert config["num_envs"] == 4 and config["rllib"]["num_env_runners"] == 8
    assert (sorted(runs.iterdir()) if runs.is_dir() else []) == before  # a dry run creates no run folder
