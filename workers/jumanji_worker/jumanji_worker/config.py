"""A MOSAIC config for a Jumanji run, and the hydra config of ``jumanji.training`` composed from it.

``jumanji.training`` keeps one yaml file per environment (``configs/env/<name>.yaml``:
``network``, ``training``, ``evaluation`` and ``a2c`` sections) under a top
``config.yaml`` (``agent``, ``seed``, ``logger``). MOSAIC's fields name what
every run has (the shared run fields of ``mosaic.workerkit.run_fields``: environment, agent,
seed, budget, num_envs, learning_rate, gamma), plus Jumanji's own epoch shape
(n_steps, learner steps per epoch, evaluation episodes); ``network`` and
``algo_params`` are the env yaml's ``network`` and ``a2c`` sections, by their
yaml names, checked against the installed yaml (errors name the field and the
allowed keys). PPO (``ppo.py``; Jumanji has none) reads a ``ppo`` section added to the
env's config by the overrides (``+env.ppo.<key>=...``): the yaml's ``a2c`` keys with
PPO's own (:data:`PPO_DEFAULTS`) over them. The run's config is then composed by hydra itself from Jumanji's
files with these values as overrides (:func:`compose`), exactly as
``python -m jumanji.training.train env=tsp agent=a2c ...`` would.

Reading the yaml needs Jumanji installed, so validation runs in this worker's
own environment; Jumanji's package folder is found without importing it.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from mosaic import configkit
from mosaic.configkit import option
from mosaic.errors import ConfigError, UserError, one_of
from mosaic.workerkit.devices import check_gpus, devices_used
from mosaic.workerkit.options import UpstreamOption, bounds_by_meaning, check_options
from mosaic.workerkit.run_fields import Environment, FieldMap, Resources, RoundedBudget, RunConfig

from jumanji_worker import ALGORITHMS


def configs_folder() -> Path:
    """``jumanji/training/configs`` of the installed Jumanji, found without importing it (JAX is slow)."""
    spec = importlib.util.find_spec("jumanji")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("jumanji: Jumanji is not installed here; the jumanji worker runs in its own environment: "
                        "`mosaic envs build jumanji`, then run it through `mosaic`")
    return Path(list(spec.submodule_search_locations)[0]) / "training" / "configs"


@functools.lru_cache(maxsize=None)
def environments() -> tuple[str, ...]:
    """The environments ``jumanji.training`` has a config for (``tsp``, ``bin_pack``, ...)."""
    try:
        return tuple(sorted(p.stem for p in (configs_folder() / "env").glob("*.yaml")))
    except UserError:
        return ()


@functools.lru_cache(maxsize=None)
def env_yaml(name: str) -> dict[str, Any]:
    """Jumanji's yaml for one environment, as plain data."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(configs_folder() / "env" / f"{name}.yaml"), resolve=True)


#: PPO's own hyperparameters, and its defaults over the env yaml's a2c section (the keys both read: discount_factor,
#: bootstrapping_factor as GAE's lambda, l_pg, l_td, l_en, learning_rate). normalize_advantage: per minibatch.
PPO_DEFAULTS: dict[str, Any] = {"clip_epsilon": 0.2, "update_epochs": 4, "num_minibatches": 2,
                                "max_grad_norm": 0.5, "normalize_advantage": True}
#: PPO's keys that must be positive (max_grad_norm may be 0: no clipping).
PPO_POSITIVE = ("clip_epsilon", "update_epochs", "num_minibatches", "learning_rate")
#: Bounds of the yaml's a2c keys both agents read, where their meaning fixes them (Jumanji checks none).
A2C_BOUNDS = bounds_by_meaning(fractions=("discount_factor", "bootstrapping_factor"),
                               not_negative=("l_pg", "l_td", "l_en", "learning_rate"))


def algo_defaults(algorithm: str, yaml: Mapping[str, Any]) -> dict[str, Any]:
    """The ``algo_params`` an algorithm reads, with their defaults, for one env yaml."""
    if algorithm == "a2c":
        return dict(yaml.get("a2c", {}))
    if algorithm == "ppo":
        return {**yaml.get("a2c", {}), **PPO_DEFAULTS}
    return {}


def hyperparameter_section(algorithm: str) -> str:
    """The env config's section an algorithm's hyperparameters go to (``env.a2c``, ``env.ppo``)."""
    return "ppo" if algorithm == "ppo" else "a2c"


#: What each algorithm's ``algo_params`` are, in Jumanji's files.
ALGO_PARAMS_WHAT = {"a2c": "the env yaml's `a2c` section",
                    "ppo": "the env yaml's `a2c` keys (bootstrapping_factor: GAE's lambda) and PPO's own "
                           "(clip_epsilon, update_epochs, num_minibatches, max_grad_norm), as the run's `env.ppo` "
                           "section"}


def yaml_options(defaults: Mapping[str, Any], what: str) -> dict[str, UpstreamOption]:
    """One yaml section's keys as options typed by Jumanji's defaults (``what``: the section, in words)."""
    return {key: UpstreamOption(key, default, "Jumanji", f"key of {what}" if what else "")
            for key, default in sorted(defaults.items())}


def algo_options(algorithm: str, yaml: Mapping[str, Any]) -> dict[str, UpstreamOption]:
    """The ``algo_params`` an algorithm reads for one env yaml, with the bounds their meaning fixes (A2C_BOUNDS;
    PPO's PPO_POSITIVE above 0, so its counts at least 1, and max_grad_norm not negative)."""
    out = {}
    for key, option_ in yaml_options(algo_defaults(algorithm, yaml), ALGO_PARAMS_WHAT.get(algorithm, "")).items():
        option_ = option_.bounded(*A2C_BOUNDS.get(key, (None, None)))
        if algorithm == "ppo" and key in PPO_POSITIVE:  # a count at least 1, a number above 0
            option_ = (option_.bounded(1) if option_.kind == "integer" else
                       dataclasses.replace(option_, minimum=None, exclusive_minimum=0))
        elif algorithm == "ppo" and key == "max_grad_norm":
            option_ = option_.bounded(0)
        out[key] = option_
    return out


def params_schema(algorithm: str) -> dict[str, Any]:
    """JSON Schema of ``algo_params`` (a2c: the env yaml's ``a2c`` section; ppo: those keys and PPO's own;
    TSP's defaults shown)."""
    options = algo_options(algorithm, env_yaml("tsp")) if "tsp" in environments() else {}
    what = ALGO_PARAMS_WHAT.get(algorithm, "")
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"algo_params of jumanji {algorithm}: {what or 'none'} "
                     "(defaults differ by environment; `--dry-run` shows a run's)",
            "type": "object", "additionalProperties": False,
            "properties": {k: o.schema() for k, o in sorted(options.items())}}


DEFAULT_ENV = "tsp"
NOT_LEARNING = "the random agent learns nothing: a2c or ppo only"


def default_environment() -> Environment:
    return Environment(family="jumanji", env_id=DEFAULT_ENV)


@dataclass
class JumanjiConfig(RunConfig):
    """A Jumanji run: one agent of jumanji.training on one of its environments."""

    FIELDS: ClassVar[FieldMap] = FieldMap(
        honoured={
            "algorithm": "jumanji.training's agent (agent=a2c, agent=random), or agent=ppo: MOSAIC's PPO on "
                         "Jumanji's A2C networks and rollout (ppo.py)",
            "environment.family": "always 'jumanji'",
            "environment.env_id": "a jumanji.training env config (env=<name>: configs/env/<name>.yaml, e.g. tsp, "
                                  "whose env is TSP-v1)",
            "seed": "jumanji.training's seed (network init, env resets, acting keys)",
            "total_timesteps": "env steps, rounded up to whole epochs (training.num_epochs)",
            "num_envs": "the env yaml's training.total_batch_size (envs stepped together)",
            "learning_rate": "the env yaml's a2c.learning_rate (ppo: env.ppo.learning_rate)",
            "gamma": "the env yaml's a2c.discount_factor (ppo: env.ppo.discount_factor)",
            "checkpoint.every_timesteps": "a checkpoint at the first epoch end at or past each multiple",
            "checkpoint.at_end": "a checkpoint when the run ends (completed or cancelled)",
            "checkpoint.keep": "the newest K periodic checkpoints are kept, older ones deleted",
            "checkpoint.restore_from": "the checkpoint's pickled TrainingState (same agent, env config, network and "
                                       "num_envs)",
            "reporting.heartbeat_interval_s": "heartbeats",
            "fastlane": "frames of env 0 of the training batch, once per epoch",
            "resources.threads": "XLA's CPU threads (XLA_FLAGS intra_op_parallelism_threads)",
            "resources.cpus": "CPUs the daemon reserves for the run",
            "resources.gpus": "JAX's platform: 0 = the CPU (JAX_PLATFORMS=cpu); up to 1 = JAX's GPU backend "
                              "(jax[cuda12]) on one GPU, a fraction also capping JAX's memory preallocation "
                              "(XLA_PYTHON_CLIENT_MEM_FRACTION); a whole N > 1 = Jumanji's pmap over the first "
                              "N GPUs (JAX_CUDA_VISIBLE_DEVICES), num_envs a multiple of N; refused where the "
                              "environment's JAX sees no GPU (CUDA builds: docs/worker-environments.md, "
                              "\"GPU builds\")",
            "algo_params": "keys of the env yaml's a2c section (discount_factor, l_en, ...); ppo: those and "
                           "clip_epsilon, update_epochs, num_minibatches, max_grad_norm",
        },
        refused={
            "environment.env_ids": "one env per run",
            "environment.env_kwargs": "jumanji.training makes the env from the env yaml's registered version, "
                                      "with no constructor arguments",
            "episodes": "a training worker: its budget is total_timesteps",
            "batch_size": "jumanji.training's A2C learns from each learner step's whole rollout (n_steps x "
                          "num_envs transitions): set n_steps and num_envs",
            "reporting.every_timesteps": "one metrics event per epoch of jumanji.training (n_steps x num_envs x "
                                         "num_learner_steps_per_epoch env steps): set num_learner_steps_per_epoch",
        })

    algorithm: str = option("a2c", help="jumanji.training's agent: a2c (learns), random (uniform over legal "
                                        "actions); ppo: PPO on the same networks (learns)")
    environment: Environment = option(default_factory=default_environment,
                                      help="family 'jumanji'; env_id: a jumanji.training env config: tsp, bin_pack, "
                                           "cvrp, knapsack, ... (`mosaic workers show jumanji` lists them)")
    total_timesteps: int | None = option(100_000, min=1,
                                         help="env steps; rounded up to whole epochs of n_steps × num_envs × "
                                              "num_learner_steps_per_epoch; null = 100000")
    resources: Resources = option(merge=True, default_factory=lambda: Resources(threads=1),
                                  help="XLA's CPU threads (default 1), CPUs, and GPUs (JAX's GPU backend)")
    n_steps: int | None = option(None, min=1, help="steps of each env per learner step; default: the env yaml's")
    num_learner_steps_per_epoch: int | None = option(None, min=1, help="learner steps per epoch (one metrics "
                                                                       "event); default: the env yaml's")
    eval_episodes: int | None = option(None, min=1, help="episodes of the stochastic evaluation before each epoch "
                                                         "(evaluation.eval_total_batch_size); default: the yaml's")
    greedy_eval_episodes: int | None = option(None, min=1, help="episodes of the greedy evaluation before each "
                                                                "epoch (evaluation.greedy_eval_total_batch_size); "
                                                                "default: the yaml's")
    network: dict[str, Any] = option(default_factory=dict, help="keys of the env yaml's network section "
                                                                "(e.g. transformer_num_blocks)")
    epoch_timeout_s: float = option(1800.0, min=1.0, help="an epoch must end within this many seconds (the first "
                                                          "one compiles JAX code), or the run fails as stalled")

    @classmethod
    def algorithms(cls) -> Sequence[str]:
        return ALGORITHMS

    @property
    def env_name(self) -> str:
        """The jumanji.training env config (``tsp``)."""
        return self.environment.env_id

    # -- the env yaml ------------------------------------------------------------
    @property
    def yaml(self) -> dict[str, Any]:
        return env_yaml(self.env_name)

    def training(self) -> dict[str, int]:
        """The yaml's ``training`` section with MOSAIC's values over it (num_epochs from the budget)."""
        t = dict(self.yaml["training"])
        for key, value in (("n_steps", self.n_steps), ("total_batch_size", self.num_envs),
                           ("num_learner_steps_per_epoch", self.num_learner_steps_per_epoch)):
            if value is not None:
                t[key] = value
        t["num_epochs"] = math.ceil(self.total_timesteps / self.steps_per_epoch_of(t))
        return t

    @staticmethod
    def steps_per_epoch_of(t: Mapping[str, int]) -> int:
        return t["n_steps"] * t["total_batch_size"] * t["num_learner_steps_per_epoch"]

    @property
    def steps_per_epoch(self) -> int:
        return self.steps_per_epoch_of(self.training())

    @property
    def num_epochs(self) -> int:
        return self.training()["num_epochs"]

    def rounded_budget(self) -> RoundedBudget | None:
        """jumanji.training trains whole epochs: the budget is rounded up to them."""
        t = self.training()
        return RoundedBudget.whole_units(self.total_timesteps, self.steps_per_epoch_of(t), "epoch",
                                         f"n_steps {t['n_steps']} × num_envs {t['total_batch_size']} × "
                                         f"num_learner_steps_per_epoch {t['num_learner_steps_per_epoch']}")

    def overrides(self, num_epochs: int | None = None) -> list[str]:
        """hydra overrides of Jumanji's config, as one would type them after ``train.py``."""
        out = [f"env={self.env_name}", f"agent={self.algorithm}", f"seed={self.seed}"]
        t = self.training()
        t["num_epochs"] = t["num_epochs"] if num_epochs is None else num_epochs
        out += [f"env.training.{k}={v}" for k, v in t.items()]
        evaluation = {"eval_total_batch_size": self.eval_episodes,
                      "greedy_eval_total_batch_size": self.greedy_eval_episodes}
        out += [f"env.evaluation.{k}={v}" for k, v in evaluation.items() if v is not None]
        params = {**self.algo_params, **self._shared_values()}
        if self.algorithm == "ppo":  # a section of its own, every key given (Jumanji's yaml has none)
            params = self.ppo_params()
        out += [f"env.network.{k}={_hydra_value(v)}" for k, v in self.network.items()]
        section = hyperparameter_section(self.algorithm)
        new = "+" if section == "ppo" else ""
        out += [f"{new}env.{section}.{k}={_hydra_value(v)}" for k, v in params.items()]
        return out

    def shared_options(self) -> dict[str, tuple[str, Any]]:
        """Key of the env yaml's a2c section -> (the shared field that sets it, its value), for those set."""
        out: dict[str, tuple[str, Any]] = {}
        if self.learning_rate is not None:
            out["learning_rate"] = ("learning_rate", float(self.learning_rate))
        if self.gamma is not None:
            out["discount_factor"] = ("gamma", float(self.gamma))
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "JumanjiConfig":
        if isinstance(data.get("environment"), str):  # the shape before the shared run fields
            raise ConfigError("environment", f"{data['environment']!r} is the env config alone; allowed: an object, "
                                             f'{{"family": "jumanji", "env_id": {json.dumps(data["environment"])}}}')
        config = configkit.from_dict(cls, data)
        config.check_shared()
        if config.total_timesteps is None:
            config.total_timesteps = 100_000
        env = config.environment
        if env.family not in ("", "jumanji"):
            raise ConfigError("environment.family", one_of(env.family, ["jumanji"]))
        env.family, env.env_id = "jumanji", env.env_id or DEFAULT_ENV
        offered = environments()
        if env.env_id not in offered:
            near = difflib.get_close_matches(env.env_id, offered, n=1)
            raise ConfigError("environment.env_id", (f"did you mean {near[0]!r}? " if near else "")
                              + one_of(env.env_id, offered))
        if config.algorithm == "random":
            for name in ("algo_params", "learning_rate", "gamma"):
                if getattr(config, name) not in ({}, None):
                    raise ConfigError(name, f"{NOT_LEARNING}; allowed: {'{}' if name == 'algo_params' else 'null'}")
        config.network = check_options("network", config.network,
                                       yaml_options(config.yaml.get("network", {}), "the env yaml's network"),
                                       f"Jumanji's {env.env_id} network")
        config.algo_params = check_options("algo_params", config.algo_params,
                                           algo_options(config.algorithm, config.yaml),
                                           f"Jumanji's {config.algorithm} on {env.env_id}")
        section = hyperparameter_section(config.algorithm)
        for name, (by, _) in config.shared_options().items():
            if name in config.algo_params:
                raise ConfigError(by, f"and algo_params.{name} both set Jumanji's {section}.{name}; allowed: one of "
                                      f"them (the shared {by}, or Jumanji's own algo_params.{name})")
        config.check_devices()
        if config.algorithm != "random":
            config.check_bounds()
        if config.algorithm == "ppo":
            config.check_ppo()
        return config

    def _shared_values(self) -> dict[str, Any]:
        """The shared fields' values under Jumanji's names (learning_rate, discount_factor), where given."""
        return {name: value for name, (_, value) in self.shared_options().items()}

    def _given_as(self, key: str) -> str:
        """The field a hyperparameter came from: the shared one that sets it, else ``algo_params.KEY``."""
        return next((by for name, (by, _) in self.shared_options().items() if name == key), f"algo_params.{key}")

    def hyperparameters(self, algorithm: str | None = None) -> dict[str, Any]:
        """The section an agent reads: its defaults, ``algo_params`` and the shared fields over them."""
        return {**algo_defaults(algorithm or self.algorithm, self.yaml), **self.algo_params, **self._shared_values()}

    def check_bounds(self) -> None:
        """The hyperparameters' values within their bounds (:func:`algo_options`), whether given in ``algo_params``
        or by a shared field."""
        values = self.hyperparameters()
        for key, option_ in algo_options(self.algorithm, self.yaml).items():
            option_.check(values[key], self._given_as(key))

    def ppo_params(self) -> dict[str, Any]:
        """The ``env.ppo`` section a PPO run reads."""
        return self.hyperparameters("ppo")

    def check_ppo(self) -> None:
        """PPO's minibatches split each device's rollout evenly (its bounds: :meth:`check_bounds`)."""
        params = self.ppo_params()
        n_steps = self.training()["n_steps"]
        if n_steps % params["num_minibatches"]:
            divisors = [d for d in range(1, n_steps + 1) if n_steps % d == 0]
            raise ConfigError("algo_params.num_minibatches",
                              f"{params['num_minibatches']} does not divide n_steps {n_steps} (a minibatch is whole "
                              f"time steps of the env batch); allowed: one of {', '.join(map(str, divisors))}")

    def check_devices(self) -> None:
        """``resources.gpus`` against the GPUs this environment's JAX sees, and the batch split across them."""
        gpus = self.resources.gpus
        check_gpus(gpus, "jax")
        devices = devices_used(gpus)
        batch = self.training()["total_batch_size"]
        if devices > 1 and batch % devices:
            raise ConfigError("num_envs", f"{batch} envs cannot be split evenly across {devices} GPUs (Jumanji's "
                                          f"pmap gives each device the same share); allowed: a multiple of {devices}")


def _hydra_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ",".join(_hydra_value(v) for v in value) + "]"
    return str(value)


def compose(config: JumanjiConfig, num_epochs: int | None = None) -> Any:
    """Jumanji's own hydra config (``configs/config.yaml`` + ``env/<name>.yaml``) with the run's overrides."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(configs_folder()), version_base=None):
        cfg = hydra_compose("config.yaml", overrides=config.overrides(num_epochs))
    cfg.logger.type = "terminal"  # replaced by MOSAIC's logger (telemetry.py); never neptune
    return cfg
