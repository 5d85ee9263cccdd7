"""Hyperparameter schemas: valid JSON Schema, strict validation, output RLlib really accepts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from jsonschema import Draft202012Validator

import mosaic.errors
from mosaic.errors import ConfigError
from ray_worker import algo_params as ap

ALL = "ppo, dqn, impala, appo, sac, a2c"  # the canonical (config) spellings


def props(algorithm: str) -> dict[str, dict[str, Any]]:
    return ap.schema(algorithm)["properties"]


# --------------------------------------------------------------------------
# The schemas themselves.
# --------------------------------------------------------------------------

def test_builtin_algorithms_and_version():
    assert ap.SCHEMA_VERSION == 1
    assert ap.ALGORITHMS == ("PPO", "DQN", "IMPALA", "APPO", "SAC")
    assert ap.algorithms() == (*ap.ALGORITHMS, *ap.EXTRA_ALGORITHMS)


@pytest.mark.parametrize("algorithm", ap.ALGORITHMS)
def test_schema_is_a_valid_draft_2020_12_schema(algorithm):
    schema = ap.schema(algorithm)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert algorithm in schema["$id"] and schema["$id"].endswith(f"v{ap.SCHEMA_VERSION}")
    assert algorithm in schema["title"]
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["x-schema-version"] == ap.SCHEMA_VERSION
    assert "required" not in schema  # everything has a default


@pytest.mark.parametrize("algorithm", ap.ALGORITHMS)
def test_every_property_describes_itself_for_the_gui(algorithm):
    for key, prop in props(algorithm).items():
        for needed in ("type", "default", "description", "x-category", "x-rllib"):
            assert needed in prop, f"{algorithm}.{key} lacks {needed}"
        types = [prop["type"]] if isinstance(prop["type"], str) else prop["type"]
        assert set(types) <= {"number", "integer", "boolean", "string", "array", "null"}, key
        assert prop["x-category"] in ap.CATEGORIES, key
        assert prop["x-rllib"]["section"] in ap.SECTIONS and prop["x-rllib"]["name"], key
        # One clear sentence.
        text = prop["description"]
        assert text[0].isupper() and text.endswith(".") and ". " not in text, f"{key}: {text!r}"
        # Numbers have a lower bound (target entropy is legitimately any real number).
        if {"number", "integer"} & set(types) and key != "target_entropy":
            assert "minimum" in prop or "exclusiveMinimum" in prop, f"{algorithm}.{key} has no lower bound"
        # Strings are closed sets the GUI can offer as a choice.
        if "string" in types:
            consts = [b["const"] for b in prop.get("anyOf", []) if "const" in b]
            assert prop.get("enum") or consts, f"{algorithm}.{key} is a free-form string"
        if "array" in types:
            assert prop["items"]["type"] in ("integer", "number"), key
        if "x-rllib-default" in prop:
            assert prop["x-rllib-default"] != prop["default"], f"{key}: marker without a difference"


@pytest.mark.parametrize("algorithm", ap.ALGORITHMS)
def test_defaults_satisfy_the_schema_and_the_schema_is_not_vacuous(algorithm):
    validator = Draft202012Validator(ap.schema(algorithm))
    validator.validate(ap.defaults(algorithm))
    validator.validate({})
    assert not validator.is_valid({"no_such_hyperparameter": 1})
    assert not validator.is_valid({"gamma": "high"})
    assert not validator.is_valid({"fcnet_hiddens": [64, -1]})
    assert not validator.is_valid({"rollout_fragment_length": "sometimes"})
    assert validator.is_valid({"rollout_fragment_length": "auto"})
    assert validator.is_valid({"rollout_fragment_length": 16})


def test_schema_json_is_indented_and_round_trips():
    text = ap.schema_json("SAC")
    assert text.startswith("{\n  ")
    assert json.loads(text) == ap.schema("SAC")


def test_schema_hands_out_copies():
    ap.schema("PPO")["properties"]["lr"]["default"] = 99
    ap.defaults("PPO")["fcnet_hiddens"].append(7)
    assert ap.defaults("PPO")["lr"] == props("PPO")["lr"]["default"] != 99
    assert ap.defaults("PPO")["fcnet_hiddens"] == [64, 64]


def test_expected_hyperparameters_per_algorithm():
    common = {"gamma", "train_batch_size_per_learner", "grad_clip", "fcnet_hiddens", "fcnet_activation",
              "rollout_fragment_length"}
    expected = {
        "PPO": common | {"lr", "lambda_", "clip_param", "vf_clip_param", "vf_loss_coeff", "entropy_coeff", "kl_coeff",
                         "kl_target", "use_kl_loss", "minibatch_size", "num_epochs", "use_gae"},
        "DQN": common | {"lr", "replay_buffer_capacity", "target_network_update_freq", "n_step", "double_q", "dueling",
                         "epsilon_initial", "epsilon_final", "epsilon_decay_timesteps",
                         "num_steps_sampled_before_learning_starts", "training_intensity"},
        "SAC": common | {"tau", "initial_alpha", "target_entropy", "actor_lr", "critic_lr", "alpha_lr",
                         "replay_buffer_capacity", "n_step", "num_steps_sampled_before_learning_starts"},
        "IMPALA": common | {"lr", "vtrace_clip_rho_threshold", "vtrace_clip_pg_rho_threshold", "vf_loss_coeff",
                            "entropy_coeff", "min_time_s_per_iteration"},
        "APPO": common | {"lr", "clip_param", "use_kl_loss", "kl_coeff", "vf_loss_coeff", "entropy_coeff",
                          "target_network_update_freq", "circular_buffer_num_batches",
                          "circular_buffer_iterations_per_batch", "min_time_s_per_iteration"},
    }
    for algorithm, names in expected.items():
        missing = names - set(props(algorithm))
        assert not missing, f"{algorithm} lacks {missing}"
    assert "lr" not in props("SAC")  # RLlib's SAC rejects the shared lr
    for algorithm in ("IMPALA", "APPO"):  # short iterations for live metrics
        assert props(algorithm)["min_time_s_per_iteration"]["default"] <= 1


# --------------------------------------------------------------------------
# validate()
# --------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ap.ALGORITHMS)
def test_defaults_round_trip(algorithm):
    filled = ap.validate(algorithm, {})
    assert filled == {key: prop["default"] for key, prop in props(algorithm).items()}
    assert ap.validate(algorithm, filled) == filled
    assert ap.validate(algorithm, None) == filled
    assert ap.validate(algorithm, json.loads(json.dumps(filled))) == filled


def test_given_values_win_and_the_input_is_left_alone():
    given = {"lambda_": 0.9, "fcnet_hiddens": [32]}
    result = ap.validate("PPO", given)
    assert result["lambda_"] == 0.9 and result["fcnet_hiddens"] == [32]
    assert result["clip_param"] == props("PPO")["clip_param"]["default"]
    result["fcnet_hiddens"].append(8)
    assert given == {"lambda_": 0.9, "fcnet_hiddens": [32]}


def test_values_are_normalised_like_json_schema_sees_them():
    result = ap.validate("PPO", {"num_epochs": 3.0, "lr": 1, "fcnet_hiddens": (32, 16.0)})
    assert result["num_epochs"] == 3 and type(result["num_epochs"]) is int
    assert result["lr"] == 1.0 and type(result["lr"]) is float
    assert result["fcnet_hiddens"] == [32, 16] and all(type(n) is int for n in result["fcnet_hiddens"])
    assert ap.validate("SAC", {"target_entropy": -3})["target_entropy"] == -3.0
    assert ap.validate("DQN", {"grad_clip": None, "training_intensity": None})["grad_clip"] is None


F = "algo_params"

# (algorithm, params, failing field, message, whether plain JSON Schema can also see the problem)
BAD_INPUTS = [
    ("PPO", {"lr": -1}, "lr",
     "-1 is not allowed for RLlib's lr (default 0.0003); allowed: a number > 0 and <= 1", True),
    ("PPO", {"lr": 0}, "lr",
     "0 is not allowed for RLlib's lr (default 0.0003); allowed: a number > 0 and <= 1", True),
    ("PPO", {"gamma": 1.5}, "gamma",
     "1.5 is not allowed for RLlib's gamma (default 0.99); allowed: a number from 0 to 1", True),
    ("PPO", {"num_epochs": 0}, "num_epochs",
     "0 is not allowed for RLlib's num_epochs (default 10); allowed: an integer >= 1", True),
    ("PPO", {"lr": "abc"}, "lr",
     "'abc' is not allowed for RLlib's lr (default 0.0003); allowed: a number > 0 and <= 1", True),
    ("PPO", {"lr": True}, "lr",
     "True is not allowed for RLlib's lr (default 0.0003); allowed: a number > 0 and <= 1", True),
    ("PPO", {"num_epochs": False}, "num_epochs",
     "False is not allowed for RLlib's num_epochs (default 10); allowed: an integer >= 1", True),
    ("PPO", {"num_epochs": 2.5}, "num_epochs",
     "2.5 is not allowed for RLlib's num_epochs (default 10); allowed: an integer >= 1", True),
    ("PPO", {"lr": float("nan")}, "lr",
     "nan is not allowed for RLlib's lr (default 0.0003); allowed: a number > 0 and <= 1", False),
    ("PPO", {"use_gae": 1}, "use_gae",
     "1 is not allowed for RLlib's use_gae (default True); allowed: true or false", True),
    ("PPO", {"use_gae": "false"}, "use_gae",
     "'false' is not allowed for RLlib's use_gae (default True); allowed: true or false", True),
    ("PPO", {"fcnet_hiddens": 64}, "fcnet_hiddens",
     "64 is not allowed for RLlib's fcnet_hiddens (default [64, 64])"
     "; allowed: an array of integers >= 1, at least 1 item", True),
    ("PPO", {"fcnet_hiddens": []}, "fcnet_hiddens",
     "[] is not allowed for RLlib's fcnet_hiddens (default [64, 64])"
     "; allowed: an array of integers >= 1, at least 1 item", True),
    ("PPO", {"fcnet_hiddens": [64, 0]}, "fcnet_hiddens[1]",
     "0 is not allowed for RLlib's fcnet_hiddens (default [64, 64])"
     "; allowed: an array of integers >= 1, at least 1 item", True),
    ("PPO", {"fcnet_hiddens": [64, "a"]}, "fcnet_hiddens[1]",
     "'a' is not allowed for RLlib's fcnet_hiddens (default [64, 64])"
     "; allowed: an array of integers >= 1, at least 1 item", True),
    ("PPO", {"fcnet_hiddens": [64, True]}, "fcnet_hiddens[1]",
     "True is not allowed for RLlib's fcnet_hiddens (default [64, 64])"
     "; allowed: an array of integers >= 1, at least 1 item", True),
    ("PPO", {"fcnet_activation": "gelu"}, "fcnet_activation",
     "'gelu' is not allowed for RLlib's fcnet_activation (default 'tanh')"
     "; allowed: tanh, relu, swish, silu, elu, linear", True),
    ("PPO", {"grad_clip_by": "l2"}, "grad_clip_by",
     "'l2' is not allowed for RLlib's grad_clip_by (default 'global_norm'); allowed: value, norm, global_norm", True),
    ("PPO", {"grad_clip": "none"}, "grad_clip",
     "'none' is not allowed for RLlib's grad_clip (default None); allowed: null or a number > 0", True),
    ("PPO", {"grad_clip": 0}, "grad_clip",
     "0 is not allowed for RLlib's grad_clip (default None); allowed: null or a number > 0", True),
    ("PPO", {"rollout_fragment_length": "full"}, "rollout_fragment_length",
     "'full' is not allowed for RLlib's rollout_fragment_length (default 'auto')"
     "; allowed: an integer >= 1 or 'auto'", True),
    ("PPO", {"rollout_fragment_length": 0}, "rollout_fragment_length",
     "0 is not allowed for RLlib's rollout_fragment_length (default 'auto'); allowed: an integer >= 1 or 'auto'", True),
    ("PPO", {"rollout_fragment_length": None}, "rollout_fragment_length",
     "None is not allowed for RLlib's rollout_fragment_length (default 'auto')"
     "; allowed: an integer >= 1 or 'auto'", True),
    ("PPO", {"minibatch_size": 256, "train_batch_size_per_learner": 128}, "minibatch_size",
     "256 is above train_batch_size_per_learner (128)"
     "; RLlib requires minibatch_size <= train_batch_size_per_learner", False),
    ("DQN", {"epsilon_final": 1.5}, "epsilon_final",
     "1.5 is not allowed for RLlib's epsilon_final (default 0.05); allowed: a number from 0 to 1", True),
    ("DQN", {"epsilon_decay_timesteps": 0}, "epsilon_decay_timesteps",
     "0 is not allowed for RLlib's epsilon_decay_timesteps (default 10000); allowed: an integer >= 1", True),
    ("DQN", {"replay_buffer_capacity": 0}, "replay_buffer_capacity",
     "0 is not allowed for RLlib's replay_buffer_capacity (default 50000); allowed: an integer >= 1", True),
    ("DQN", {"td_error_loss_fn": "l1"}, "td_error_loss_fn",
     "'l1' is not allowed for RLlib's td_error_loss_fn (default 'huber'); allowed: huber, mse", True),
    ("DQN", {"n_step": 5, "rollout_fragment_length": 4}, "rollout_fragment_length",
     "4 is below n_step (5); RLlib requires rollout_fragment_length >= n_step", False),
    ("SAC", {"target_entropy": "high"}, "target_entropy",
     "'high' is not allowed for RLlib's target_entropy (default 'auto'); allowed: a number or 'auto'", True),
    ("SAC", {"tau": 0}, "tau",
     "0 is not allowed for RLlib's tau (default 0.005); allowed: a number > 0 and <= 1", True),
    ("SAC", {"tau": 1.5}, "tau",
     "1.5 is not allowed for RLlib's tau (default 0.005); allowed: a number > 0 and <= 1", True),
    ("SAC", {"initial_alpha": -0.1}, "initial_alpha",
     "-0.1 is not allowed for RLlib's initial_alpha (default 1.0); allowed: a number > 0", True),
    ("IMPALA", {"min_time_s_per_iteration": -1}, "min_time_s_per_iteration",
     "-1 is not allowed for RLlib's min_time_s_per_iteration (default 1); allowed: a number >= 0", True),
    ("IMPALA", {"vtrace_clip_rho_threshold": 0.0}, "vtrace_clip_rho_threshold",
     "0.0 is not allowed for RLlib's vtrace_clip_rho_threshold (default 1.0); allowed: a number > 0", True),
    ("APPO", {"circular_buffer_num_batches": 0}, "circular_buffer_num_batches",
     "0 is not allowed for RLlib's circular_buffer_num_batches (default 8); allowed: an integer >= 1", True),
    ("APPO", {"use_kl_loss": "yes"}, "use_kl_loss",
     "'yes' is not allowed for RLlib's use_kl_loss (default False); allowed: true or false", True),
    ("APPO", {"target_network_update_freq": 0}, "target_network_update_freq",
     "0 is not allowed for RLlib's target_network_update_freq (default 2); allowed: a number > 0", True),
]


@pytest.mark.parametrize("algorithm, params, key, message, schema_sees_it", BAD_INPUTS,
                         ids=[f"{a}-{k}-{i}" for i, (a, _, k, _, _) in enumerate(BAD_INPUTS)])
def test_bad_values_name_the_field_and_what_is_allowed(algorithm, params, key, message, schema_sees_it):
    with pytest.raises(ConfigError) as caught:
        ap.validate(algorithm, params)
    assert caught.value.field == f"{F}.{key}"
    assert str(caught.value) == f"{F}.{key}: {message}"
    # The published schema and our validator agree on everything JSON Schema can express.
    assert Draft202012Validator(ap.schema(algorithm)).is_valid(params) is not schema_sees_it


@pytest.mark.parametrize("algorithm, key, suggestion", [
    ("PPO", "clip_parm", "(did you mean 'clip_param'?)"),
    ("PPO", "lambda", "(did you mean 'lambda_'?)"),
    ("PPO", "num_sgd_iter", "(did you mean 'num_epochs'?)"),
    ("SAC", "lr", "(did you mean one of 'actor_lr', 'critic_lr', 'alpha_lr'?)"),
    ("DQN", "epsilon", "(did you mean one of 'epsilon_initial', 'epsilon_final', 'epsilon_decay_timesteps'?)"),
    ("DQN", "replay_buffer_config", "(did you mean 'replay_buffer_capacity'?)"),
])
def test_unknown_key_suggests_the_right_name_and_lists_all(algorithm, key, suggestion):
    with pytest.raises(ConfigError) as caught:
        ap.validate(algorithm, {key: 0.2})
    assert caught.value.field == f"{F}.{key}"
    assert str(caught.value) == (f"{F}.{key}: is not an option of RLlib's {algorithm} {suggestion}; "
                                 f"allowed: {', '.join(props(algorithm))}")


def test_unknown_key_without_a_near_miss_just_lists_the_allowed_names():
    with pytest.raises(ConfigError, match=r"^algo_params\.zzz: is not an option of RLlib's IMPALA; "
                                          r"allowed: lr, gamma, "):
        ap.validate("IMPALA", {"zzz": 1})


def test_params_must_be_an_object():
    with pytest.raises(ConfigError) as caught:
        ap.validate("PPO", [("lr", 0.1)])
    assert str(caught.value) == "algo_params: must be an object, got list"


def test_field_prefix_is_configurable():
    with pytest.raises(ConfigError) as caught:
        ap.validate("DQN", {"lr": -1}, field="agents.red.algo_params")
    assert caught.value.field == "agents.red.algo_params.lr"
    with pytest.raises(ConfigError) as caught:
        ap.validate("DQN", {}, version=2, field="agents.red.algo_params")
    assert caught.value.field == "agents.red.algo_params_version"


def test_schema_version():
    assert ap.validate("PPO", {}, version=1) == ap.defaults("PPO")
    with pytest.raises(ConfigError) as caught:
        ap.validate("PPO", {}, version=7)
    assert str(caught.value) == "rllib.algo_params_version: schema version 7 is not known for PPO; known: 1"
    for wrong in (True, "1", 0):  # True == 1 in Python, but it is not a version
        with pytest.raises(ConfigError, match="is not known for PPO; known: 1"):
            ap.validate("PPO", {}, version=wrong)


@pytest.mark.parametrize("call", [ap.schema, ap.schema_json, ap.defaults,
                                  lambda a: ap.validate(a, {}), lambda a: ap.to_rllib(a, {})])
def test_unknown_algorithm_lists_the_known_ones(call):
    with pytest.raises(ConfigError) as caught:
        call("A3C")
    assert caught.value.field == "algorithm"
    assert str(caught.value) == f"algorithm: 'A3C' is not one of {ALL}"
    assert str(caught.value) == f"algorithm: {mosaic.errors.one_of('A3C', [a.lower() for a in ap.algorithms()])}"
    with pytest.raises(ConfigError, match=f"None is not one of {ALL}"):
        call(None)


def test_algorithm_names_are_case_insensitive():
    assert ap.schema("ppo")["x-algorithm"] == "PPO"
    assert ap.to_rllib("appo", {}) == ap.to_rllib("APPO", {})
    assert ap.rllib_name("ppo") == "PPO" and ap.rllib_name("A2c") == "A2C"


# --------------------------------------------------------------------------
# to_rllib()
# --------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ap.ALGORITHMS)
def test_to_rllib_places_every_value_in_its_section(algorithm):
    sections = ap.to_rllib(algorithm, {})
    assert set(sections) == {"training", "env_runners", "reporting", "model"}
    assert sections["model"] == {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "fcnet_use_layernorm": False,
                                 "fcnet_kernel_initializer": None, "fcnet_bias_initializer": None}
    assert "rollout_fragment_length" in sections["env_runners"]
    placed = {(section, name) for section, kwargs in sections.items() for name in kwargs}
    # Exactly the RLlib names the schema announces: nothing missing, nothing of ours leaking through.
    assert placed == {(p["x-rllib"]["section"], p["x-rllib"]["name"]) for p in props(algorithm).values()}


def test_dqn_epsilon_becomes_an_rllib_schedule_and_capacity_merges():
    training = ap.to_rllib("DQN", {"epsilon_initial": 0.9, "epsilon_final": 0.1, "epsilon_decay_timesteps": 2000,
                                   "replay_buffer_capacity": 1234})["training"]
    assert training["epsilon"] == [[0, 0.9], [2000, 0.1]]
    assert not any(name.startswith("epsilon_") for name in training)
    assert training["replay_buffer_config"] == {"capacity": 1234}  # the buffer type is the runtime's


def test_to_rllib_validates_and_fills_defaults():
    with pytest.raises(ConfigError, match=r"^algo_params\.lr: -1 is not allowed for RLlib's lr \(default 0\.0003\); "
                                          r"allowed: a number > 0 and <= 1$"):
        ap.to_rllib("PPO", {"lr": -1})
    sections = ap.to_rllib("SAC", {"actor_lr": 1e-3})
    assert "lr" not in sections["training"] and sections["training"]["actor_lr"] == 1e-3
    assert sections["training"]["critic_lr"] == props("SAC")["critic_lr"]["default"]
    assert ap.to_rllib("IMPALA", {})["reporting"] == {"min_time_s_per_iteration": 1.0}


# --------------------------------------------------------------------------
# register()
# --------------------------------------------------------------------------

@pytest.fixture
def registry(monkeypatch):
    """Registrations in a test must not leak into other tests."""
    monkeypatch.setattr(ap, "_REGISTRY", dict(ap._REGISTRY))
    return ap


def _entropy(**changes: Any) -> dict[str, Any]:
    prop = {"type": "number", "default": 0.01, "minimum": 0, "description": "Weight of the entropy bonus.",
            "x-category": "loss", "x-rllib": {"section": "training", "name": "entropy_coeff"}}
    return {**prop, **changes}


def test_register_adds_an_algorithm_everywhere(registry):
    before = registry.algorithms()
    registry.register("VPG", {**registry.common_properties(lr=1e-3), "entropy_coeff": _entropy()})
    assert registry.algorithms() == (*before, "VPG")
    Draft202012Validator.check_schema(registry.schema("VPG"))
    assert registry.validate("VPG", {"entropy_coeff": 0.1})["entropy_coeff"] == 0.1
    assert registry.to_rllib("VPG", {})["training"]["lr"] == 1e-3
    with pytest.raises(ConfigError, match=r"^algo_params\.entropy_coeff: -1 is not allowed for RLlib's entropy_coeff "
                                          r"\(default 0\.01\); allowed: a number >= 0$"):
        registry.validate("VPG", {"entropy_coeff": -1})
    with pytest.raises(ConfigError, match=f"is not one of {ALL}, vpg$"):
        registry.schema("A3C")


def test_an_algorithm_registers_with_the_kits_upstream_options_too(registry):
    """The table is the worker kit's UpstreamOption: one given as an option, not a schema property, is the same."""
    from mosaic.workerkit.options import UpstreamOption

    entropy = UpstreamOption("entropy_coeff", 0.01, "RLlib", "Weight of the entropy bonus.", minimum=0,
                             annotations={"x-category": "loss",
                                          "x-rllib": {"section": "training", "name": "entropy_coeff"}})
    registry.register("VPG", {**registry.common_properties(lr=1e-3), "entropy_coeff": entropy})
    assert registry.schema("VPG")["properties"]["entropy_coeff"] == {**_entropy(), "default": 0.01}
    assert registry.validate("VPG", {"entropy_coeff": 1})["entropy_coeff"] == 1.0
    with pytest.raises(ConfigError, match=r"^algo_params\.entropy_coeff: -1 is not allowed for RLlib's entropy_coeff "
                                          r"\(default 0\.01\); allowed: a number >= 0$"):
        registry.validate("VPG", {"entropy_coeff": -1})


@pytest.mark.parametrize("name, properties, complaint", [
    ("ppo", {"entropy_coeff": _entropy()}, "already registered"),
    ("", {"entropy_coeff": _entropy()}, "empty"),
    ("VPG", {}, "at least one"),
    ("VPG", {"entropy_coeff": {k: v for k, v in _entropy().items() if k != "x-rllib"}}, "missing x-rllib"),
    ("VPG", {"entropy_coeff": _entropy(default=-1)}, "default is invalid"),
    ("VPG", {"entropy_coeff": _entropy(type="float")}, "type must be among"),
    ("VPG", {"entropy_coeff": _entropy(**{"x-category": "misc"})}, "x-category 'misc' is not one of"),
    ("VPG", {"entropy_coeff": _entropy(**{"x-rllib": {"section": "learners", "name": "x"}})}, "section among"),
    ("VPG", {"entropy_coeff": _entropy(**{"x-rllib": {"section": "training", "name": "eps", "schedule": "start"}})},
     "needs exactly the parts start, end, steps"),
    ("VPG", {"entropy_coeff": _entropy(**{"x-at-most": "nothing"})}, "unknown property 'nothing'"),
])
def test_register_rejects_what_the_gui_or_rllib_could_not_use(registry, name, properties, complaint):
    with pytest.raises(ValueError, match=complaint):
        registry.register(name, properties)
    assert registry.algorithms() == (*ap.ALGORITHMS, *ap.EXTRA_ALGORITHMS)


def test_common_properties_reject_unknown_rllib_default_notes():
    with pytest.raises(ValueError, match="unknown common properties: momentum"):
        ap.common_properties(rllib_defaults={"momentum": 0.9})


def test_module_imports_without_ray_or_torch():
    """The CLI and GUI read schemas without the worker's heavy dependencies."""
    paths = [str(Path(ap.__file__).resolve().parents[1]), str(Path(mosaic.errors.__file__).resolve().parents[1])]
    code = ("import sys, ray_worker.algo_params as m; "
            "heavy = sorted({'ray', 'torch', 'jsonschema'} & set(sys.modules)); "
            "assert not heavy, heavy; print(len(m.schema_json('PPO')) > 0)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True"


# --------------------------------------------------------------------------
# Against the real RLlib 2.60 config classes.
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rllib() -> SimpleNamespace:
    pytest.importorskip("ray.rllib")
    from ray.rllib.algorithms.appo import APPOConfig
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.algorithms.impala import IMPALAConfig
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.algorithms.sac import SACConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.utils.schedules.scheduler import Scheduler

    return SimpleNamespace(configs={"PPO": PPOConfig, "DQN": DQNConfig, "IMPALA": IMPALAConfig, "APPO": APPOConfig,
                                    "SAC": SACConfig},
                           DefaultModelConfig=DefaultModelConfig, Scheduler=Scheduler)


# Every value here differs from the default, so a value RLlib drops would show.
NON_DEFAULT = {
    "PPO": {"lr": 1e-3, "gamma": 0.95, "train_batch_size_per_learner": 256, "minibatch_size": 64, "num_epochs": 2,
            "lambda_": 0.9, "clip_param": 0.1, "vf_clip_param": 5.0, "vf_loss_coeff": 0.5, "entropy_coeff": 0.01,
            "use_kl_loss": False, "kl_coeff": 0.3, "kl_target": 0.02, "grad_clip": 0.5, "grad_clip_by": "norm",
            "rollout_fragment_length": 128, "fcnet_hiddens": [32], "fcnet_activation": "relu"},
    "DQN": {"replay_buffer_capacity": 1000, "target_network_update_freq": 100, "n_step": 3, "double_q": False,
            "dueling": False, "epsilon_initial": 0.5, "epsilon_final": 0.01, "epsilon_decay_timesteps": 500,
            "num_steps_sampled_before_learning_starts": 50, "training_intensity": 2.0, "tau": 0.5,
            "td_error_loss_fn": "mse", "grad_clip": None, "rollout_fragment_length": 4},
    "SAC": {"tau": 0.01, "initial_alpha": 0.2, "target_entropy": -2.0, "actor_lr": 1e-4, "critic_lr": 2e-4,
            "alpha_lr": 5e-4, "replay_buffer_capacity": 5000, "n_step": 2, "twin_q": False, "grad_clip": 10.0,
            "num_steps_sampled_before_learning_starts": 10, "fcnet_hiddens": [16, 16], "rollout_fragment_length": 2},
    "IMPALA": {"vtrace_clip_rho_threshold": 2.0, "vtrace_clip_pg_rho_threshold": 0.5, "vf_loss_coeff": 0.25,
               "entropy_coeff": 0.0, "min_time_s_per_iteration": 0.5, "rollout_fragment_length": "auto",
               "train_batch_size_per_learner": 64, "fcnet_activation": "swish"},
    "APPO": {"clip_param": 0.2, "use_kl_loss": True, "kl_coeff": 0.5, "kl_target": 0.05, "vf_loss_coeff": 1.0,
             "entropy_coeff": 0.05, "target_network_update_freq": 0.5, "tau": 0.9, "use_circular_buffer": False,
             "circular_buffer_num_batches": 4, "circular_buffer_iterations_per_batch": 1,
             "min_time_s_per_iteration": 2},
}


def _held(config: Any, model: Any, prop: dict[str, Any]) -> Any:
    """The value RLlib actually holds for one of our properties."""
    where = prop["x-rllib"]
    if where["section"] == "model":
        return getattr(model, where["name"])
    held = getattr(config, where["name"])
    if "key" in where:
        return held[where["key"]]
    if "schedule" in where:
        (t0, start), (steps, end) = held
        assert t0 == 0
        return {"start": start, "end": end, "steps": steps}[where["schedule"]]
    return held


def test_non_default_cases_really_differ_from_the_defaults():
    for algorithm, params in NON_DEFAULT.items():
        defaults = ap.defaults(algorithm)
        same = [key for key, value in params.items() if defaults[key] == value]
        assert not same, f"{algorithm}: {same} equal the defaults"


@pytest.mark.parametrize("case", ["defaults", "custom"])
@pytest.mark.parametrize("algorithm", ap.ALGORITHMS)
def test_real_rllib_configs_accept_and_hold_the_values(rllib, algorithm, case):
    params = {} if case == "defaults" else NON_DEFAULT[algorithm]
    sections = ap.to_rllib(algorithm, params)
    config = rllib.configs[algorithm]()
    for section in ("training", "env_runners", "reporting"):
        getattr(config, section)(**sections[section])
    model = rllib.DefaultModelConfig(**sections["model"])
    config.rl_module(model_config=model)
    config.validate()  # RLlib's own cross-checks (batch sizes, n_step, SAC's lr=None, ...)

    expected = ap.validate(algorithm, params)
    for key, prop in props(algorithm).items():
        assert _held(config, model, prop) == expected[key], f"{algorithm}.{key}"
    if algorithm == "DQN":
        rllib.Scheduler.validate(fixed_value_or_schedule=config.epsilon, setting_name="epsilon",
                                 description="epsilon")
        # Only the capacity was merged in; RLlib kept its buffer type for the runtime to replace.
        assert config.replay_buffer_config["type"] == rllib.configs["DQN"]().replay_buffer_config["type"]


def test_ppo_lambda_reaches_the_config(rllib):
    config = rllib.configs["PPO"]().training(**ap.to_rllib("PPO", {"lambda_": 0.8})["training"])
    assert config.lambda_ == 0.8


@pytest.mark.parametrize("algorithm", ap.ALGORITHMS)
def test_defaults_match_rllib_unless_marked(rllib, algorithm):
    """Catches RLlib changing a default (or us misquoting one) on a Ray upgrade."""
    config, model = rllib.configs[algorithm](), rllib.DefaultModelConfig()
    for key, prop in props(algorithm).items():
        rllib_default = prop.get("x-rllib-default", prop["default"])
        assert _held(config, model, prop) == rllib_default, f"{algorithm}.{key}"
