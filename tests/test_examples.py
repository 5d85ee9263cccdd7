"""Every shipped example config is accepted by its worker (checked without training)."""

from __future__ import annotations

import json

import pytest

from cli_support import EXAMPLES
from mosaic.discovery import discover_workers
from mosaic.launcher import validate_config

CONFIGS = sorted(EXAMPLES.glob("*.json"))


@pytest.fixture(scope="module")
def model_server():
    """Examples that play a language model name an endpoint; a local one stands in for it here."""
    from mosaic.llm.stub_server import StubServer

    with StubServer(["ACTION: done"]) as server:
        yield server


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_example_validates(path, model_server, monkeypatch):
    data = json.loads(path.read_text())
    if "model" in data:  # the endpoint the example names is not running here: a local server is
        monkeypatch.setenv("MOSAIC_EXAMPLE_KEY", "local")
        data["model"] = {**data["model"], "base_url": model_server.base_url, "api_key_env": "MOSAIC_EXAMPLE_KEY"}
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
            "tianshou_cql_cartpole", "llm_tictactoe_vs_random", "llm_spread_message_round"} <= names
