"""The Tianshou worker's config: Tianshou's own signatures as the schema, clear errors for what cannot work."""

from __future__ import annotations

import json
import subprocess

import pytest

SIGNATURES = """
import inspect, json
from tianshou_worker import algorithms
from tianshou_worker.config import tianshou_params
import importlib
out = {}
for name, algo in algorithms.ALGORITHMS.items():
    merged = {}
    for path in (algo.policy_class, algo.tianshou_class):
        module, _, cls = path.rpartition(".")
        klass = getattr(importlib.import_module("tianshou.algorithm." + module), cls)
        for p in inspect.signature(klass.__init__).parameters.values():
            if p.default is not inspect.Parameter.empty:
                merged[p.name] = p.default
    out[name] = {k: [merged[k], p.default] for k, p in tianshou_params(name).items()}
print(json.dumps(out))
"""


@pytest.mark.parametrize("fields,field,words", [
    ({"algorithm": "dqnn"}, "algorithm", "'dqnn' is not one of"),
    ({"algo_params": {"gama": 0.9}}, "algo_params.gama", "did you mean 'gamma'?"),
    ({"algo_params": {"gamma": "high"}}, "algo_params.gamma", "'high' is not allowed for Tianshou's gamma (default 0.99); "
                                                             "allowed: a number from 0 to 1"),
    ({"algo_params": {"model": 1}}, "algo_params.model", "is built by the worker"),
    # bounds the worker knows (Tianshou checks none): a count, a probability
    ({"algo_params": {"n_step_return_horizon": 0}}, "algo_params.n_step_return_horizon",
     "0 is not allowed for Tianshou's n_step_return_horizon (default 1); allowed: an integer >= 1"),
    ({"algo_params": {"eps_inference": -1.0}}, "algo_params.eps_inference", "allowed: a number from 0 to 1"),
    ({"algo_params": {"target_update_freq": -5}}, "algo_params.target_update_freq",  # 0: no target network
     "-5 is not allowed for Tianshou's target_update_freq (default 0); allowed: an integer >= 0"),
    ({"algorithm": "ppo", "algo_params": {"action_scaling": True}}, "algo_params.action_scaling",
     "is set by the worker for ppo: it follows the action space: discrete actions are not scaled"),
    ({"algorithm": "sac", "environment": {"env_id": "CartPole-v1"}}, "environment.env_id",
     "sac acts in box action spaces; CartPole-v1 has discrete"),
    ({"environment": {"env_id": "CartPol-v1"}}, "environment.env_id", "did you mean 'CartPole-v1'?"),
    ({"environment": {"family": "mpe"}}, "environment.family", "'mpe' is not one of"),
    ({"gamma": 0.9, "algo_params": {"gamma": 0.8}}, "algo_params.gamma", "top-level 'gamma'"),
    ({"gamma": 1.5}, "gamma", "above the maximum"),
    ({"learner_seat": "player_2"}, "learner_seat", "environment.family: classic"),
    ({"checkpoint": {"restore_from": "/nowhere"}}, "checkpoint.restore_from", "does not exist"),
    # the old spellings are gone
    ({"env_id": "CartPole-v1"}, "env_id", ""),
    ({"env_family": "classic"}, "env_family", ""),
    ({"torch_num_threads": 1}, "torch_num_threads", ""),
    ({"report_every_timesteps": 100}, "report_every_timesteps", ""),
    ({"total_timesteps": 50, "learning_starts": 64}, "learning_starts", "nothing would be learned"),
    ({"algorithm": "ppo", "total_timesteps": 100}, "total_timesteps", "less than one rollout"),
    ({"hidden_sizes": []}, "hidden_sizes", "one or more positive layer sizes"),
    ({"algorithm": "ppo", "total_timesteps": 5000, "eps_schedule": {}}, "eps_schedule", "is for dqn"),
    ({"eps_schedule": {"begin_at": 500, "end_at": 100}}, "eps_schedule.end_at", "100 is not after begin_at (500)"),
    ({"eps_schedule": {"start": 1.5}}, "eps_schedule.start", "1.5 is above the maximum 1.0"),
    ({"stop_at_return": 475}, "stop_at_return", "needs tests to stop on: set test_every_timesteps"),
    ({"algorithm": "discrete_cql", "offline_data": {"policy": "/nowhere"}}, "offline_data.policy", "does not exist"),
])
def test_bad_configs_are_one_line_errors_naming_the_field(home, fields, field, words):
    home.check_refused(fields, field, words)


#: Shared fields the tianshou worker refuses (its FieldMap), each with a value that is not the default.
REFUSED = [
    ("environment.env_ids", {"environment": {"env_ids": ["CartPole-v1", "Acrobot-v1"]}}),
    ("environment.env_kwargs", {"environment": {"env_kwargs": {"sutton_barto_reward": True}}}),
    ("episodes", {"episodes": 5}),
    ("checkpoint.keep", {"checkpoint": {"keep": 2}}),
]


def _run_cli(home, args: list[str], config: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([home.python, "-m", "tianshou_worker.cli", *args],
                          input=json.dumps(config) if config is not None else None, capture_output=True,
                          text=True, timeout=300)


def test_field_map_covers_every_shared_field_and_refuses_by_name(home):
    from mosaic.workerkit.run_fields import SHARED_PATHS

    check = ("import json; from tianshou_worker.config import TianshouConfig; "
             "print(json.dumps(TianshouConfig.FIELDS.to_dict()))")
    proc = subprocess.run([home.python, "-c", check], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    fields = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted([*fields["honoured"], *fields["refused"]]) == sorted(SHARED_PATHS)
    assert {path for path, _ in REFUSED} == set(fields["refused"])
    for path, given in REFUSED:
        proc = _run_cli(home, ["--validate", "--config", "-"], {"worker": "tianshou", **given})
        message = proc.stderr.strip()
        assert proc.returncode == 2, (path, message)
        assert message.startswith(f"mosaic: error: {path}: ") and len(message.splitlines()) == 1, message
        assert fields["refused"][path] in message, message


def test_shared_fields_and_library_spellings(home):
    """``PPO`` is ``ppo``; null hyperparameters are the worker's defaults; gamma reaches Tianshou's gamma."""
    proc = _run_cli(home, ["--validate", "--config", "-"],
                    {"worker": "tianshou", "algorithm": "PPO", "total_timesteps": 5000,
                     "environment": {"env_id": "CartPole-v1"}, "resources": {"threads": 2}})
    assert proc.returncode == 0, proc.stderr
    checked = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert checked["algorithm"] == "ppo" and checked["environment"]["family"] == "gymnasium"
    assert checked["learning_rate"] == 1e-3 and checked["batch_size"] == 64 and checked["gamma"] is None
    assert checked["resources"]["threads"] == 2 and checked["num_envs"] == 1
    proc = _run_cli(home, ["--dry-run", "--config", "-"],
                    {"worker": "tianshou", "algorithm": "DQN", "gamma": 0.9, "learning_rate": 5e-4})
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert shown["algorithm_kwargs"] == {"gamma": 0.9}


def test_algo_params_are_tianshous_signatures_read_without_importing_it(home):
    """The schema is read from Tianshou's source (fast); Python's own view of the classes agrees."""
    checked = subprocess.run([home.python, "-c", SIGNATURES], capture_output=True, text=True, timeout=600, check=True)
    for name, params in json.loads(checked.stdout.strip().splitlines()[-1]).items():
        assert params, name
        assert all(python == ours for python, ours in params.values()), (name, params)
    schema = json.loads(subprocess.run([home.python, "-m", "tianshou_worker.cli", "--schema", "dqn"],
                                       capture_output=True, text=True, timeout=300, check=True).stdout)
    props = schema["properties"]
    assert props["gamma"]["default"] == 0.99 and props["is_double"]["type"] == "boolean"
    assert props["huber_loss_delta"]["type"] == ["number", "null"] and "model" not in props


@pytest.mark.parametrize("algorithm,policy,kind", [
    ("dqn", "DiscreteQLearningPolicy", "off_policy"), ("ppo", "ProbabilisticActorPolicy", "on_policy"),
    ("sac", "SACPolicy", "off_policy"), ("discrete_cql", "QRDQNPolicy", "offline"),
])
def test_dry_run_shows_tianshous_classes_and_arguments(home, algorithm, policy, kind):
    extra = {"total_timesteps": 5000} if algorithm == "ppo" else {}
    proc = home.cli("run", "--dry-run", str(home.config("dry", algorithm=algorithm, algo_params={"gamma": 0.9},
                                                        **extra)))
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["tianshou_policy"] == policy and shown["kind"] == kind
    assert shown["algorithm_kwargs"] == {"gamma": 0.9} and home.runs() == []
