"""Hyperparameters of the RLlib algorithms MOSAIC trains, as versioned JSON Schemas.

One table per algorithm is the single source of truth for three consumers:

* the GUI, which renders a form from :func:`schema` (every property carries its
  type, default, bounds, a one-sentence description, a category and the RLlib
  setting it feeds);
* config loading, where :func:`validate` fills defaults and reports mistakes as
  :class:`~mosaic.errors.ConfigError` naming the field and what is allowed (each
  property is the worker kit's :class:`~mosaic.workerkit.options.UpstreamOption`,
  checked by the kit's :func:`~mosaic.workerkit.options.check_options`);
* the runtime, where :func:`to_rllib` turns validated values into keyword
  arguments for ``AlgorithmConfig.training()/.env_runners()/.reporting()`` and
  ``DefaultModelConfig``.

Defaults follow RLlib 2.60's own defaults, except where a smaller or faster value
suits CPU multi-agent training; those properties say so with ``x-rllib-default``
(RLlib's value), so nobody mistakes our default for RLlib's.

This module deliberately imports neither Ray nor torch: the core, the CLI
(``--schema``) and the GUI must be able to read it without the worker's heavy
dependencies installed.
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping

from mosaic.errors import ConfigError, one_of
from mosaic.workerkit.options import UpstreamOption, check_options

__all__ = [
    "ALGORITHMS", "CATEGORIES", "SCHEMA_VERSION", "SECTIONS", "algorithms", "common_properties",
    "defaults", "register", "rllib_name", "schema", "schema_json", "to_rllib", "validate",
]

SCHEMA_VERSION = 1
ALGORITHMS = ("PPO", "DQN", "IMPALA", "APPO", "SAC")

# Where a value can go in RLlib: AlgorithmConfig.<section>(**kwargs), or
# DefaultModelConfig(**kwargs) for "model".
SECTIONS = ("training", "env_runners", "reporting", "model")
# Groups for the GUI; a closed list so forms stay tidy.
CATEGORIES = ("optimisation", "loss", "rollout", "exploration", "replay", "model", "reporting")

_REQUIRED_KEYS = ("type", "default", "description", "x-category", "x-rllib")
_SCHEDULE_PARTS = ("start", "end", "steps")
_UNSET = object()
#: torch.nn.init's in-place initialisers that take only the tensor (RLlib's ``*_initializer`` model keys).
INITIALIZERS = ("orthogonal_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
                "zeros_", "ones_")


# --------------------------------------------------------------------------
# Property builders: keep the tables below short and uniform.
# --------------------------------------------------------------------------

def _at(section: str, name: str, **extra: str) -> dict[str, str]:
    """The ``x-rllib`` location of a value (``key``/``schedule`` for nested ones)."""
    return {"section": section, "name": name, **extra}


def _prop(type_: str | list[str], default: Any, description: str, category: str,
          rllib: dict[str, str], *, rllib_default: Any = _UNSET, **keywords: Any) -> dict[str, Any]:
    """One schema property; ``keywords`` are JSON Schema keywords (``minimum=0``...)."""
    prop: dict[str, Any] = {"type": type_, "default": default, **keywords,
                            "description": description, "x-category": category, "x-rllib": rllib}
    if rllib_default is not _UNSET:
        prop["x-rllib-default"] = rllib_default
    return prop


def common_properties(*, lr: float | None = 5e-4, train_batch_size_per_learner: int = 500,
                      grad_clip: float | None = 40.0, rollout_fragment_length: int | str = "auto",
                      rllib_defaults: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
    """Properties every algorithm shares, with per-algorithm defaults.

    ``lr=None`` leaves the learning rate out (SAC has one per network instead).
    ``rllib_defaults`` records RLlib's value where ours differs. Public so an
    extension registering another algorithm can start from the same base.
    """
    differs = dict(rllib_defaults or {})

    def note(name: str) -> dict[str, Any]:
        return {"rllib_default": differs.pop(name)} if name in differs else {}

    props: dict[str, dict[str, Any]] = {}
    if lr is not None:
        props["lr"] = _prop("number", lr, "Adam learning rate of the trained networks.", "optimisation",
                            _at("training", "lr"), exclusiveMinimum=0, maximum=1, **note("lr"))
    props["gamma"] = _prop("number", 0.99, "Discount factor applied to future rewards.", "loss",
                           _at("training", "gamma"), minimum=0, maximum=1, **note("gamma"))
    props["train_batch_size_per_learner"] = _prop(
        "integer", train_batch_size_per_learner,
        "Timesteps in each train batch per learner (the batch one update step consumes).",
        "optimisation", _at("training", "train_batch_size_per_learner"), minimum=1,
        **note("train_batch_size_per_learner"))
    props["grad_clip"] = _prop(
        ["number", "null"], grad_clip,
        "Gradient clipping threshold applied as set by grad_clip_by; null disables clipping.",
        "optimisation", _at("training", "grad_clip"), exclusiveMinimum=0, **note("grad_clip"))
    props["grad_clip_by"] = _prop(
        "string", "global_norm",
        "Whether grad_clip bounds each gradient value, each tensor's L2 norm "
        "or the global L2 norm of all gradients.",
        "optimisation", _at("training", "grad_clip_by"), enum=["value", "norm", "global_norm"])
    props["rollout_fragment_length"] = _prop(
        ["integer", "string"], rollout_fragment_length,
        "Timesteps each environment runner collects per sample call; "
        "'auto' splits the train batch evenly across runners and environments.",
        "rollout", _at("env_runners", "rollout_fragment_length"), minimum=1,
        anyOf=[{"type": "integer"}, {"const": "auto"}], **note("rollout_fragment_length"))
    props["sample_timeout_s"] = _prop(
        "number", 60.0, "Seconds the driver waits for remote env runners' samples in one call before it "
        "goes on without them (a slow env needs more).", "rollout", _at("env_runners", "sample_timeout_s"),
        exclusiveMinimum=0)
    props["fcnet_hiddens"] = _prop(
        "array", [64, 64], "Sizes of the hidden layers of the fully connected network, input to output.",
        "model", _at("model", "fcnet_hiddens"), items={"type": "integer", "minimum": 1}, minItems=1,
        rllib_default=[256, 256])
    props["fcnet_activation"] = _prop(
        "string", "tanh", "Activation function between the hidden layers.", "model",
        _at("model", "fcnet_activation"), enum=["tanh", "relu", "swish", "silu", "elu", "linear"])
    props["fcnet_use_layernorm"] = _prop(
        "boolean", False, "A LayerNorm in every hidden layer (after its linear transform, before the activation).",
        "model", _at("model", "fcnet_use_layernorm"))
    for name, part in (("fcnet_kernel_initializer", "weights"), ("fcnet_bias_initializer", "biases")):
        props[name] = _prop(
            ["string", "null"], None, f"The initialiser of the hidden layers' {part}, a torch.nn.init in-place "
            "name (the output heads keep torch's default; null keeps it everywhere).", "model", _at("model", name),
            enum=[None, *INITIALIZERS])
    if differs:
        raise ValueError(f"rllib_defaults for unknown common properties: {', '.join(differs)}")
    return props


def _replay(capacity: int, learning_starts: int, *, rllib_capacity: Any = _UNSET) -> dict[str, dict[str, Any]]:
    """Replay settings of the off-policy algorithms (the buffer *type* is the runtime's)."""
    return {
        "replay_buffer_capacity": _prop(
            "integer", capacity, "Maximum number of timesteps the replay buffer holds before evicting the oldest.",
            "replay", _at("training", "replay_buffer_config", key="capacity"), minimum=1,
            rllib_default=rllib_capacity),
        "num_steps_sampled_before_learning_starts": _prop(
            "integer", learning_starts, "Timesteps to collect into the replay buffer before the first update.",
            "replay", _at("training", "num_steps_sampled_before_learning_starts"), minimum=0),
        "training_intensity": _prop(
            ["number", "null"], None,
            "Ratio of trained to newly sampled timesteps to maintain; "
            "null keeps the natural ratio of batch to fragment size.",
            "replay", _at("training", "training_intensity"), exclusiveMinimum=0),
        "n_step": _prop(
            "integer", 1, "Number of steps summed into each bootstrapped return target.", "loss",
            _at("training", "n_step"), minimum=1),
    }


# --------------------------------------------------------------------------
# The built-in algorithms.
# --------------------------------------------------------------------------

def _loss_weights(*, vf_loss_coeff: float, entropy_coeff: float) -> dict[str, dict[str, Any]]:
    """The value-loss and entropy weights of the actor-critic algorithms."""
    return {
        "vf_loss_coeff": _prop(
            "number", vf_loss_coeff, "Weight of the value-function loss in the total loss.", "loss",
            _at("training", "vf_loss_coeff"), minimum=0),
        "entropy_coeff": _prop(
            "number", entropy_coeff, "Weight of the entropy bonus that keeps the policy exploring.", "loss",
            _at("training", "entropy_coeff"), minimum=0),
    }


def _n_step_fragments(props: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """DQN and SAC sample fragments of whole n-step windows; their 'auto' is n_step."""
    fragment = props["rollout_fragment_length"]
    fragment["description"] = "Timesteps each environment runner collects per sample call; 'auto' uses n_step."
    fragment["x-at-least"] = "n_step"
    return props


def _ppo() -> dict[str, dict[str, Any]]:
    """PPO, with a faster learning rate and smaller batches than RLlib's defaults (marked)."""
    return {
        **common_properties(lr=3e-4, train_batch_size_per_learner=1000, grad_clip=None,
                            rllib_defaults={"lr": 5e-5, "train_batch_size_per_learner": 4000}),
        "minibatch_size": _prop(
            "integer", 128, "Timesteps per minibatch the train batch is split into for each epoch.",
            "optimisation", _at("training", "minibatch_size"), minimum=1,
            **{"x-at-most": "train_batch_size_per_learner"}),
        "num_epochs": _prop(
            "integer", 10, "Passes of minibatch updates over each train batch.", "optimisation",
            _at("training", "num_epochs"), minimum=1, rllib_default=30),
        "lambda_": _prop(
            "number", 0.95, "GAE lambda: lower values trade variance of the advantage estimate for bias.",
            "loss", _at("training", "lambda_"), minimum=0, maximum=1, rllib_default=1.0),
        "use_gae": _prop(
            "boolean", True,
            "Whether advantages come from Generalised Advantage Estimation with the value function "
            "(RLlib requires it for truncated episodes).",
            "loss", _at("training", "use_gae")),
        "clip_param": _prop(
            "number", 0.3, "Clipping range of the probability ratio in the PPO surrogate objective.", "loss",
            _at("training", "clip_param"), exclusiveMinimum=0),
        "vf_clip_param": _prop(
            "number", 10.0,
            "Clipping range of the value-function loss, in units of return (scale it with your rewards).",
            "loss", _at("training", "vf_clip_param"), exclusiveMinimum=0),
        **_loss_weights(vf_loss_coeff=1.0, entropy_coeff=0.0),
        "use_kl_loss": _prop(
            "boolean", True, "Whether to add an adaptive KL penalty between the old and new policy to the loss.",
            "loss", _at("training", "use_kl_loss")),
        "kl_coeff": _prop(
            "number", 0.2, "Initial weight of the KL penalty, adapted during training towards kl_target.", "loss",
            _at("training", "kl_coeff"), minimum=0),
        "kl_target": _prop(
            "number", 0.01, "KL divergence per update that the adaptive KL weight aims for.", "loss",
            _at("training", "kl_target"), exclusiveMinimum=0),
    }


def _dqn() -> dict[str, dict[str, Any]]:
    """DQN; the epsilon schedule is three plain numbers here, which to_rllib assembles."""
    props = {
        **common_properties(lr=5e-4, train_batch_size_per_learner=32, grad_clip=40.0),
        **_replay(50_000, 1000),
        "target_network_update_freq": _prop(
            "integer", 500, "Sampled timesteps between two updates of the target Q-network.", "loss",
            _at("training", "target_network_update_freq"), minimum=0),
        "tau": _prop(
            "number", 1.0,
            "Fraction of the online weights blended into the target network per update (1 copies them).",
            "loss", _at("training", "tau"), exclusiveMinimum=0, maximum=1),
        "double_q": _prop(
            "boolean", True, "Whether the online network picks the next action for the target (Double DQN).",
            "loss", _at("training", "double_q")),
        "dueling": _prop(
            "boolean", True,
            "Whether the Q-network has separate value and advantage streams (dueling architecture).",
            "model", _at("training", "dueling")),
        "td_error_loss_fn": _prop(
            "string", "huber", "Loss applied to the temporal-difference error.", "loss",
            _at("training", "td_error_loss_fn"), enum=["huber", "mse"]),
        "epsilon_initial": _prop(
            "number", 1.0, "Probability of a random action at the start of training.", "exploration",
            _at("training", "epsilon", schedule="start"), minimum=0, maximum=1),
        "epsilon_final": _prop(
            "number", 0.05, "Probability of a random action once the decay has finished.", "exploration",
            _at("training", "epsilon", schedule="end"), minimum=0, maximum=1),
        "epsilon_decay_timesteps": _prop(
            "integer", 10_000,
            "Timesteps over which the random-action probability falls linearly from initial to final.",
            "exploration", _at("training", "epsilon", schedule="steps"), minimum=1),
    }
    return _n_step_fragments(props)


def _sac() -> dict[str, dict[str, Any]]:
    """SAC; a smaller replay buffer than RLlib's million timesteps to spare CPU-box memory."""
    props = {
        # RLlib's SAC refuses the shared `lr`: each network has its own rate.
        **common_properties(lr=None, train_batch_size_per_learner=256, grad_clip=None),
        "actor_lr": _prop(
            "number", 3e-4, "Learning rate of the policy (actor) network.", "optimisation",
            _at("training", "actor_lr"), exclusiveMinimum=0, maximum=1, rllib_default=3e-5),
        "critic_lr": _prop(
            "number", 3e-4, "Learning rate of the Q (critic) networks.", "optimisation",
            _at("training", "critic_lr"), exclusiveMinimum=0, maximum=1),
        "alpha_lr": _prop(
            "number", 3e-4, "Learning rate of the entropy temperature alpha.", "optimisation",
            _at("training", "alpha_lr"), exclusiveMinimum=0, maximum=1),
        **_replay(100_000, 1500, rllib_capacity=1_000_000),
        "tau": _prop(
            "number", 0.005, "Fraction of the online critic weights blended into the target critic per update.",
            "loss", _at("training", "tau"), exclusiveMinimum=0, maximum=1),
        "initial_alpha": _prop(
            "number", 1.0, "Starting value of the entropy temperature alpha.", "exploration",
            _at("training", "initial_alpha"), exclusiveMinimum=0),
        "target_entropy": _prop(
            ["number", "string"], "auto",
            "Policy entropy that alpha is tuned towards; 'auto' uses minus the number of action dimensions.",
            "exploration", _at("training", "target_entropy"), anyOf=[{"type": "number"}, {"const": "auto"}]),
        "twin_q": _prop(
            "boolean", True, "Whether to learn two critics and use the smaller estimate (clipped double Q).",
            "model", _at("training", "twin_q")),
    }
    return _n_step_fragments(props)


def _impala() -> dict[str, dict[str, Any]]:
    """IMPALA's set, which APPO extends: V-trace, loss weights and short iterations."""
    return {
        **common_properties(lr=5e-4, train_batch_size_per_learner=500, grad_clip=40.0,
                            rollout_fragment_length=50),
        "vtrace_clip_rho_threshold": _prop(
            "number", 1.0, "Upper clip of the importance weights in the V-trace value targets.", "loss",
            _at("training", "vtrace_clip_rho_threshold"), exclusiveMinimum=0),
        "vtrace_clip_pg_rho_threshold": _prop(
            "number", 1.0, "Upper clip of the importance weights in the V-trace policy-gradient advantages.",
            "loss", _at("training", "vtrace_clip_pg_rho_threshold"), exclusiveMinimum=0),
        **_loss_weights(vf_loss_coeff=0.5, entropy_coeff=0.01),
        "min_time_s_per_iteration": _prop(
            "number", 1, "Minimum wall-clock seconds one training iteration (one metrics report) lasts.",
            "reporting", _at("reporting", "min_time_s_per_iteration"), minimum=0, rllib_default=10),
    }


def _appo() -> dict[str, dict[str, Any]]:
    """APPO: IMPALA plus PPO-style clipping, a target network and the learner's circular buffer."""
    return {
        **_impala(),
        "clip_param": _prop(
            "number", 0.4, "Clipping range of the probability ratio in the PPO-style surrogate objective.",
            "loss", _at("training", "clip_param"), exclusiveMinimum=0),
        "use_kl_loss": _prop(
            "boolean", False, "Whether to add a KL penalty between the target and current policy to the loss.",
            "loss", _at("training", "use_kl_loss")),
        "kl_coeff": _prop(
            "number", 1.0, "Initial weight of the KL penalty, adapted during training towards kl_target.",
            "loss", _at("training", "kl_coeff"), minimum=0),
        "kl_target": _prop(
            "number", 0.01, "KL divergence per update that the adaptive KL weight aims for.", "loss",
            _at("training", "kl_target"), exclusiveMinimum=0),
        "target_network_update_freq": _prop(
            "number", 2,
            "Target-network update period, in units of circular_buffer_num_batches "
            "x circular_buffer_iterations_per_batch x train_batch_size_per_learner timesteps.",
            "loss", _at("training", "target_network_update_freq"), exclusiveMinimum=0),
        "tau": _prop(
            "number", 1.0,
            "Fraction of the current weights blended into the target network per update (1 copies them).",
            "loss", _at("training", "tau"), exclusiveMinimum=0, maximum=1),
        "use_circular_buffer": _prop(
            "boolean", True,
            "Whether learners draw train batches from a circular buffer (else from a plain queue).",
            "optimisation", _at("training", "use_circular_buffer")),
        "circular_buffer_num_batches": _prop(
            "integer", 8, "Number of train batches the learner's circular buffer holds.", "optimisation",
            _at("training", "circular_buffer_num_batches"), minimum=1),
        "circular_buffer_iterations_per_batch": _prop(
            "integer", 2, "Maximum number of updates any one batch in the circular buffer is used for.",
            "optimisation", _at("training", "circular_buffer_iterations_per_batch"), minimum=1),
    }


# --------------------------------------------------------------------------
# Registry.
# --------------------------------------------------------------------------

# Filled at the end of the module: each algorithm's options, by name.
_REGISTRY: dict[str, dict[str, UpstreamOption]] = {}
LIBRARY = "RLlib"


def algorithms() -> tuple[str, ...]:
    """Built-in algorithms first, then registered ones in registration order."""
    return tuple(_REGISTRY)


def register(name: str, properties: Mapping[str, Mapping[str, Any] | UpstreamOption]) -> None:
    """Add another algorithm (e.g. "A2C") with its hyperparameters: JSON Schema properties (as
    :func:`common_properties` gives them) or upstream options.

    Mistakes here are programming errors, so they raise ``ValueError`` at import
    time of the registering module instead of surfacing later as a user error.
    """
    if not isinstance(name, str) or not name or name.upper() in (a.upper() for a in _REGISTRY):
        raise ValueError(f"algorithm name {name!r} is empty or already registered")
    props = {str(k): v.schema() if isinstance(v, UpstreamOption) else copy.deepcopy(dict(v))
             for k, v in properties.items()}
    if not props:
        raise ValueError(f"{name}: at least one hyperparameter is needed")
    options: dict[str, UpstreamOption] = {}
    schedules: dict[tuple[str, str], set[str]] = {}
    for key, prop in props.items():
        options[key] = _option(name, key, prop, props)
        rllib = prop["x-rllib"]
        if "schedule" in rllib:
            schedules.setdefault((rllib["section"], rllib["name"]), set()).add(rllib["schedule"])
    for (section, target), parts in schedules.items():
        if parts != set(_SCHEDULE_PARTS):
            raise ValueError(f"{name}: schedule {section}.{target} needs exactly the parts "
                             f"{', '.join(_SCHEDULE_PARTS)}")
    try:
        _check_links({key: option.default for key, option in options.items()}, options, name)
    except ConfigError as exc:
        raise ValueError(f"defaults contradict each other: {exc}") from None
    _REGISTRY[name] = options


def _option(algorithm: str, key: str, prop: dict[str, Any], props: Mapping[str, Any]) -> UpstreamOption:
    """The upstream option a property describes; ``ValueError`` for one the GUI, the check or the RLlib mapping
    could not handle."""
    where = f"{algorithm}.{key}"
    missing = [k for k in _REQUIRED_KEYS if k not in prop]
    if missing:
        raise ValueError(f"{where}: missing {', '.join(missing)}")
    try:
        option = UpstreamOption.from_schema(key, prop, LIBRARY)
    except ValueError as exc:
        raise ValueError(f"{algorithm}.{exc}") from None
    if prop["x-category"] not in CATEGORIES:
        raise ValueError(f"{where}: x-category {one_of(prop['x-category'], CATEGORIES)}")
    rllib = prop["x-rllib"]
    if not isinstance(rllib, Mapping) or rllib.get("section") not in SECTIONS or not rllib.get("name"):
        raise ValueError(f"{where}: x-rllib needs a section among {', '.join(SECTIONS)} and a name")
    if rllib.get("schedule", _SCHEDULE_PARTS[0]) not in _SCHEDULE_PARTS:
        raise ValueError(f"{where}: x-rllib schedule {one_of(rllib['schedule'], _SCHEDULE_PARTS)}")
    if not isinstance(prop["description"], str) or not prop["description"].strip():
        raise ValueError(f"{where}: description must be a non-empty sentence")
    for link in ("x-at-most", "x-at-least"):
        if link in prop and prop[link] not in props:
            raise ValueError(f"{where}: {link} names unknown property {prop[link]!r}")
    try:
        option.check(option.default, key)
    except ConfigError as exc:
        raise ValueError(f"{where}: default is invalid: {exc}") from None
    return option


# --------------------------------------------------------------------------
# Public API.
# --------------------------------------------------------------------------

def _lookup(algorithm: object) -> str:
    """Canonical registered name (case-insensitive), or the standard user error."""
    if isinstance(algorithm, str):
        for name in _REGISTRY:
            if name.upper() == algorithm.upper():
                return name
    raise ConfigError("algorithm", one_of(algorithm, tuple(a.lower() for a in algorithms())))


def rllib_name(algorithm: str) -> str:
    """The registered (RLlib) name of ``algorithm`` in any case: ``ppo`` -> ``PPO``."""
    return _lookup(algorithm)


def schema(algorithm: str) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of ``algorithm``'s hyperparameters; a fresh copy."""
    name = _lookup(algorithm)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"urn:mosaic:ray-worker:algo-params:{name}:v{SCHEMA_VERSION}",
        "title": f"{name} hyperparameters (RLlib)",
        "description": f"Hyperparameters of RLlib's {name}; every property is optional and has a default.",
        "type": "object",
        "additionalProperties": False,
        "x-schema-version": SCHEMA_VERSION,
        "x-algorithm": name,
        "properties": {key: copy.deepcopy(option.schema()) for key, option in _REGISTRY[name].items()},
    }


def schema_json(algorithm: str) -> str:
    """:func:`schema` as indented JSON, for ``--schema`` and the GUI."""
    return json.dumps(schema(algorithm), indent=2)


def defaults(algorithm: str) -> dict[str, Any]:
    """Every hyperparameter at its default."""
    return validate(algorithm, {})


def validate(algorithm: str, params: Mapping[str, Any] | None, *, version: int | None = None,
             field: str = "algo_params", version_field: str | None = None) -> dict[str, Any]:
    """Check ``params`` against the schema and return ALL values, defaults filled in.

    Integral floats become integers and numbers become floats, so the result is
    what :func:`to_rllib` and RLlib expect. The input is never modified.
    """
    name = _lookup(algorithm)
    if version is not None and (isinstance(version, bool) or version != SCHEMA_VERSION):
        where = version_field or ("rllib.algo_params_version" if field == "algo_params" else f"{field}_version")
        raise ConfigError(where,
                          f"schema version {version!r} is not known for {name}; known: {SCHEMA_VERSION}")
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise ConfigError(field, f"must be an object, got {type(params).__name__}")
    options = _REGISTRY[name]
    given = check_options(field, params, options, f"{LIBRARY}'s {name}", hint=lambda key: _suggest(key, options))
    values = {key: given[key] if key in given else option.check(option.default, f"{field}.{key}")
              for key, option in options.items()}
    _check_links(values, options, field)
    return values


# Old-API-stack names people paste from older RLlib examples.
_RENAMED = {"num_sgd_iter": "num_epochs", "sgd_minibatch_size": "minibatch_size"}


def _suggest(key: str, props: Mapping[str, Any]) -> str:
    """The names a renamed or split-up RLlib setting goes by here ('' for any other: the kit then says where a
    name a shared field sets is, else the closest spelling).

    Split-ups: RLlib's ``lr`` is ``actor_lr``/``critic_lr``/``alpha_lr`` for SAC,
    and its ``epsilon`` schedule is ``epsilon_initial``/``_final``/``_decay_timesteps``.
    """
    parts = [name for name in props if key and (name.endswith(f"_{key}") or name.startswith(f"{key}_"))]
    if not parts:
        parts = [_RENAMED[key]] if _RENAMED.get(key) in props else []
    if not parts:
        return ""
    return f" (did you mean {parts[0]!r}?)" if len(parts) == 1 else \
        f" (did you mean one of {', '.join(map(repr, parts))}?)"


def to_rllib(algorithm: str, params: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Keyword arguments per RLlib section, from (validated or raw) ``params``.

    Returns ``{"training": ..., "env_runners": ..., "reporting": ..., "model": ...}``;
    apply as ``getattr(config, section)(**kwargs)`` and ``DefaultModelConfig(**model)``.
    ``replay_buffer_config`` only carries ``capacity``: RLlib merges it into the
    existing dict, but replaces the whole dict when a later call changes its
    ``type``, so the runtime must set the type together with this capacity.
    """
    name = _lookup(algorithm)
    values = validate(name, params)
    out: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    schedules: dict[tuple[str, str], dict[str, Any]] = {}
    for key, option in _REGISTRY[name].items():
        rllib, value = option.annotations["x-rllib"], copy.deepcopy(values[key])
        section, target = rllib["section"], rllib["name"]
        if "schedule" in rllib:
            schedules.setdefault((section, target), {})[rllib["schedule"]] = value
        elif "key" in rllib:
            out[section].setdefault(target, {})[rllib["key"]] = value
        else:
            out[section][target] = value
    for (section, target), parts in schedules.items():
        # RLlib's schedule format: [[timestep, value], ...], starting at timestep 0.
        out[section][target] = [[0, parts["start"]], [parts["steps"], parts["end"]]]
    return out


def _check_links(values: Mapping[str, Any], options: Mapping[str, UpstreamOption], field: str) -> None:
    """Cross-field bounds (``x-at-most``/``x-at-least``) RLlib would otherwise reject at build time."""
    def numeric(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    for key, option in options.items():
        value = values[key]
        upper, lower = option.annotations.get("x-at-most"), option.annotations.get("x-at-least")
        if upper and numeric(value) and numeric(values[upper]) and value > values[upper]:
            raise ConfigError(f"{field}.{key}", f"{value!r} is above {upper} ({values[upper]!r}); "
                                                f"RLlib requires {key} <= {upper}")
        if lower and numeric(value) and numeric(values[lower]) and value < values[lower]:
            raise ConfigError(f"{field}.{key}", f"{value!r} is below {lower} ({values[lower]!r}); "
                                                f"RLlib requires {key} >= {lower}")


def _a2c() -> dict[str, dict[str, Any]]:
    """A2C (ray_worker.a2c): PPO's sampling and advantages, one plain gradient step per batch."""
    return {
        **common_properties(lr=7e-4, train_batch_size_per_learner=500, grad_clip=0.5),
        "lambda_": _prop(
            "number", 0.95, "GAE lambda; 1.0 gives n-step returns bootstrapped at the fragment end (classic A2C).",
            "loss", _at("training", "lambda_"), minimum=0, maximum=1),
        "use_gae": _prop(
            "boolean", True, "Whether advantages come from the value function (GAE / n-step); RLlib needs it "
            "for truncated episodes.", "loss", _at("training", "use_gae")),
        **_loss_weights(vf_loss_coeff=0.5, entropy_coeff=0.01),
    }


#: Algorithms MOSAIC implements itself on RLlib's API (not shipped by RLlib 2.60).
EXTRA_ALGORITHMS = ("A2C",)

# Built-ins go through the same checks as extensions.
for _name, _build in zip((*ALGORITHMS, *EXTRA_ALGORITHMS), (_ppo, _dqn, _impala, _appo, _sac, _a2c)):
    register(_name, _build())
del _name, _build
