"""Configuration, validation, --schema and --dry-run: no Ray cluster involved."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from mosaic.errors import ConfigError
from ray_worker.config import PolicyConfiguration, RayWorkerConfig, default_config


def test_defaults_round_trip():
    config = RayWorkerConfig.from_dict({"run_id": "r"})
    again = RayWorkerConfig.from_dict(config.to_dict())
    assert again == config
    assert config.resources.num_workers == 2 and config.resources.num_gpus == 0.0
    assert config.policy_configuration is PolicyConfiguration.PARAMETER_SHARING
    assert config.training.algo_params["lr"] > 0  # defaults filled from the schema


def test_flat_form_from_worker_examples_is_accepted():
    config = RayWorkerConfig.from_dict({"run_id": "r", "algorithm": "PPO", "num_workers": 8,
                                        "num_envs_per_worker": 4, "framework": "torch"})
    assert config.training.algorithm == "PPO"
    assert config.resources.num_workers == 8 and config.resources.num_envs_per_worker == 4
    with pytest.raises(ConfigError, match="framework: 'tf2' is not one of torch"):
        RayWorkerConfig.from_dict({"run_id": "r", "framework": "tf2"})


def test_default_config_is_valid():
    RayWorkerConfig.from_dict({**default_config(), "run_id": "r"})


def validate(data: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ray_worker.cli", "--validate", "--config", "-"],
                          input=json.dumps(data), capture_output=True, text=True, timeout=120)


BAD_CONFIGS = [
    ({"training": {"algorithm": "PPOO"}},
     "training.algorithm: 'PPOO' is not one of PPO, DQN, IMPALA, APPO, SAC, A2C"),
    ({"environment": {"family": "mpe", "env_id": "simple_spreed_v3"}},
     "environment.env_id: 'simple_spreed_v3' is not a mpe env (did you mean 'simple_spread_v3'?)"),
    ({"environment": {"family": "atari"}}, "environment.family: 'atari' is not one of sisl, classic, butterfly, mpe"),
    ({"environment": {"family": "sisl", "env_id": "waterworld_v4"}, "training": {"algorithm": "DQN"}},
     "training.algorithm: DQN needs discrete actions"),
    ({"environment": {"family": "mpe", "env_id": "simple_spread_v3"},
      "training": {"algorithm": "SAC", "algo_params": {"rollout_fragment_length": 5}}},
     "training.algo_params.rollout_fragment_length: 5 is too short for SAC; use at least 20"),
    ({"environment": {"family": "classic", "env_id": "connect_four_v3", "api_type": "AEC"},
      "training": {"algorithm": "SAC"}}, "uses action masks, which SAC cannot respect yet"),
    ({"environment": {"family": "classic", "env_id": "chess_v6", "api_type": "PARALLEL"}},
     "environment.api_type: PARALLEL is not available for classic/chess_v6"),
    ({"training": {"algo_params": {"lr": -1}}}, "training.algo_params.lr: -1"),
    ({"training": {"algo_params": {"clip_parm": 0.2}}}, "training.algo_params.clip_parm"),
    ({"training": {"algo_params_version": 7}}, "training.algo_params_version"),
    ({"policy_configuration": "SELF_PLAY", "environment": {"family": "mpe", "env_id": "simple_tag_v3"},
      "self_play": {"teams": {"chasers": ["adversary_0", "agent_0"], "rest": ["adversary_1", "adversary_2"]}}},
     "self_play.teams.chasers: agents of one side must share observation and action spaces"),
    ({"policy_configuration": "SELF_PLAY", "environment": {"family": "mpe", "env_id": "simple_spread_v3"}},
     "policy_configuration: SELF_PLAY needs opponents, but mpe/simple_spread_v3 has none (it is fully cooperative"),
    ({"policy_configuration": "SELF_PLAY", "environment": {"family": "mpe", "env_id": "simple_v3"}},
     "policy_configuration: SELF_PLAY needs opponents, but mpe/simple_v3 has none (it has a single agent)"),
    ({"policy_configuration": "SELF_PLAY", "self_play": {"baselines": ["minimax"]}},
     "self_play.baselines: 'minimax' is not one of random"),
    ({"policy_configuration": "SHARED_VALUE_FUNCTION", "training": {"algorithm": "DQN"}},
     "training.algorithm: SHARED_VALUE_FUNCTION (MAPPO) trains with PPO only"),
    ({"policy_configuration": "SHARED_VALUE_FUNCTION",
      "environment": {"family": "butterfly", "env_id": "pistonball_v6", "env_kwargs": {"n_pistons": 3},
                      "preprocessing": {"enabled": False}}},
     "policy_configuration: SHARED_VALUE_FUNCTION on pistonball_v6: global state of shape (560, 200, 3) "
     "is an image, which the critic gets only with environment.preprocessing enabled"),
    ({"policy_configuration": "EVERYONE"}, "policy_configuration: 'EVERYONE' is not one of"),
    ({"resources": {"num_workers": -1}}, "resources.num_workers: -1 is below the minimum 0"),
    ({"resources": {"num_gpus": 1}}, "resources.num_gpus: 1.0 GPUs asked for, but this machine has none"),
    ({"checkpoint": {"restore_from": "/nonexistent/ckpt"}}, "checkpoint.restore_from: '/nonexistent/ckpt'"),
    ({"environment": {"env_kwargs": {"N": "three"}}}, "environment.env_kwargs"),
    ({"framework": "tf2"}, "framework: 'tf2' is not one of torch"),
]


@pytest.mark.parametrize("data,message", BAD_CONFIGS, ids=[m.split(":")[0] for _, m in BAD_CONFIGS])
def test_bad_configs_name_the_field_with_exit_code_2(data, message):
    proc = validate({"worker": "ray", **data})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("ray: error: ") and message in lines[0], lines[0]
    assert proc.stdout == ""


def test_twenty_agents_get_one_shared_module():
    proc = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--dry-run", "--config", "-"],
                          input=json.dumps({"environment": {"family": "butterfly", "env_id": "pistonball_v6"}}),
                          capture_output=True, text=True, timeout=60)
    out = json.loads(proc.stdout)
    assert len(out["env"]["agents"]) == 20
    assert len(out["rllib"]["multi_agent"]["policy_mapping"]) == 20


def test_schema_flag_prints_json_schema():
    proc = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--schema", "PPO"],
                          capture_output=True, text=True, timeout=60)
    schema = json.loads(proc.stdout)
    assert schema["$schema"].endswith("2020-12/schema")
    assert "clip_param" in schema["properties"]


def test_dry_run_starts_no_ray(tmp_path):
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"worker": "ray", "environment": {
        "family": "butterfly", "env_id": "pistonball_v6", "env_kwargs": {"n_pistons": 4}}}))
    probe = tmp_path / "modules.json"
    # Run the worker's command line and then list what it imported: no Ray, no RLlib.
    code = ("import json, sys; from ray_worker.cli import main; rc = main(['--dry-run', '--config', sys.argv[1]]); "
            "open(sys.argv[2], 'w').write(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'ray'))); "
            "sys.exit(rc)")
    proc = subprocess.run([sys.executable, "-c", code, str(config), str(probe)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["env"]["agents"] == [f"piston_{i}" for i in range(4)]
    assert out["env"]["preprocessed"] is True
    assert out["env"]["observation_spaces"]["piston_0"] == "Box((42, 42, 3), float32)"
    assert out["rllib"]["multi_agent"]["policies"] == ["shared"]
    assert out["rllib"]["rl_module"]["shared"]["model_config"]["conv_filters"]
    assert json.loads(probe.read_text()) == []


DRY_RUN_REFUSES = [
    ({"checkpoint": {"restore_from": "/nonexistent/ckpt"}}, "checkpoint.restore_from: '/nonexistent/ckpt'"),
    ({"resources": {"num_gpus": 1}}, "resources.num_gpus: 1.0 GPUs asked for"),
    ({"policy_configuration": "SELF_PLAY", "environment": {"family": "mpe", "env_id": "simple_spread_v3"}},
     "policy_configuration: SELF_PLAY needs opponents"),
    ({"environment": {"family": "sisl", "env_id": "waterworld_v4"}, "training": {"algorithm": "DQN"}},
     "training.algorithm: DQN needs discrete actions"),
]


@pytest.mark.parametrize("data,message", DRY_RUN_REFUSES, ids=[m.split(":")[0] for _, m in DRY_RUN_REFUSES])
def test_dry_run_catches_what_a_run_would_refuse(data, message):
    """--dry-run applies every check that needs no Ray, with the same one-line error and exit 2."""
    proc = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--dry-run", "--config", "-"],
                          input=json.dumps({"worker": "ray", **data}), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ray: error: ") and message in lines[0], proc.stderr
