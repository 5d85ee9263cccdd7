"""A MOSAIC config for a Jumanji run, and the hydra config of ``jumanji.training`` composed from it.

``jumanji.training`` keeps one yaml file per environment (``configs/env/<name>.yaml``:
``network``, ``training``, ``evaluation`` and ``a2c`` sections) under a top
``config.yaml`` (``agent``, ``seed``, ``logger``). MOSAIC's fields name what
every run has (environment, agent, seed, budget, batch sizes); ``network`` and
``algo_params`` are the env yaml's ``network`` and ``a2c`` sections, by their
yaml names, checked against the installed yaml (errors name the field and the
allowed keys). The run's config is then composed by hydra itself from Jumanji's
files with these values as overrides (:func:`compose`), exactly as
``python -m jumanji.training.train env=tsp agent=a2c ...`` would.

Reading the yaml needs Jumanji installed, so validation runs in this worker's
own environment; Jumanji's package folder is found without importing it.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from mosaic import configkit
from mosaic.configkit import option
from mosaic.errors import ConfigError, UserError, one_of
from mosaic.fastlane.config import FastLaneConfig

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


#: What each env yaml section is called in the MOSAIC config.
SECTIONS = {"network": "network", "algo_params": "a2c"}


def _same_kind(value: Any, default: Any) -> bool:
    if isinstance(default, bool):
        return isinstance(value, bool)
    if isinstance(default, int):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if isinstance(default, list):
        return isinstance(value, list) and all(_same_kind(v, default[0]) for v in value) if default else True
    return isinstance(value, type(default))


def check_section(field: str, given: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """``given`` checked against one yaml section: known keys, values of the default's kind."""
    out = {}
    for key, value in given.items():
        if key not in defaults:
            near = difflib.get_close_matches(key, list(defaults), n=1)
            hint = f"did you mean {near[0]!r}? " if near else ""
            raise ConfigError(f"{field}.{key}", f"unknown: {hint}allowed: {', '.join(sorted(defaults))}")
        default = defaults[key]
        if not _same_kind(value, default):
            raise ConfigError(f"{field}.{key}", f"{value!r} is not of the kind of Jumanji's default {default!r}")
        out[key] = float(value) if isinstance(default, float) else value
    return out


def _yaml_schema(defaults: Mapping[str, Any], what: str) -> dict[str, Any]:
    def kind(v: Any) -> Any:
        if isinstance(v, bool):
            return {"type": "boolean"}
        if isinstance(v, int):
            return {"type": "integer"}
        if isinstance(v, float):
            return {"type": "number"}
        if isinstance(v, list):
            return {"type": "array", "items": kind(v[0]) if v else {}}
        return {"type": "string"}

    return {"type": "object", "additionalProperties": False,
            "properties": {k: {**kind(v), "default": v, "description": what} for k, v in sorted(defaults.items())}}


def params_schema(algorithm: str) -> dict[str, Any]:
    """JSON Schema of ``algo_params`` (the env yaml's ``a2c`` section; TSP's defaults shown)."""
    defaults = env_yaml("tsp")["a2c"] if algorithm == "a2c" and "tsp" in environments() else {}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"algo_params of jumanji {algorithm}: the env yaml's `a2c` section "
                     "(defaults differ by environment; `--dry-run` shows a run's)",
            **_yaml_schema(defaults, "key of the env yaml's a2c section")}


@dataclass
class JumanjiConfig:
    """A Jumanji run: one agent of jumanji.training on one of its environments."""

    run_id: str = option(help="run id (set by MOSAIC)")
    algorithm: str = option("a2c", choices=ALGORITHMS,
                            help="jumanji.training's agent: a2c (learns), random (uniform over legal actions)")
    environment: str = option("tsp", help="a jumanji.training env config: tsp, bin_pack, cvrp, knapsack, ... "
                                          "(`mosaic workers --json` lists them)")
    seed: int = option(0, min=0, help="jumanji.training's seed (network init, env resets, acting keys)")
    total_timesteps: int = option(100_000, min=1,
                                  help="env steps; rounded up to whole epochs of n_steps × total_batch_size × "
                                       "num_learner_steps_per_epoch")
    n_steps: int | None = option(None, min=1, help="steps of each env per learner step; default: the env yaml's")
    total_batch_size: int | None = option(None, min=1, help="envs stepped together; default: the env yaml's")
    num_learner_steps_per_epoch: int | None = option(None, min=1, help="learner steps per epoch (one metrics "
                                                                       "event); default: the env yaml's")
    eval_episodes: int | None = option(None, min=1, help="episodes of the stochastic evaluation before each epoch "
                                                         "(evaluation.eval_total_batch_size); default: the yaml's")
    greedy_eval_episodes: int | None = option(None, min=1, help="episodes of the greedy evaluation before each "
                                                                "epoch (evaluation.greedy_eval_total_batch_size); "
                                                                "default: the yaml's")
    learning_rate: float | None = option(None, min=0.0, help="a2c.learning_rate; default: the env yaml's")
    network: dict[str, Any] = option(default_factory=dict, help="keys of the env yaml's network section "
                                                                "(e.g. transformer_num_blocks)")
    algo_params: dict[str, Any] = option(default_factory=dict, help="keys of the env yaml's a2c section "
                                                                    "(discount_factor, l_en, ...)")
    checkpoint_every_timesteps: int = option(0, min=0, help="also checkpoint every N env steps; 0 = at the end only")
    checkpoint_at_end: bool = option(True, help="save when the run ends (completed or cancelled)")
    restore_from: str | None = option(None, help="a checkpoint (or run folder) of a jumanji run to continue")
    xla_cpu_threads: int | None = option(1, min=1, help="XLA's CPU threads (XLA_FLAGS); null = XLA's default")
    epoch_timeout_s: float = option(1800.0, min=1.0, help="an epoch must end within this many seconds (the first "
                                                          "one compiles JAX code), or the run fails as stalled")
    heartbeat_interval_s: float = option(5.0, min=0.1, help="seconds between heartbeats")
    fastlane: FastLaneConfig = option(default_factory=FastLaneConfig,
                                      help="live frames of env 0 of the training batch, once per epoch")

    # -- the env yaml ------------------------------------------------------------
    @property
    def yaml(self) -> dict[str, Any]:
        return env_yaml(self.environment)

    def training(self) -> dict[str, int]:
        """The yaml's ``training`` section with MOSAIC's values over it (num_epochs from the budget)."""
        t = dict(self.yaml["training"])
        for key in ("n_steps", "total_batch_size", "num_learner_steps_per_epoch"):
            if getattr(self, key) is not None:
                t[key] = getattr(self, key)
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

    def overrides(self, num_epochs: int | None = None) -> list[str]:
        """hydra overrides of Jumanji's config, as one would type them after ``train.py``."""
        out = [f"env={self.environment}", f"agent={self.algorithm}", f"seed={self.seed}"]
        t = self.training()
        t["num_epochs"] = t["num_epochs"] if num_epochs is None else num_epochs
        out += [f"env.training.{k}={v}" for k, v in t.items()]
        evaluation = {"eval_total_batch_size": self.eval_episodes,
                      "greedy_eval_total_batch_size": self.greedy_eval_episodes}
        out += [f"env.evaluation.{k}={v}" for k, v in evaluation.items() if v is not None]
        a2c = dict(self.algo_params)
        if self.learning_rate is not None:
            a2c["learning_rate"] = self.learning_rate
        for section, values in (("network", self.network), ("a2c", a2c)):
            out += [f"env.{section}.{k}={_hydra_value(v)}" for k, v in values.items()]
        return out

    def to_dict(self) -> dict[str, Any]:
        return configkit.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "JumanjiConfig":
        config = configkit.from_dict(cls, data)
        offered = environments()
        if config.environment not in offered:
            near = difflib.get_close_matches(config.environment, offered, n=1)
            raise ConfigError("environment", (f"did you mean {near[0]!r}? " if near else "")
                              + one_of(config.environment, offered))
        if config.algorithm == "random" and (config.algo_params or config.learning_rate is not None):
            raise ConfigError("algo_params" if config.algo_params else "learning_rate",
                              "the random agent learns nothing: a2c only")
        for field, section in SECTIONS.items():
            setattr(config, field, check_section(field, getattr(config, field), config.yaml.get(section, {})))
        if config.algo_params.get("learning_rate") is not None and config.learning_rate is not None:
            raise ConfigError("algo_params.learning_rate", "given twice: also as learning_rate")
        return config


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
