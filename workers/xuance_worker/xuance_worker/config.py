"""A MOSAIC config for a XuanCe run, and XuanCe's own arguments from it.

Hyperparameters are **XuanCe's yaml defaults** for the algorithm and env: the
files it ships (``xuance/configs/<algo>/mpe/<env_id>.yaml`` over
``xuance/configs/basic.yaml``) are read, not copied, so types, defaults and
names follow whichever XuanCe is installed. ``algo_params`` are checked against
them, with errors naming ``algo_params.<name>`` and the allowed names. Envs XuanCe
ships no yaml for (other MPE ids, SISL, Butterfly) take the algorithm's
``simple_spread_v3`` file: its hyperparameters are for a small cooperative task.
Envs whose agents observe images take the algorithm's ``atari.yaml`` instead:
XuanCe's multi-agent settings for pixel observations (its ``Basic_CNN`` with
``filters``, ``kernels``, ``strides``), shipped for PettingZoo's Atari games.

Reading the yaml needs XuanCe's package folder (found without importing it), so
validation runs in this worker's own environment.
"""

from __future__ import annotations

import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from mosaic import configkit
from mosaic.configkit import UpstreamParam, option
from mosaic.envs import EnvironmentConfig
from mosaic.errors import ConfigError, UserError
from mosaic.fastlane.config import FastLaneConfig

from xuance_worker import algorithms
from xuance_worker.algorithms import Algorithm

BASE_ENV = "simple_spread_v3"  # whose yaml an env without its own file takes
IMAGE_YAML = "atari.yaml"  # XuanCe's multi-agent settings for pixel observations (Basic_CNN)
CNN_OPTIONS = ("filters", "kernels", "strides")  # Basic_CNN's layers, in the image yaml only
#: Options of XuanCe's own Atari env in the image yaml; the env here is MOSAIC's.
ATARI_ENV_OPTIONS = ("obs_type", "img_size", "num_stack", "frame_skip", "noop_max")

#: XuanCe options MOSAIC sets itself, and from what.
OWNED = {
    "seed": "seed", "env_seed": "seed", "running_steps": "total_timesteps", "parallels": "num_envs",
    "learning_rate": "learning_rate", "dl_toolbox": "backend", "agent": "algorithm", "env_name": "environment",
    "env_id": "environment.env_id", "continuous_action": "the env's action space",
    "policy": "the env's action space (algorithms.py)", "vectorize": "the worker (envs run in-process)",
    "device": "the worker (CPU)", "logger": "the worker (TensorBoard in the run folder)",
    "log_dir": "the worker (the run folder)", "model_dir": "the worker (checkpoints/ of the run folder)",
    "render": "fastlane.enabled (frames of env 0)", "render_mode": "fastlane.enabled (frames of env 0)",
    "distributed_training": "the worker (one process)", "master_port": "the worker (one process)",
    "project_name": "the worker", "wandb_user_name": "the worker",
    "eval_interval": "XuanCe's benchmark mode, which MOSAIC does not use",
    "test_episode": "XuanCe's benchmark mode; `mosaic eval --episodes` plays trained policies",
    "use_cnn": "the env's observations (images: XuanCe's Basic_CNN)",
}


def xuance_param(name: str, default: Any, comment: str = "") -> UpstreamParam:
    """One XuanCe option and its shipped default (``comment``: the yaml's own, if any)."""
    return UpstreamParam(name, default, "XuanCe", comment)


def configs_folder() -> Path:
    spec = importlib.util.find_spec("xuance")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("xuance: XuanCe is not installed here; the xuance worker runs in its own environment: "
                        "`mosaic envs build xuance`, then run it through `mosaic`")
    return Path(list(spec.submodule_search_locations)[0]) / "configs"


def _comments(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        key, sep, rest = line.partition(":")
        if sep and key and not key.startswith((" ", "#")) and "#" in rest:
            out[key.strip()] = rest.split("#", 1)[1].strip()
    return out


def image_yaml(algorithm: str) -> Path | None:
    """XuanCe's settings of ``algorithm`` for image observations, if it ships them."""
    path = configs_folder() / algorithm / IMAGE_YAML
    return path if path.exists() else None


def yaml_file(algorithm: str, family: str, env_id: str, images: bool = False) -> Path:
    """The yaml XuanCe ships for ``algorithm`` on the env (its image settings when it observes images)."""
    if images:
        path = image_yaml(algorithm)
        if path is None:
            raise ConfigError("algorithm", f"{algorithm}: XuanCe ships no settings for image observations "
                                           f"(no {algorithm}/{IMAGE_YAML}); {env_id} observes images")
        return path
    folder = configs_folder() / algorithm / "mpe"
    own = folder / f"{env_id}.yaml"
    return own if family == "mpe" and own.exists() else folder / f"{BASE_ENV}.yaml"


@functools.lru_cache(maxsize=None)
def xuance_params(algorithm: str, family: str = "mpe", env_id: str = BASE_ENV,
                  images: bool = False) -> dict[str, UpstreamParam]:
    """Every option of the algorithm on the env, with XuanCe's shipped defaults (basic.yaml, then its own)."""
    import yaml

    basic, own = configs_folder() / "basic.yaml", yaml_file(algorithm, family, env_id, images)
    values = {**yaml.safe_load(basic.read_text()), **yaml.safe_load(own.read_text())}
    comments = {**_comments(basic), **_comments(own)}
    return {k: xuance_param(k, v, comments.get(k, "")) for k, v in values.items()}


def params_schema(name: str) -> dict[str, Any]:
    """JSON Schema of ``algo_params`` for one algorithm (``--schema ALGO``), on simple_spread_v3."""
    algo = algorithms.get(name)
    params = dict(xuance_params(algo.name))
    title = f"algo_params of xuance {algo.name} ({algo.agent}; defaults from XuanCe's {algo.name}/mpe/{BASE_ENV}.yaml "
    if image_yaml(algo.name) is not None:
        # Basic_CNN's layers, for envs whose agents observe images (which take all of the image yaml's defaults)
        for option_name, param in xuance_params(algo.name, images=True).items():
            if option_name in CNN_OPTIONS:
                params[option_name] = xuance_param(option_name, param.default,
                                                   f"image observations only (XuanCe's Basic_CNN; "
                                                   f"default from {algo.name}/{IMAGE_YAML})")
        title += f"over basic.yaml; envs observing images take {algo.name}/{IMAGE_YAML})"
    else:
        title += "over basic.yaml; image observations are not supported)"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": title,
            "type": "object", "additionalProperties": False,
            "properties": {n: p.schema() for n, p in sorted(params.items()) if n not in OWNED}}


def default_environment() -> EnvironmentConfig:
    return EnvironmentConfig(family="mpe", env_id="simple_spread_v3", api_type="PARALLEL",
                             env_kwargs={"N": 3, "max_cycles": 25})


@dataclass
class XuanCeConfig:
    """A XuanCe run: one algorithm, one PettingZoo env, XuanCe's own hyperparameters."""

    run_id: str = option(help="run id (set by MOSAIC)")
    algorithm: str = option("mappo", choices=tuple(algorithms.ALGORITHMS),
                            help="XuanCe algorithm (traits: xuance_worker/algorithms.py)")
    environment: EnvironmentConfig = option(default_factory=default_environment,
                                            help="PettingZoo env (parallel API), built by MOSAIC's env layer")
    seed: int = option(1, min=0, help="XuanCe's seed and env_seed")
    total_timesteps: int = option(50_000, min=1, help="env steps (a parallel step of all agents is one)")
    num_envs: int | None = option(None, min=1, max=256, help="envs stepped together (XuanCe's parallels); "
                                                              "default: the yaml's")
    learning_rate: float | None = option(None, min=0.0, help="default: the yaml's")
    batch_size: int | None = option(None, min=1, help="on-policy: env steps per update (XuanCe's buffer_size); "
                                                      "off-policy: transitions per gradient step "
                                                      "(batch_size); default: the yaml's")
    backend: str = option("torch", choices=("torch",), help="XuanCe's dl_toolbox (TensorFlow and MindSpore "
                                                            "are not installed in the worker's environment)")
    algo_params: dict[str, Any] = option(default_factory=dict,
                                         help="any other XuanCe option by its yaml name: `--schema ALGO` "
                                              "lists them with defaults")
    report_every_timesteps: int = option(1000, min=1, help="a metrics event (an 'iteration') every N env steps")
    checkpoint_every_timesteps: int = option(0, min=0, help="also checkpoint every N env steps; 0 = at the end only")
    checkpoint_at_end: bool = option(True, help="save when the run ends (completed or cancelled)")
    restore_from: str | None = option(None, help="a checkpoint folder of a XuanCe run to continue from")
    torch_num_threads: int | None = option(1, min=1, help="torch threads of the worker (mosaic/threads.py); "
                                                          "null = torch's default")
    heartbeat_interval_s: float = option(5.0, min=0.1, help="seconds between heartbeats")
    fastlane: FastLaneConfig = option(default_factory=FastLaneConfig, help="live frames of env 0")

    @property
    def algo(self) -> Algorithm:
        return algorithms.get(self.algorithm)

    def to_dict(self) -> dict[str, Any]:
        return configkit.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "XuanCeConfig":
        config = configkit.from_dict(cls, data)
        config.algorithm = config.algo.name
        refuse_turn_based(config.environment)
        if config.environment.api_type != "PARALLEL":
            raise ConfigError("environment.api_type", "XuanCe steps every agent at once: PARALLEL only")
        env = config.environment
        if env.family == "mpe" and "continuous_actions" not in env.env_kwargs and "discrete" not in config.algo.policies:
            # MPE's actions are discrete unless asked; an algorithm that acts only in boxes asks.
            env.env_kwargs = {**env.env_kwargs, "continuous_actions": True}
        config.algo_params = check_params(config)
        return config

    def observes_images(self) -> bool:
        from xuance_worker.envs import observes_images

        return observes_images(self.environment)

    def params(self) -> dict[str, UpstreamParam]:
        env = self.environment
        return xuance_params(self.algo.name, env.family, env.env_id, self.observes_images())

    def overrides(self) -> dict[str, Any]:
        """What MOSAIC sets over the yaml (the env-dependent ones are added at build time)."""
        out: dict[str, Any] = dict(self.algo_params)
        out.update(seed=self.seed, env_seed=self.seed, running_steps=self.total_timesteps,
                   dl_toolbox=self.backend, device="cpu", logger="tensorboard",
                   vectorize="DummyVecMultiAgentEnv", distributed_training=False,
                   render=False, render_mode="rgb_array")  # frames: FastLane, from env 0 (envs.py)
        if self.num_envs is not None:
            out["parallels"] = self.num_envs
        if self.learning_rate is not None:
            out["learning_rate"] = self.learning_rate
        if self.batch_size is not None:
            out["buffer_size" if self.algo.on_policy else "batch_size"] = self.batch_size
        return out


def refuse_turn_based(environment: EnvironmentConfig) -> None:
    """Classic board and card games take turns (PettingZoo's AEC API only): XuanCe has no turn-based loop."""
    from mosaic.envs import load_env_module, supported_api_types

    if "PARALLEL" not in supported_api_types(load_env_module(environment.family, environment.env_id)):
        raise ConfigError("environment.env_id", f"{environment.env_id} is turn-based (PettingZoo offers it as an "
                                                "AEC env only): XuanCe 1.4.4's multi-agent loop steps every agent "
                                                "at once and has no turn-based mode; its action masks "
                                                "(use_actions_mask) mark the actions open to each agent within "
                                                "such a simultaneous step and do not make agents take turns")


def check_params(config: XuanCeConfig) -> dict[str, Any]:
    params = config.params()
    checked = {}
    for name, value in config.algo_params.items():
        field = f"algo_params.{name}"
        if name in OWNED:
            raise ConfigError(field, f"is set by {OWNED[name]}" + (
                f": set the top-level {OWNED[name]!r} instead" if OWNED[name] in XuanCeConfig.__dataclass_fields__
                else ""))
        if name in ATARI_ENV_OPTIONS:
            raise ConfigError(field, "is an option of XuanCe's own Atari env, which this worker does not use: the "
                                     "env is built by MOSAIC's env layer (set environment.env_kwargs instead)")
        if name in CNN_OPTIONS and name not in params:
            raise ConfigError(field, f"applies to image observations only (XuanCe's Basic_CNN); "
                                     f"{config.environment.env_id} observes no images")
        if name not in params:
            import difflib

            allowed = sorted(n for n in params if n not in OWNED)
            close = difflib.get_close_matches(name, allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(field, f"{config.algorithm} has no option {name!r}{hint}; allowed: {', '.join(allowed)}")
        checked[name] = params[name].check(value, field)
    merged = {**{n: p.default for n, p in params.items()}, **checked, **config.overrides()}
    total, parallels = merged["running_steps"], merged["parallels"]
    if total < parallels:
        raise ConfigError("total_timesteps", f"{total} is less than one step of the {parallels} envs (num_envs)")
    if config.algo.on_policy:
        if merged["buffer_size"] < parallels:
            raise ConfigError("batch_size", f"{merged['buffer_size']} env steps per update is less than one "
                                            f"step of the {parallels} envs (num_envs)")
        if total < merged["buffer_size"]:
            raise ConfigError("total_timesteps", f"{total} is less than one update ({merged['buffer_size']} env "
                                                 f"steps, batch_size): {config.algorithm} would not learn")
    elif merged.get("start_training", 0) >= total:
        raise ConfigError("algo_params.start_training",
                          f"{merged['start_training']} env steps is not below total_timesteps ({total}): "
                          "nothing would be learned")
    return checked
