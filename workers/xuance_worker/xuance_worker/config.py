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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from mosaic import configkit
from mosaic.workerkit.checkpoints import STATE_FILE, is_checkpoint
from mosaic.configkit import option
from mosaic.workerkit.envs import EnvironmentConfig
from mosaic.errors import ConfigError, UserError
from mosaic.workerkit.devices import check_gpus
from mosaic.workerkit.options import UpstreamOption, bounds_by_meaning, unknown_option
from mosaic.workerkit.run_fields import FieldMap, Reporting, Resources, RoundedBudget, RunConfig

from xuance_worker import algorithms
from xuance_worker.checkpoint import MODEL_FILE, XuanCeCheckpointState  # noqa: F401  (its checkpoint state)
from xuance_worker.algorithms import Algorithm

BASE_ENV = "simple_spread_v3"  # whose yaml an env without its own file takes
IMAGE_YAML = "atari.yaml"  # XuanCe's multi-agent settings for pixel observations (Basic_CNN)
CNN_OPTIONS = ("filters", "kernels", "strides")  # Basic_CNN's layers, in the image yaml only
#: Options of XuanCe's own Atari env in the image yaml; the env here is MOSAIC's.
ATARI_ENV_OPTIONS = ("obs_type", "img_size", "num_stack", "frame_skip", "noop_max")

#: XuanCe options MOSAIC sets itself, and from what.
OWNED = {
    "seed": "seed", "env_seed": "seed", "running_steps": "total_timesteps", "parallels": "num_envs",
    "dl_toolbox": "backend", "agent": "algorithm", "env_name": "environment",
    "env_id": "environment.env_id", "continuous_action": "the env's action space",
    "policy": "the env's action space (algorithms.py)", "vectorize": "the worker (envs run in-process)",
    "device": "resources.gpus (0: 'cpu'; up to 1: 'cuda:0')", "logger": "the worker (TensorBoard in the run folder)",
    "log_dir": "the worker (the run folder)", "model_dir": "the worker (checkpoints/ of the run folder)",
    "render": "fastlane.enabled (frames of env 0)", "render_mode": "fastlane.enabled (frames of env 0)",
    "distributed_training": "the worker (one process)", "master_port": "the worker (one process)",
    "project_name": "the worker", "wandb_user_name": "the worker",
    "eval_interval": "XuanCe's benchmark mode, which MOSAIC does not use",
    "test_episode": "XuanCe's benchmark mode; `mosaic eval --episodes` plays trained policies",
    "use_cnn": "the env's observations (images: XuanCe's Basic_CNN)",
}


#: Bounds of XuanCe's numeric options, by name, where their meaning fixes them (XuanCe checks none itself: a
#: count of 0 or a probability of 2 fails or misbehaves only once training runs).
_ONE_OR_MORE = ("n_epochs", "n_minibatch", "batch_size", "buffer_size", "sync_frequency", "training_frequency",
                "recurrent_hidden_size", "N_recurrent_layers", "hidden_dim_hyper_net", "hidden_dim_mixing_net")
_FRACTIONS = ("gamma", "gae_lambda", "tau", "start_greedy", "end_greedy", "dropout")
_NOT_NEGATIVE = ("start_training", "decay_step_greedy", "clip_range", "value_clip_range", "ent_coef", "vf_coef",
                 "grad_clip_norm", "sigma", "start_noise", "end_noise", "target_kl", "weight_decay", "huber_delta",
                 "learning_rate", "learning_rate_actor", "learning_rate_critic", "end_factor_lr_decay")
BOUNDS = bounds_by_meaning(_ONE_OR_MORE, _FRACTIONS, _NOT_NEGATIVE)
#: String options whose values are the keys of a dict in XuanCe's torch utilities (option -> the dict's name).
CHOSEN_FROM = {"activation": "ActivationFunctions", "activation_action": "ActivationFunctions",
               "normalize": "NormalizeFunctions", "initialize": "InitializeFunctions"}


@functools.lru_cache(maxsize=None)
def xuance_choices(table: str) -> tuple[str, ...]:
    """The keys of one of XuanCe's name -> class tables (``xuance/torch/utils/__init__.py``), read from its source
    without importing it (torch's import takes seconds)."""
    import ast

    source = configs_folder().parent / "torch" / "utils" / "__init__.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == table for t in node.targets)):
            return tuple(k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return ()


def xuance_param(name: str, default: Any, comment: str = "") -> UpstreamOption:
    """One XuanCe option and its shipped default (``comment``: the yaml's own, if any), with its bounds or the
    values XuanCe has for it."""
    param = UpstreamOption(name, default, "XuanCe", comment)
    choices = xuance_choices(CHOSEN_FROM[name]) if name in CHOSEN_FROM else ()
    return param.bounded(*BOUNDS.get(name, (None, None)), choices=choices)


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
                  images: bool = False) -> dict[str, UpstreamOption]:
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
    return EnvironmentConfig(family="mpe", env_id="simple_spread_v3", api_type="PARALLEL", env_kwargs={})


DEFAULT_TOTAL_TIMESTEPS = 50_000
DEFAULT_REPORT_EVERY = 1000  # env steps between metrics events when reporting.every_timesteps is null
MAX_ENVS = 256


@dataclass
class XuanCeConfig(RunConfig):
    """A XuanCe run: one algorithm, one PettingZoo env, XuanCe's own hyperparameters."""

    FIELDS: ClassVar[FieldMap] = FieldMap(
        honoured={
            "algorithm": "XuanCe's agent (MAPPO, IPPO, QMIX, VDN, IQL, MADDPG, COMA) and the folder of its yaml",
            "environment.family": "the PettingZoo family, built by MOSAIC's env layer behind XuanCe's env registry",
            "environment.env_id": "the versioned PettingZoo id (XuanCe's env_id; it picks <algo>/mpe/<env_id>.yaml "
                                  "where XuanCe ships one)",
            "environment.env_kwargs": "the env constructor's keyword arguments",
            "seed": "XuanCe's seed and env_seed (env i of the vector gets seed + i)",
            "total_timesteps": "XuanCe's running_steps (env steps; a parallel step of all agents is one)",
            "num_envs": "XuanCe's parallels (stepped in-process, DummyVecMultiAgentEnv)",
            "learning_rate": "the yaml's learning_rate",
            "gamma": "the yaml's gamma",
            "batch_size": "off-policy: the yaml's batch_size (transitions per gradient step); on-policy: XuanCe's "
                          "minibatch, buffer_size // n_minibatch (the worker sets buffer_size = batch_size × "
                          "n_minibatch)",
            "checkpoint.every_timesteps": "XuanCe's save_model at the first report at or past each multiple",
            "checkpoint.at_end": "XuanCe's save_model when the run ends (completed or cancelled)",
            "checkpoint.keep": "the newest K periodic checkpoints are kept, older ones deleted",
            "checkpoint.restore_from": "XuanCe's load_model, and MOSAIC's counters (same algorithm and env id)",
            "reporting.every_timesteps": f"a metrics event every N env steps (XuanCe's loop has no iterations of "
                                         f"its own; null = {DEFAULT_REPORT_EVERY})",
            "reporting.heartbeat_interval_s": "heartbeats",
            "fastlane": "frames of env 0",
            "resources.threads": "torch threads of the worker (mosaic/workerkit/threads.py)",
            "resources.cpus": "CPUs the daemon reserves for the run",
            "resources.gpus": "XuanCe's device: 0 = 'cpu', up to 1 = 'cuda:0' (XuanCe trains on one device; "
                              "more is refused); refused where the environment's torch sees no GPU (CUDA "
                              "builds: docs/worker-environments.md, \"GPU builds\")",
            "algo_params": "XuanCe's yaml options by their own names (`--schema ALGO` lists them)",
        },
        refused={
            "environment.env_ids": "one env per run",
            "episodes": "a training worker: its budget is total_timesteps (`mosaic eval --episodes` plays "
                        "trained policies)",
        })

    algorithm: str = option("mappo", help=f"XuanCe algorithm: {', '.join(algorithms.usable())}, lower case (XuanCe's "
                                          "spelling, e.g. MAPPO, is accepted); traits: xuance_worker/algorithms.py")
    environment: EnvironmentConfig = option(default_factory=default_environment,
                                            help="PettingZoo env (a parallel API, or a turn-based game played in "
                                                 "turns), built by MOSAIC's env layer")
    seed: int = option(1, min=0, help="XuanCe's seed and env_seed (XuanCe's own examples use 1)")
    total_timesteps: int | None = option(DEFAULT_TOTAL_TIMESTEPS, min=1,
                                         help="env steps (a parallel step of all agents is one); null = "
                                              f"{DEFAULT_TOTAL_TIMESTEPS}")
    reporting: Reporting = option(default_factory=lambda: Reporting(every_timesteps=DEFAULT_REPORT_EVERY),
                                  help="metrics (an 'iteration') every N env steps, and heartbeats", merge=True)
    resources: Resources = option(merge=True, default_factory=lambda: Resources(threads=1),
                                  help="torch threads of the worker (default 1: mosaic/workerkit/threads.py), CPUs")
    backend: str = option("torch", choices=("torch",),
                          help="XuanCe's dl_toolbox; only torch: XuanCe's TensorFlow and MindSpore backends are "
                               "not installed in the worker's environment")

    @classmethod
    def algorithms(cls) -> Sequence[str]:
        return algorithms.usable()

    @property
    def algo(self) -> Algorithm:
        return algorithms.get(self.algorithm)

    @property
    def device(self) -> str:
        """XuanCe's ``device``: the CPU, or the first GPU torch sees when ``resources.gpus`` asks for one."""
        return "cuda:0" if self.resources.gpus > 0 else "cpu"

    @property
    def report_every(self) -> int:
        return self.reporting.every_timesteps or DEFAULT_REPORT_EVERY

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "XuanCeConfig":
        named = data.get("algorithm") if isinstance(data, Mapping) else None
        if isinstance(named, str) and named.lower() in algorithms.ALGORITHMS:
            algorithms.get(named)  # an algorithm the worker refuses, with its reason
        config = configkit.from_dict(cls, data)
        config.check_shared()
        if config.total_timesteps is None:
            config.total_timesteps = DEFAULT_TOTAL_TIMESTEPS
        if config.num_envs is not None and config.num_envs > MAX_ENVS:
            raise ConfigError("num_envs", f"{config.num_envs} envs in one process; allowed: 1 to {MAX_ENVS}")
        given = data.get("environment", {}).get("api_type") if isinstance(data.get("environment"), Mapping) else None
        choose_api_type(config.environment, given)
        env = config.environment
        if env.family == "mpe" and "continuous_actions" not in env.env_kwargs and "discrete" not in config.algo.policies:
            # MPE's actions are discrete unless asked; an algorithm that acts only in boxes asks.
            env.env_kwargs = {**env.env_kwargs, "continuous_actions": True}
        config.algo_params = check_params(config)
        check_gpus(config.resources.gpus, "torch", max_gpus=1)  # XuanCe's agent lives on one device
        return config

    def observes_images(self) -> bool:
        from xuance_worker.envs import observes_images

        return observes_images(self.environment)

    def params(self) -> dict[str, UpstreamOption]:
        env = self.environment
        return xuance_params(self.algo.name, env.family, env.env_id, self.observes_images())

    def shared_options(self) -> dict[str, tuple[str, Any]]:
        """XuanCe's yaml option -> (the shared field that sets it, its value), for the shared fields that are set."""
        out: dict[str, tuple[str, Any]] = {}
        if self.learning_rate is not None:
            out["learning_rate"] = ("learning_rate", self.learning_rate)
        if self.gamma is not None:
            out["gamma"] = ("gamma", self.gamma)
        if self.batch_size is not None:
            if self.algo.on_policy:
                # XuanCe's on-policy minibatch is buffer_size // n_minibatch (on_policy_marl.py)
                n_minibatch = self.algo_params.get("n_minibatch")
                if not isinstance(n_minibatch, int) or isinstance(n_minibatch, bool) or n_minibatch < 1:
                    n_minibatch = self.params()["n_minibatch"].default  # a bad value is refused by check_params
                out["buffer_size"] = ("batch_size", self.batch_size * n_minibatch)
            else:
                out["batch_size"] = ("batch_size", self.batch_size)
        return out

    def rounded_budget(self, start: int = 0) -> RoundedBudget | None:
        """XuanCe steps its ``num_envs`` envs together, so a run takes whole vector steps (from ``start``, a restored
        checkpoint's steps): rounded up."""
        parallels = self.num_envs if self.num_envs is not None else self.params()["parallels"].default
        return RoundedBudget.whole_units(self.total_timesteps, int(parallels), "vector step",
                                         f"one step of each of num_envs = {parallels} envs", start=start)

    def overrides(self) -> dict[str, Any]:
        """What MOSAIC sets over the yaml (the env-dependent ones are added at build time)."""
        out: dict[str, Any] = dict(self.algo_params)
        out.update(seed=self.seed, env_seed=self.seed, running_steps=self.total_timesteps,
                   dl_toolbox=self.backend, device=self.device, logger="tensorboard",
                   vectorize="DummyVecMultiAgentEnv", distributed_training=False,
                   render=False, render_mode="rgb_array")  # frames: FastLane, from env 0 (envs.py)
        if self.num_envs is not None:
            out["parallels"] = self.num_envs
        out.update({name: value for name, (_, value) in self.shared_options().items()})
        return out


def check_restore_from(config: XuanCeConfig, agents: Sequence[str]) -> None:
    """A XuanCe checkpoint of the same algorithm, env id and agents (``agents``: the env's, as probed), before any
    run folder exists (the validation hook, hooks.py)."""
    from mosaic.workerkit.checkpoints import TrainedAs, env_words, read_for_restore
    from xuance_worker.checkpoint import policies_in_words, trained_as

    path = config.checkpoint.restore_from
    field_name = "checkpoint.restore_from"
    allowed = "allowed: a checkpoint folder of a xuance run (<run folder>/checkpoints/<name>)"
    if not is_checkpoint(path):
        raise ConfigError(field_name, f"{path!r} is not a checkpoint (no {STATE_FILE} in it); {allowed}")
    wanted = TrainedAs("xuance", config.algorithm, env_words(config.environment), policies_in_words(agents))
    try:
        _, state = read_for_restore(XuanCeCheckpointState, path, wanted, trained_as, field_name)
    except ConfigError as exc:
        if "allowed: " in str(exc):
            raise
        what = str(exc).removeprefix(f"{field_name}: ")
        raise ConfigError(field_name, f"{what}; {allowed}") from None
    if not (Path(path) / state.model_file).is_file():
        raise ConfigError(field_name, f"has no XuanCe model file ({state.model_file}); allowed: a complete "
                                      "checkpoint of a xuance run")


def choose_api_type(environment: EnvironmentConfig, given: Any) -> None:
    """The API the worker drives: PARALLEL where the env has one (XuanCe steps every agent at once), AEC for a
    turn-based game (the turn adapter, envs.py). ``given`` is the config's own ``api_type``, if it set one:
    one the env's game cannot be played through is refused, naming what is."""
    from xuance_worker.envs import turn_based

    turns = turn_based(environment.family, environment.env_id)
    chosen = "AEC" if turns else "PARALLEL"
    if given is not None and given != chosen:
        why = (f"{environment.env_id} is turn-based (PettingZoo offers it as an AEC env only): the worker plays "
               "it in turns" if turns else
               f"{environment.env_id} has a parallel API, which XuanCe steps with every agent at once")
        raise ConfigError("environment.api_type", f"{given}: {why}; allowed: {chosen} (or leave it out)")
    environment.api_type = chosen


def check_params(config: XuanCeConfig) -> dict[str, Any]:
    params = config.params()
    shared = config.shared_options()
    checked = {}
    for name, value in config.algo_params.items():
        field_name = f"algo_params.{name}"
        if name in OWNED:
            raise ConfigError(field_name, f"is set by {OWNED[name]}" + (
                f": set the top-level {OWNED[name]!r} instead" if OWNED[name] in XuanCeConfig.__dataclass_fields__
                else ""))
        if name in shared:
            by = shared[name][0]
            raise ConfigError(by, f"and {field_name} both set XuanCe's {name}; allowed: one of them "
                                  f"(the shared {by}, or XuanCe's own {field_name})")
        if name in ATARI_ENV_OPTIONS:
            raise ConfigError(field_name, "is an option of XuanCe's own Atari env, which this worker does not use: "
                                          "the env is built by MOSAIC's env layer (set environment.env_kwargs "
                                          "instead)")
        if name in CNN_OPTIONS and name not in params:
            raise ConfigError(field_name, f"applies to image observations only (XuanCe's Basic_CNN); "
                                          f"{config.environment.env_id} observes no images")
        if name not in params:
            raise unknown_option("algo_params", name, sorted(n for n in params if n not in OWNED),
                                 f"XuanCe's {config.algorithm}")
        checked[name] = params[name].check(value, field_name)
    merged = {**{n: p.default for n, p in params.items()}, **checked, **config.overrides()}
    total, parallels = merged["running_steps"], merged["parallels"]
    if total < parallels:
        raise ConfigError("total_timesteps", f"{total} is less than one step of the {parallels} envs (num_envs)")
    if config.algo.on_policy:
        rollout = merged["buffer_size"]
        by = "batch_size" if "buffer_size" in shared else "algo_params.buffer_size"
        if rollout < parallels:
            raise ConfigError(by, f"{rollout} env steps per update (XuanCe's buffer_size) is less than one "
                                  f"step of the {parallels} envs (num_envs)")
        if total < rollout:
            raise ConfigError("total_timesteps", f"{total} is less than one update ({rollout} env steps, "
                                                 f"XuanCe's buffer_size, set by {by}): {config.algorithm} "
                                                 "would not learn")
    elif merged.get("start_training", 0) >= total:
        raise ConfigError("algo_params.start_training",
                          f"{merged['start_training']} env steps is not below total_timesteps ({total}): "
                          "nothing would be learned")
    return checked
