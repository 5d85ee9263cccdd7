"""Configuration, validation, --schema and --dry-run: no Ray cluster involved."""

from __future__ import annotations

import itertools
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
    assert config.rllib.num_env_runners == 2 and config.resources.gpus == 0.0
    assert config.resources.threads == 1 and config.checkpoint.keep == 3
    assert config.policy_configuration is PolicyConfiguration.PARAMETER_SHARING
    assert config.algorithm == "ppo" and config.rllib_algorithm == "PPO"
    assert config.algo_params["lr"] > 0  # defaults filled from the schema


def test_flat_form_from_worker_examples_is_accepted():
    config = RayWorkerConfig.from_dict({"run_id": "r", "algorithm": "PPO", "num_workers": 8,
                                        "num_envs_per_worker": 4, "framework": "torch"})
    assert config.algorithm == "ppo"
    assert config.rllib.num_env_runners == 8 and config.num_envs == 4
    with pytest.raises(ConfigError, match="framework: 'tf2' is not one of torch"):
        RayWorkerConfig.from_dict({"run_id": "r", "framework": "tf2"})
    with pytest.raises(ConfigError, match="num_workers: given both"):
        RayWorkerConfig.from_dict({"run_id": "r", "num_workers": 1, "rllib": {"num_env_runners": 2}})


SPEC_EXAMPLE = {"worker": "ray", "algorithm": "PPO", "num_workers": 8, "num_envs_per_worker": 4, "framework": "torch"}


def test_the_specifications_flat_example_passes_dry_run():
    """Exactly the specification's example: a dry run (which starts no Ray, so no 8 env runners)."""
    proc = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--dry-run", "--config", "-"],
                          input=json.dumps(SPEC_EXAMPLE), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    runners = json.loads(proc.stdout)["rllib"]["env_runners"]
    assert runners["num_env_runners"] == 8 and runners["num_envs_per_env_runner"] == 4


def test_default_config_keeps_its_meaning():
    """The README's main job: PPO, parameter sharing, simple_spread N=2, 60k env steps, sampling in the driver."""
    config = RayWorkerConfig.from_dict({**default_config(), "run_id": "r"})
    assert (config.algorithm, config.total_timesteps, config.rllib.num_env_runners) == ("ppo", 30_000, 0)
    assert config.environment.env_id == "simple_spread_v3" and config.environment.env_kwargs["N"] == 2
    assert config.algo_params["train_batch_size_per_learner"] == 2000 and config.algo_params["lr"] == 0.0005
    assert config.policy_configuration is PolicyConfiguration.PARAMETER_SHARING


@pytest.mark.parametrize("spelling", ["PPO", "ppo", "Ppo"])
def test_rllibs_spelling_of_the_algorithm_is_normalised(spelling):
    config = RayWorkerConfig.from_dict({"run_id": "r", "algorithm": spelling})
    assert config.algorithm == "ppo" and config.rllib_algorithm == "PPO"
    assert RayWorkerConfig.from_dict({"run_id": "r", "algorithm": "a2c"}).rllib_algorithm == "A2C"


def test_shared_hyperparameters_map_onto_rllibs_names():
    config = RayWorkerConfig.from_dict({"run_id": "r", "learning_rate": 1e-3, "gamma": 0.9, "batch_size": 64})
    assert (config.algo_params["lr"], config.algo_params["gamma"], config.algo_params["minibatch_size"]) == \
        (1e-3, 0.9, 64)
    assert RayWorkerConfig.from_dict(config.to_dict()) == config  # a run's written config loads again
    for algorithm in ("dqn", "sac", "impala", "appo", "a2c"):  # no minibatch: the train batch is the update
        params = RayWorkerConfig.from_dict({"run_id": "r", "algorithm": algorithm, "batch_size": 64}).algo_params
        assert params["train_batch_size_per_learner"] == 64, algorithm
    assert RayWorkerConfig.from_dict({"run_id": "r", "algorithm": "sac", "gamma": 0.5}).algo_params["gamma"] == 0.5


@pytest.mark.parametrize("data,message", [
    ({"learning_rate": 1e-3, "algo_params": {"lr": 1e-2}},
     "learning_rate: 0.001 and algo_params.lr (0.01) both set"),
    ({"batch_size": 64, "algo_params": {"minibatch_size": 32}}, "batch_size: 64 and algo_params.minibatch_size"),
    ({"algorithm": "dqn", "batch_size": 64, "algo_params": {"train_batch_size_per_learner": 32}},
     "batch_size: 64 and algo_params.train_batch_size_per_learner"),
    ({"gamma": 0.9, "algo_params": {"gamma": 0.5}}, "gamma: 0.9 and algo_params.gamma"),
    ({"algorithm": "sac", "learning_rate": 1e-3}, "learning_rate: sac has no single learning_rate; set "
                                                  "algo_params.actor_lr, algo_params.critic_lr"),
    ({"batch_size": 5000}, "batch_size: (RLlib's minibatch_size) 5000 is above train_batch_size_per_learner"),
])
def test_a_shared_hyperparameter_is_refused_where_it_cannot_apply(data, message):
    with pytest.raises(ConfigError) as caught:
        RayWorkerConfig.from_dict({"run_id": "r", **data})
    assert message in str(caught.value)


def test_checkpoints_are_counted_in_env_steps():
    config = RayWorkerConfig.from_dict({"run_id": "r", "checkpoint": {"every_timesteps": 400, "keep": None}})
    assert config.checkpoint.every_timesteps == 400 and config.checkpoint.keep is None


def test_default_config_is_valid():
    RayWorkerConfig.from_dict({**default_config(), "run_id": "r"})


def validate(data: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ray_worker.cli", "--validate", "--config", "-"],
                          input=json.dumps(data), capture_output=True, text=True, timeout=120)


BAD_CONFIGS = [
    ({"algorithm": "PPOO"}, "algorithm: 'PPOO' is not one of ppo, dqn, impala, appo, sac, a2c"),
    ({"training": {"algorithm": "ppo"}}, "training: unknown field"),
    ({"num_envs": 65}, "num_envs: 65 is above the maximum 64"),
    ({"environment": {"family": "mpe", "env_id": "simple_spreed_v3"}},
     "environment.env_id: 'simple_spreed_v3' is not a mpe env (did you mean 'simple_spread_v3'?)"),
    ({"environment": {"family": "atari"}}, "environment.family: 'atari' is not one of sisl, classic, butterfly, mpe"),
    ({"environment": {"family": "sisl", "env_id": "waterworld_v4"}, "algorithm": "DQN"},
     "algorithm: dqn needs discrete actions"),
    ({"environment": {"family": "mpe", "env_id": "simple_spread_v3"},
      "algorithm": "sac", "algo_params": {"rollout_fragment_length": 5}},
     "algo_params.rollout_fragment_length: 5 is too short for sac; use at least 20"),
    ({"environment": {"family": "classic", "env_id": "connect_four_v3", "api_type": "AEC"},
      "algorithm": "sac"}, "uses action masks, which sac cannot respect yet"),
    ({"environment": {"family": "classic", "env_id": "chess_v6", "api_type": "PARALLEL"}},
     "environment.api_type: PARALLEL is not available for classic/chess_v6"),
    ({"algo_params": {"lr": -1}}, "algo_params.lr: -1"),
    ({"algo_params": {"clip_parm": 0.2}}, "algo_params.clip_parm"),
    ({"rllib": {"algo_params_version": 7}}, "rllib.algo_params_version"),
    ({"policy_configuration": "SELF_PLAY", "environment": {"family": "mpe", "env_id": "simple_tag_v3"},
      "self_play": {"teams": {"chasers": ["adversary_0", "agent_0"], "rest": ["adversary_1", "adversary_2"]}}},
     "self_play.teams.chasers: agents of one side must share observation and action spaces"),
    ({"policy_configuration": "SELF_PLAY", "environment": {"family": "mpe", "env_id": "simple_spread_v3"}},
     "policy_configuration: SELF_PLAY needs opponents, but mpe/simple_spread_v3 has none (it is fully cooperative"),
    ({"policy_configuration": "SELF_PLAY", "environment": {"family": "mpe", "env_id": "simple_v3"}},
     "policy_configuration: SELF_PLAY needs opponents, but mpe/simple_v3 has none (it has a single agent)"),
    ({"policy_configuration": "SELF_PLAY", "self_play": {"baselines": ["minimax"]}},
     "self_play.baselines: 'minimax' is not one of random"),
    ({"policy_configuration": "SHARED_VALUE_FUNCTION", "algorithm": "DQN"},
     "algorithm: SHARED_VALUE_FUNCTION (MAPPO) trains with ppo only"),
    ({"policy_configuration": "SHARED_VALUE_FUNCTION",
      "environment": {"family": "butterfly", "env_id": "pistonball_v6", "env_kwargs": {"n_pistons": 3},
                      "preprocessing": {"enabled": False}}},
     "policy_configuration: SHARED_VALUE_FUNCTION on pistonball_v6: global state of shape (560, 200, 3) "
     "is an image, which the critic gets only with environment.preprocessing enabled"),
    ({"policy_configuration": "EVERYONE"}, "policy_configuration: 'EVERYONE' is not one of"),
    ({"rllib": {"num_env_runners": -1}}, "rllib.num_env_runners: -1 is below the minimum 0"),
    ({"resources": {"gpus": 1}}, "resources.gpus: 1 requested, but torch sees no GPU on this machine"),
    ({"checkpoint": {"restore_from": "/nonexistent/ckpt"}}, "checkpoint.restore_from: '/nonexistent/ckpt'"),
    ({"environment": {"env_kwargs": {"N": "three"}}}, "environment.env_kwargs"),
    ({"framework": "tf2"}, "framework: 'tf2' is not one of torch"),
    ({"algo_params": {"fcnet_kernel_initializer": "orthogonal"}},
     "algo_params.fcnet_kernel_initializer: 'orthogonal' is not allowed for RLlib's fcnet_kernel_initializer "
     "(default None); allowed: null, orthogonal_, xavier_uniform_"),
    ({"algo_params": {"fcnet_use_layernorm": "yes"}}, "algo_params.fcnet_use_layernorm: 'yes' is not allowed for "
                                                       "RLlib's fcnet_use_layernorm (default False); allowed: true or false"),
    ({"num_envs": 2, "rllib": {"num_env_runners": 1}, "algo_params": {"rollout_fragment_length": 100,
                                                                     "train_batch_size_per_learner": 500}},
     'algo_params.rollout_fragment_length: 100 fills the train batch of 500 only with 600 env steps, more than 10% '
     'past it (samples of 100 × 2 envs × 1 env runner: 200); allowed: "auto" or 250'),
]


@pytest.mark.parametrize("data,message", BAD_CONFIGS, ids=[m.split(":")[0] for _, m in BAD_CONFIGS])
def test_bad_configs_name_the_field_with_exit_code_2(data, message):
    proc = validate({"worker": "ray", **data})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("mosaic: error: ") and message in lines[0], lines[0]
    assert proc.stdout == ""


def test_a_fragment_that_overfills_the_batch_is_refused_where_rllib_refuses_it():
    """PPO's and A2C's rollout_fragment_length against the train batch is checked before the run (RLlib's
    PPOConfig validation would fail it at run time, exit 1): refused exactly where RLlib refuses, over a grid."""
    from ray.rllib.algorithms.ppo import PPOConfig

    disagree = []
    for fragment, envs, runners, batch in itertools.product((1, 7, 100, 167, 250, 333), (1, 2, 3), (0, 1, 2),
                                                            (500, 1000)):
        rllib = (PPOConfig().env_runners(num_env_runners=runners, num_envs_per_env_runner=envs,
                                         rollout_fragment_length=fragment)
                 .training(train_batch_size_per_learner=batch))
        try:
            rllib.validate_train_batch_size_vs_rollout_fragment_length()
            theirs = False
        except ValueError:
            theirs = True
        try:
            RayWorkerConfig.from_dict({"run_id": "r", "num_envs": envs, "rllib": {"num_env_runners": runners},
                                       "algo_params": {"rollout_fragment_length": fragment, "minibatch_size": 100,
                                                       "train_batch_size_per_learner": batch}})
            ours = False
        except ConfigError as exc:
            assert exc.field == "algo_params.rollout_fragment_length", exc
            ours = True
        if ours != theirs:
            disagree.append((fragment, envs, runners, batch, ours, theirs))
    assert not disagree, disagree


@pytest.mark.parametrize("data,steps,said", [
    ({"algorithm": "ppo", "num_envs": 3, "rllib": {"num_env_runners": 0}}, 1002,
     "training iterations of 1002 env steps (a train batch of 1000 in whole vector steps of 3 envs)"),
    ({"algorithm": "ppo", "num_envs": 3, "algo_params": {"rollout_fragment_length": 35}}, 1050,
     "of 1050 env steps (a train batch of 1000 in samples of rollout_fragment_length 35 × 3 envs × 2 env runners)"),
    ({"algorithm": "a2c"}, 1500, "of 500 env steps (a train batch of 500 in whole vector steps of 1 env)"),
    ({"algorithm": "dqn", "algo_params": {"n_step": 3}}, 1002,
     "of 6 env steps (rollout_fragment_length 3 × 1 env × 2 env runners)"),
    ({"algorithm": "sac", "environment": {"family": "mpe", "env_id": "simple_spread_v3",
                                          "env_kwargs": {"continuous_actions": True}}}, 1050,
     "of 50 env steps (rollout_fragment_length 25 × 1 env × 2 env runners)"),
    ({"algorithm": "dqn", "environment": {"family": "gymnasium", "env_id": "CartPole-v1"}, "num_envs": 3}, None,
     "about 6 env steps each (rollout_fragment_length 1 × 3 envs × 2 env runners)"),
    ({"algorithm": "appo", "algo_params": {"min_time_s_per_iteration": 2}}, None,
     "APPO's training iterations last at least 2 s (min_time_s_per_iteration)"),
])
def test_the_budget_rllib_rounds_is_said_with_its_steps_or_as_not_known(data, steps, said):
    """The env steps each algorithm's iterations sample (checked against real runs: tests/test_rounded_budgets.py
    runs PPO, DQN and APPO; SAC, A2C and explicit fragments gave the same numbers by hand), for 1001 asked."""
    rounded = RayWorkerConfig.from_dict({"run_id": "r", "total_timesteps": 1001, **data}).rounded_budget()
    assert rounded.env_steps == steps and said in rounded.message, rounded
    assert RayWorkerConfig.from_dict({"run_id": "r", "total_timesteps": 1001, **data}).rounded_budget(1001) is None
    if steps is not None:  # a budget of whole iterations is taken as it is
        assert RayWorkerConfig.from_dict({"run_id": "r", **data, "total_timesteps": steps}).rounded_budget() is None


REFUSED = [("episodes", {"episodes": 5}), ("reporting.every_timesteps", {"reporting": {"every_timesteps": 100}}),
           ("environment.env_ids", {"environment": {"env_ids": ["simple_spread_v3", "simple_tag_v3"]}})]


def test_the_field_map_covers_every_shared_field():
    from mosaic.workerkit.run_fields import SHARED_PATHS

    fields = RayWorkerConfig.FIELDS
    assert sorted([*fields.honoured, *fields.refused]) == sorted(SHARED_PATHS)
    assert {path for path, _ in REFUSED} == set(fields.refused)


@pytest.mark.parametrize("path,data", REFUSED, ids=[p for p, _ in REFUSED])
def test_refused_shared_fields_are_named_with_exit_code_2(path, data):
    proc = validate({"worker": "ray", **data})
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"mosaic: error: {path}: ") and RayWorkerConfig.FIELDS.refused[path] in line, line


def test_describe_lists_canonical_algorithms_and_the_field_map():
    proc = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--describe"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["capabilities"]["algorithms"] == ["ppo", "dqn", "impala", "appo", "sac", "a2c"]
    assert sorted(doc["algo_params_schemas"]) == sorted(doc["capabilities"]["algorithms"])
    assert doc["shared_fields"] == RayWorkerConfig.FIELDS.to_dict()


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
    ({"resources": {"gpus": 1}}, "resources.gpus: 1 requested, but torch sees no GPU"),
    ({"policy_configuration": "SELF_PLAY", "environment": {"family": "mpe", "env_id": "simple_spread_v3"}},
     "policy_configuration: SELF_PLAY needs opponents"),
    ({"environment": {"family": "sisl", "env_id": "waterworld_v4"}, "algorithm": "DQN"},
     "algorithm: dqn needs discrete actions"),
]


@pytest.mark.parametrize("data,message", DRY_RUN_REFUSES, ids=[m.split(":")[0] for _, m in DRY_RUN_REFUSES])
def test_dry_run_catches_what_a_run_would_refuse(data, message):
    """--dry-run applies every check that needs no Ray, with the same one-line error and exit 2."""
    proc = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--dry-run", "--config", "-"],
                          input=json.dumps({"worker": "ray", **data}), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mosaic: error: ") and message in lines[0], proc.stderr


def test_the_runs_own_ray_is_sized_by_its_reservation():
    """A run given resources.cpus (the daemon's or a cluster cell's reservation) starts its private Ray with
    that many CPUs, never fewer than its env runners and learner need; without one, with every core."""
    import os

    from ray_worker.config import RayWorkerConfig
    from ray_worker.runtime import private_ray_cpus

    def sized(**fields):
        return private_ray_cpus(RayWorkerConfig.from_dict({"run_id": "x", **fields}))

    assert sized(resources={"cpus": 3}) == 3
    assert sized(resources={"cpus": 2.5}) == 3
    assert sized(resources={"cpus": 1}, rllib={"num_env_runners": 2}) == 3  # 2 runners + the learner
    assert sized(rllib={"num_env_runners": 0}) == max(os.cpu_count() or 1, 1)


def test_wandb_online_without_an_api_key_is_refused_naming_the_field(tmp_path, monkeypatch):
    """As in every worker with W&B (mosaic.workerkit.run_fields.WandbTracking): refused before the run."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    with pytest.raises(ConfigError) as err:
        RayWorkerConfig.from_dict({"run_id": "r", "wandb": True, "wandb_mode": "online"})
    assert err.value.field == "wandb_mode" and "allowed: offline" in str(err.value)
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert RayWorkerConfig.from_dict({"run_id": "r", "wandb": True, "wandb_mode": "online"}).wandb_mode == "online"
    assert RayWorkerConfig.from_dict({"run_id": "r", "wandb": True}).wandb_mode == "offline"
