"""The XuanCe worker's config: XuanCe's yaml as the schema, clear errors for what cannot work."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml


def shipped_yaml(home, *parts: str) -> dict:
    site = next((home.env / "lib").glob("python3*/site-packages"))
    return yaml.safe_load((site / "xuance" / "configs" / "/".join(parts)).read_text())


@pytest.mark.parametrize("fields,field,words", [
    ({"algorithm": "mapo"}, "algorithm", "'mapo' is not one of"),
    ({"algorithm": "coma"}, "algorithm", "coma is not supported: XuanCe 1.4.4's COMA learner sets huber_delta=None"),
    ({"algo_params": {"clip_rnage": 0.1}}, "algo_params.clip_rnage", "did you mean 'clip_range'?"),
    ({"algo_params": {"clip_range": "wide"}}, "algo_params.clip_range", "'wide' is not a number (XuanCe's default is 0.2)"),
    ({"algo_params": {"parallels": 4}}, "algo_params.parallels", "set the top-level 'num_envs' instead"),
    ({"algo_params": {"vectorize": "SubprocVecMultiAgentEnv"}}, "algo_params.vectorize", "envs run in-process"),
    ({"backend": "tensorflow"}, "backend", "'tensorflow' is not one of"),
    ({"environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "AEC"}},
     "environment.api_type", "PARALLEL only"),
    ({"total_timesteps": 100, "batch_size": 400}, "total_timesteps", "less than one update"),
    ({"algorithm": "qmix", "total_timesteps": 500}, "algo_params.start_training", "nothing would be learned"),
    ({"algorithm": "maddpg", "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
                                            "env_kwargs": {"continuous_actions": False}}},
     "environment", "maddpg acts in box action spaces; simple_spread_v3 has discrete; for MPE set "
                    "environment.env_kwargs.continuous_actions to true"),
    ({"algorithm": "qmix", "environment": {"family": "sisl", "env_id": "waterworld_v4", "api_type": "PARALLEL"}},
     "environment", "qmix acts in discrete action spaces; waterworld_v4 has box"),
    ({"environment": {"family": "mpe", "env_id": "simple_sprad_v3", "api_type": "PARALLEL"}},
     "environment.env_id", "did you mean 'simple_spread_v3'?"),
])
def test_bad_configs_are_one_line_errors_naming_the_field(home, fields, field, words):
    proc = home.cli("run", str(home.config("bad", **fields)))
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"mosaic: error: {field}: "), proc.stderr
    assert words in lines[0]
    assert "Traceback" not in proc.stderr and home.runs() == []


def test_the_schema_is_xuances_shipped_yaml(home):
    schema = json.loads(subprocess.run([home.python, "-m", "xuance_worker.cli", "--schema", "mappo"],
                                       capture_output=True, text=True, timeout=300, check=True).stdout)
    shipped = {**shipped_yaml(home, "basic.yaml"), **shipped_yaml(home, "mappo", "mpe", "simple_spread_v3.yaml")}
    props = schema["properties"]
    assert {k: v["default"] for k, v in props.items()} == {k: v for k, v in shipped.items() if k in props}
    for owned in ("seed", "parallels", "learning_rate", "running_steps", "vectorize", "policy"):
        assert owned not in props  # set by MOSAIC's own fields
    assert props["clip_range"]["type"] == "number" and props["use_parameter_sharing"]["type"] == "boolean"
    assert "Ratio clip range" in props["clip_range"]["description"]


@pytest.mark.parametrize("algorithm,kind,policy,batch_key", [
    ("mappo", "discrete", "Categorical_MAAC_Policy", "buffer_size"),
    ("ippo", "discrete", "Categorical_MAAC_Policy", "buffer_size"),
    ("qmix", "discrete", "Mixing_Q_network", "batch_size"),
    ("maddpg", "box", "MADDPG_Policy", "batch_size"),
])
def test_dry_run_shows_xuances_arguments_as_the_run_builds_them(home, algorithm, kind, policy, batch_key):
    config = home.config("dry", algorithm=algorithm, num_envs=3, batch_size=96, learning_rate=0.001,
                         algo_params={"gamma": 0.9})
    proc = home.cli("run", "--dry-run", str(config))
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    args = shown["xuance_arguments"]
    assert shown["env"]["action_kind"] == kind and args["policy"] == policy
    assert args["continuous_action"] is (kind == "box")
    assert args["parallels"] == 3 and args[batch_key] == 96 and args["learning_rate"] == 0.001
    assert args["gamma"] == 0.9 and args["vectorize"] == "DummyVecMultiAgentEnv"
    assert shown["xuance_yaml"].endswith(f"{algorithm}/mpe/simple_spread_v3.yaml")
    assert home.runs() == []
