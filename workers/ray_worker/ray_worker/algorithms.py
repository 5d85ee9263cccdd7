"""MOSAIC config → RLlib ``AlgorithmConfig`` on the new API stack.

Everything RLlib needs to train out of the box on multi-agent PettingZoo is
decided here, from each algorithm's traits (``ray_worker.traits``): the
multi-agent episode replay buffers DQN and SAC require, short iterations for
IMPALA/APPO, masked modules for games with action masks; and a small CNN for
preprocessed images, and the agent → module mapping. A single-agent (Gymnasium) env
gets RLlib's single-agent config instead: one ``RLModuleSpec``, no agent mapping, and
RLlib's own single-agent replay buffers.
"""

from __future__ import annotations

from typing import Any

from mosaic.errors import ConfigError
from ray_worker import algo_params
from ray_worker.config import PolicyConfiguration, RayWorkerConfig
from ray_worker.ctde_ids import CRITIC_ID
from ray_worker.environment import EnvInfo, space_kind
from ray_worker.policies import PolicyLayout
from ray_worker.traits import kind_words, load_config_class, maskable, traits

#: Conv stack for preprocessed images (RLlib's defaults assume 84x84 and are large).
SMALL_CNN = [[16, [4, 4], 2], [32, [4, 4], 2], [32, [3, 3], 2]]


def check_compatibility(cfg: RayWorkerConfig, env: EnvInfo) -> None:
    """Refuse combinations that cannot work, naming the field and what would (traits in ray_worker.traits)."""
    algo = cfg.rllib_algorithm
    trait = traits(algo)
    kinds = env.action_kinds()
    env_name = f"{cfg.environment.family}/{cfg.environment.env_id}"
    if kinds - set(trait.action_kinds):
        others = [a.lower() for a in algo_params.algorithms()
                  if a != algo and not kinds - set(traits(a).action_kinds)]
        raise ConfigError("algorithm", f"{cfg.algorithm} needs {kind_words(trait.action_kinds)} "
                          f"actions but {env_name} has {', '.join(sorted(kinds))} actions; "
                          f"use one of {', '.join(others)}")
    if env.has_action_masks() and not trait.masked:
        raise ConfigError("algorithm", f"{env_name} uses action masks, which {cfg.algorithm} cannot "
                          f"respect yet; use one of {', '.join(a.lower() for a in maskable())}")
    if trait.min_rollout_fragment:
        fragment = cfg.algo_params.get("rollout_fragment_length")
        if fragment != "auto" and isinstance(fragment, int) and fragment < trait.min_rollout_fragment:
            raise ConfigError("algo_params.rollout_fragment_length",
                              f"{fragment} is too short for {cfg.algorithm}; use at least "
                              f"{trait.min_rollout_fragment}")


def resolve(cfg: RayWorkerConfig, env: EnvInfo, layout: PolicyLayout) -> dict[str, Any]:
    """The exact RLlib settings of this run, section by section, without importing RLlib.

    ``--dry-run`` prints this; :func:`build_algorithm_config` applies it.
    """
    from ray_worker.environment import describe_space

    check_compatibility(cfg, env)
    algo = cfg.rllib_algorithm
    sections = algo_params.to_rllib(algo, cfg.algo_params)
    training = dict(sections.get("training", {}))
    trait = traits(algo)
    single = env.single_agent  # RLlib's single-agent path: its own (single-agent) replay buffers
    if trait.replay_buffer and not single:
        training["replay_buffer_config"] = {**trait.replay_buffer, **training.get("replay_buffer_config", {})}
    # Sampled episodes stay lists (RLlib's default numpy'es them): RLlib 2.60's multi-agent env runner numpy'es
    # every episode finished so far in a sample again at each env step, a cost growing with the square of the
    # sample's episodes (a third of the main job's sampling). The learner's numbers are the same either way
    # (the ray worker's tests/test_episode_lists.py); bench/rllib_episode_lists.py measures the time saved.
    env_runners = {"num_env_runners": cfg.rllib.num_env_runners,
                   "num_envs_per_env_runner": cfg.num_envs_per_env_runner,
                   "num_cpus_per_env_runner": cfg.rllib.cpus_per_env_runner, "episodes_to_numpy": False,
                   **sections.get("env_runners", {})}
    if trait.auto_rollout_fragment and env_runners.get("rollout_fragment_length", "auto") == "auto":
        env_runners["rollout_fragment_length"] = trait.auto_rollout_fragment
    reporting = {"min_sample_timesteps_per_iteration": 0, "min_train_timesteps_per_iteration": 0,
                 **sections.get("reporting", {})}
    if trait.learner_thread:
        reporting.setdefault("min_time_s_per_iteration", 1)
    else:
        # RLlib's SAC defaults to iterations of at least 1 s, so how many env steps one
        # iteration holds would depend on the machine's speed; here an iteration is one
        # sampling and training step everywhere (as DQN's and PPO's already are).
        reporting.setdefault("min_time_s_per_iteration", 0)
    ctde = cfg.policy_configuration is PolicyConfiguration.SHARED_VALUE_FUNCTION
    if ctde:
        training["learner_class"] = "ray_worker.ctde.CTDEPPOTorchLearner"
    modules = {}
    for module_id, info in layout.modules.items():
        model_config = dict(sections.get("model", {}))
        obs_kind = space_kind(info.observation_space)
        module_class = None
        if module_id in layout.baselines:
            module_class = "ray_worker.modules.UniformRandomRLModule"
        elif ctde:
            module_class = "ray_worker.ctde." + ("CentralCritic" if module_id == CRITIC_ID else "CTDEActor")
            reads = info.observation_space["state" if module_id == CRITIC_ID else "obs"]  # ctde_ids STATE/LOCAL
            if space_kind(reads) == "image" and "conv_filters" not in model_config:
                model_config["conv_filters"] = SMALL_CNN
        elif obs_kind == "masked_discrete":
            module_class = f"ray_worker.modules.{trait.masked_module}"
        elif obs_kind == "image" and "conv_filters" not in model_config:
            model_config["conv_filters"] = SMALL_CNN
        modules[module_id] = {"module_class": module_class, "model_config": model_config,
                              "agents": list(info.agents),
                              "observation_space": describe_space(info.observation_space),
                              "action_space": describe_space(info.action_space)}
    return {
        "algorithm": algo,
        "environment": {"env": f"mosaic-{cfg.environment.family}-{cfg.environment.env_id}"},
        "env_runners": env_runners,
        "learners": cfg.learner_resources(),
        "training": training,
        "reporting": reporting,
        "multi_agent": None if single else {"policies": sorted(layout.modules),
                                            "policies_to_train": list(layout.trainable),
                                            "policy_mapping": dict(layout.agent_to_module)},
        "rl_module": modules,
        "multi_rl_module_class": "ray_worker.ctde.CTDEMultiRLModule" if ctde else None,
        "debugging": {"seed": cfg.seed},
    }


def _import(dotted: str) -> Any:
    import importlib

    path, name = dotted.rsplit(".", 1)
    return getattr(importlib.import_module(path), name)


def build_algorithm_config(cfg: RayWorkerConfig, env: EnvInfo, layout: PolicyLayout,
                           env_name: str, callbacks: Any = None, mapping_fn: Any = None) -> Any:
    """The complete RLlib ``AlgorithmConfig`` for this run (not yet built)."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    from ray_worker.policies import AgentToModule

    settings = resolve(cfg, env, layout)
    specs = {}
    for module_id, module in settings["rl_module"].items():
        info = layout.modules[module_id]
        kwargs = {"observation_space": info.observation_space, "action_space": info.action_space,
                  "model_config": module["model_config"]}
        if module["module_class"]:
            kwargs["module_class"] = _import(module["module_class"])
        specs[module_id] = RLModuleSpec(**kwargs)
    training = dict(settings["training"])
    if isinstance(training.get("learner_class"), str):
        training["learner_class"] = _import(training["learner_class"])
    multi_kwargs = {}
    if settings["multi_rl_module_class"]:
        multi_kwargs["multi_rl_module_class"] = _import(settings["multi_rl_module_class"])
    config = (
        load_config_class(settings["algorithm"])()
        .environment(env=env_name)
        .env_runners(**settings["env_runners"])
        .learners(**settings["learners"])
        .training(**training)
        .reporting(**settings["reporting"])
        .debugging(**settings["debugging"])
    )
    if settings["multi_agent"] is None:  # a single-agent env: RLlib's single-agent path, one module
        (spec,) = specs.values()
        return _with_callbacks(config.rl_module(rl_module_spec=spec), callbacks)
    config = (
        config.multi_agent(policies=set(layout.modules),
                           policy_mapping_fn=mapping_fn or AgentToModule(layout.agent_to_module),
                           policies_to_train=list(layout.trainable))
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs=specs, **multi_kwargs))
    )
    return _with_callbacks(config, callbacks)


def _with_callbacks(config: Any, callbacks: Any) -> Any:
    if callbacks is not None:
        config = config.callbacks(callbacks)
    return config


def seed_replay_buffer(algo: Any, seed: int | None) -> None:
    """Seed the driver's replay buffer (DQN, SAC) from the run's seed.

    RLlib 2.60's episode replay buffers draw the rows they train on from a generator of their own,
    created unseeded whatever ``debugging(seed=...)`` says: two runs with one seed collected the same
    first episodes and then learned from different rows. Seeded, an off-policy run repeats as an
    on-policy one does. A run without a seed stays unseeded.
    """
    import numpy as np

    buffer = getattr(algo, "local_replay_buffer", None)
    if buffer is not None and hasattr(buffer, "rng"):
        buffer.rng = np.random.default_rng(seed)
