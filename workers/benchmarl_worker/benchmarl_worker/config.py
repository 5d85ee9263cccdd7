"""A MOSAIC config for a BenchMARL run, and BenchMARL's own config values from it.

The shared fields become fields of BenchMARL's own config dataclasses: ``ExperimentConfig`` (budget, envs,
learning rate, discount, minibatch, devices), the algorithm's ``<Name>Config`` and the task's ``TaskConfig``
(``environment.env_kwargs``), over the yaml defaults BenchMARL ships (``options.py``: read, not copied).
``algo_params`` are any other field of ``ExperimentConfig`` or of the algorithm's config, by BenchMARL's own
names, checked against the dataclasses with errors naming ``algo_params.<name>`` and the allowed names.
Reading them needs BenchMARL's package folder (found without importing it), so validation runs in this
worker's own environment.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Mapping, Sequence

from mosaic import configkit
from mosaic.configkit import option
from mosaic.errors import ConfigError
from mosaic.workerkit.devices import check_gpus
from mosaic.workerkit.options import UpstreamOption, unknown_option
from mosaic.workerkit.run_fields import Environment, FieldMap, Reporting, Resources, RoundedBudget, RunConfig

from benchmarl_worker import ALGORITHMS, FAMILIES, options
from benchmarl_worker.options import Algorithm

#: BenchMARL's other task families, and why a run cannot train on them here.
REFUSED_FAMILIES = {
    "smacv2": "BenchMARL's SMACv2 tasks need StarCraft II (a game binary) and the smacv2 package, neither of "
              "which the worker's environment can hold",
    "meltingpot": "dm-meltingpot needs TensorFlow, opencv-python (libGL) and pygame-ce, which replaces the pygame "
                  "PettingZoo's MPE draws with; not in the worker's environment",
    "magent": "magent2 needs pygame-ce, which replaces the pygame PettingZoo's MPE draws with; not in the "
              "worker's environment",
}

#: ``ExperimentConfig`` fields MOSAIC sets itself, and from what.
OWNED = {
    "sampling_device": "resources.gpus", "train_device": "resources.gpus", "buffer_device": "resources.gpus",
    "max_n_frames": "total_timesteps", "max_n_iters": "total_timesteps",
    "loggers": "the worker (MOSAIC telemetry through BenchMARL's Callback; BenchMARL's own loggers off)",
    "project_name": "the worker (no W&B logger)", "wandb_extra_kwargs": "the worker (no W&B logger)",
    "create_json": "the worker (marl-eval JSON is not written yet)",
    "save_folder": "the worker (benchmarl/ in the run folder)",
    "restore_file": "checkpoint.restore_from", "restore_map_location": "checkpoint.restore_from",
    "checkpoint_interval": "checkpoint.every_timesteps", "checkpoint_at_end": "checkpoint.at_end",
    "keep_checkpoints_num": "checkpoint.keep",
    "render": "fastlane",
    **dict.fromkeys(("evaluation", "evaluation_interval", "evaluation_episodes", "evaluation_deterministic_actions",
                     "evaluation_static"),
                    "the worker (BenchMARL evaluates only into its own loggers, which the worker does not use)"),
}
#: ``TaskConfig`` fields MOSAIC sets itself (PettingZoo's ``task``: the versioned PettingZoo id of the task).
OWNED_TASK = {"task": "environment.env_id (BenchMARL's task picks the PettingZoo env)"}
ON, OFF = "on_policy_", "off_policy_"


def default_environment() -> "BenchMARLEnvironment":
    return BenchMARLEnvironment(family="vmas", env_id="balance")


@dataclass
class BenchMARLEnvironment(Environment):
    """A BenchMARL task: its environment family and its task name."""

    family: str = option("vmas", help=f"BenchMARL's environment: {', '.join(FAMILIES)} (smacv2, meltingpot and "
                                      "magent are refused with the reason)")
    env_id: str = option("balance", help="BenchMARL's task name in the family (balance, navigation, "
                                         "simple_spread, ...): `mosaic workers show benchmarl` lists them")
    env_kwargs: dict = option(default_factory=dict, help="fields of the task's TaskConfig over BenchMARL's yaml "
                                                         "(VMAS: n_agents, max_steps, ...; PettingZoo: N, "
                                                         "max_cycles, ...)")

    def describe(self) -> dict[str, Any]:
        return {"family": self.family, "env_id": self.env_id, "env_kwargs": dict(self.env_kwargs)}


@dataclass
class BenchMARLModel:
    """BenchMARL's MLP (``benchmarl.models.MlpConfig``), by its own field names; null: the value of BenchMARL's
    ``conf/model/layers/mlp.yaml`` (``MlpConfig.get_from_yaml()``), filled in when the config is validated."""

    num_cells: list[Annotated[int, option(min=1, allowed="a layer width: an integer >= 1")]] | None = option(
        None, help="MlpConfig.num_cells: the hidden layers' widths (null: BenchMARL's yaml)",
        allowed="a list of layer widths (integers >= 1; [] for no hidden layer), or null")
    activation_class: str | None = option(
        None, help="MlpConfig.activation_class, as BenchMARL's yaml names it (torch.nn.Tanh) (null: BenchMARL's yaml)",
        allowed="torch.nn.<an activation module that takes no required argument> (torch.nn.ReLU, torch.nn.Tanh, "
                "torch.nn.ELU, ...; the installed torch's list), or null")

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in options.MODEL_FIELDS}


@dataclass
class BenchMARLConfig(RunConfig):
    """A BenchMARL run: one algorithm on one task, BenchMARL's own defaults."""

    FIELDS: ClassVar[FieldMap] = FieldMap(
        honoured={
            "algorithm": "BenchMARL's algorithm config (mappo: MappoConfig, ..., iql: IqlConfig) over its yaml",
            "environment.family": "BenchMARL's environment: vmas (VmasTask) or pettingzoo (PettingZooTask)",
            "environment.env_id": "BenchMARL's task name in the family (VmasTask.BALANCE is balance)",
            "environment.env_kwargs": "fields of the task's TaskConfig over BenchMARL's task yaml",
            "seed": "Experiment(seed=...): torch, numpy and python seeded, and the envs",
            "total_timesteps": "ExperimentConfig.max_n_frames (a frame is one env step of one of the vectorised "
                               "envs); BenchMARL collects whole batches, so the run rounds up to a whole number "
                               "of <kind>_collected_frames_per_batch, said up front; null = BenchMARL's "
                               "max_n_frames",
            "num_envs": "ExperimentConfig.on_policy_n_envs_per_worker or off_policy_n_envs_per_worker (the "
                        "algorithm's kind); VMAS steps them as one batch, PettingZoo in a SerialEnv",
            "learning_rate": "ExperimentConfig.lr (Adam's lr of every loss)",
            "gamma": "ExperimentConfig.gamma",
            "batch_size": "on-policy: ExperimentConfig.on_policy_minibatch_size; off-policy: "
                          "ExperimentConfig.off_policy_train_batch_size (frames per gradient step)",
            "checkpoint.every_timesteps": "BenchMARL's experiment state (Experiment.state_dict) saved at the "
                                          "first iteration end at or past each multiple",
            "checkpoint.at_end": "BenchMARL's experiment state saved when the run ends (completed or cancelled)",
            "checkpoint.keep": "the newest K periodic checkpoints are kept, older ones deleted",
            "checkpoint.restore_from": "Experiment.load_state_dict of a benchmarl checkpoint of the same "
                                       "algorithm, task and agents (networks and target networks, replay "
                                       "buffers, collector, counters; the Adam optimisers' state too, which the "
                                       "worker adds through BenchMARL's Callback); training continues to "
                                       "total_timesteps",
            "reporting.every_timesteps": "a metrics event at the first iteration end at or past each multiple; "
                                         "null = every BenchMARL iteration (one collected batch and its training)",
            "reporting.heartbeat_interval_s": "heartbeats",
            "resources.threads": "torch threads of the worker (mosaic/workerkit/threads.py)",
            "resources.cpus": "CPUs the daemon reserves for the run",
            "resources.gpus": "ExperimentConfig's sampling_device, train_device and buffer_device: 0 = 'cpu', up "
                              "to 1 = 'cuda:0'; refused where the environment's torch sees no GPU",
            "algo_params": "fields of BenchMARL's ExperimentConfig and of the algorithm's config, by their own "
                           "names (`--schema ALGO` lists them)",
        },
        refused={
            "environment.env_ids": "one task per run",
            "episodes": "a training worker: its budget is total_timesteps",
            "fastlane": "not built yet: BenchMARL steps its envs inside TorchRL's collector, which hands the "
                        "worker whole batches, not frames (VMAS renders headless here, through pyglet and EGL)",
        })

    algorithm: str = option("mappo", help=f"BenchMARL algorithm: {', '.join(ALGORITHMS)}")
    environment: BenchMARLEnvironment = option(default_factory=default_environment,
                                               help="BenchMARL task: family (vmas, pettingzoo) and task name")
    seed: int = option(0, min=0, help="Experiment(seed=...) (BenchMARL's own default: 0)")
    total_timesteps: int | None = option(None, min=1, help="env steps (BenchMARL's frames); null = BenchMARL's "
                                                           "max_n_frames; rounded up to whole collected batches")
    reporting: Reporting = option(default_factory=Reporting, merge=True,
                                  help="metrics (null: every BenchMARL iteration) and heartbeats")
    resources: Resources = option(merge=True, default_factory=lambda: Resources(threads=1),
                                  help="torch threads of the worker (default 1: mosaic/workerkit/threads.py), CPUs")
    model: BenchMARLModel = option(default_factory=BenchMARLModel,
                                   help="Experiment(model_config=...): the MLP of the actors (and of the critics "
                                        "unless critic_model is given; the Q-networks of qmix, vdn, iql)")
    critic_model: BenchMARLModel | None = option(
        None, help="Experiment(critic_model_config=...): the critics' MLP; null = the model's (BenchMARL's own "
                   "rule); a field left null takes the model's value")

    @classmethod
    def algorithms(cls) -> Sequence[str]:
        return ALGORITHMS

    @property
    def algo(self) -> Algorithm:
        return options.algorithm(self.algorithm)

    @property
    def kind(self) -> str:
        """``on_policy_`` or ``off_policy_``: the prefix of the ExperimentConfig fields the algorithm reads."""
        return ON if self.algo.on_policy else OFF

    @property
    def device(self) -> str:
        return "cuda:0" if self.resources.gpus > 0 else "cpu"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BenchMARLConfig":
        config = configkit.from_dict(cls, data)
        config.check_shared()
        check_task(config.environment)
        config.algo_params = check_params(config)
        check_models(config)
        if config.total_timesteps is None:
            config.total_timesteps = int(options.experiment_options()["max_n_frames"].default)
        check_batches(config)
        check_gpus(config.resources.gpus, "torch", max_gpus=1)  # BenchMARL trains on one device
        return config

    # -- BenchMARL's values ------------------------------------------------------------------------
    def shared_options(self) -> dict[str, tuple[str, Any]]:
        """ExperimentConfig field -> (the shared field that sets it, its value), for the shared fields set."""
        out: dict[str, tuple[str, Any]] = {}
        if self.learning_rate is not None:
            out["lr"] = ("learning_rate", self.learning_rate)
        if self.gamma is not None:
            out["gamma"] = ("gamma", self.gamma)
        if self.batch_size is not None:
            out["on_policy_minibatch_size" if self.algo.on_policy else "off_policy_train_batch_size"] = \
                ("batch_size", self.batch_size)
        if self.num_envs is not None:
            out[f"{self.kind}n_envs_per_worker"] = ("num_envs", self.num_envs)
        return out

    def experiment_values(self) -> dict[str, Any]:
        """Every ExperimentConfig field: BenchMARL's yaml, then algo_params, the shared fields, and what the worker
        owns (save_folder and restore_file are set by the runtime)."""
        values = {name: param.default for name, param in options.experiment_options().items()}
        values.update({k: v for k, v in self.algo_params.items() if k in options.experiment_options()})
        values.update({name: value for name, (_, value) in self.shared_options().items()})
        values.update(sampling_device=self.device, train_device=self.device, buffer_device=self.device,
                      max_n_frames=self.total_timesteps, max_n_iters=None, loggers=[], create_json=False,
                      wandb_extra_kwargs={}, evaluation=False, render=False, save_folder=None, restore_file=None,
                      restore_map_location=None, checkpoint_interval=0, checkpoint_at_end=False,
                      keep_checkpoints_num=None)
        return values

    def algorithm_values(self) -> dict[str, Any]:
        """The algorithm's config fields: its yaml, then algo_params."""
        params = options.algorithm_options(self.algorithm)
        return {**{n: p.default for n, p in params.items()},
                **{k: v for k, v in self.algo_params.items() if k in params}}

    def task_values(self) -> dict[str, Any]:
        """The task's TaskConfig fields: its yaml, then env_kwargs."""
        env = self.environment
        return {**{n: p.default for n, p in options.task_options(env.family, env.env_id).items()},
                **env.env_kwargs}

    def model_values(self, critic: bool = False) -> dict[str, Any]:
        """The fields of BenchMARL's ``MlpConfig`` of the actors (``critic``: of the critics), as its yaml writes
        them; the other fields stay the yaml's (``MlpConfig.get_from_yaml()``)."""
        return (self.critic_model if critic and self.critic_model is not None else self.model).values()

    def setting(self, name: str) -> Any:
        return self.experiment_values()[name]

    @property
    def frames_per_batch(self) -> int:
        return int(self.setting(f"{self.kind}collected_frames_per_batch"))

    @property
    def envs(self) -> int:
        return int(self.setting(f"{self.kind}n_envs_per_worker"))

    def rounded_budget(self, start: int = 0) -> RoundedBudget | None:
        """BenchMARL collects whole batches of ``<kind>_collected_frames_per_batch`` frames (from ``start``, a
        restored checkpoint's frames, which are whole batches): rounded up."""
        return RoundedBudget.whole_units(self.total_timesteps, self.frames_per_batch, "collection",
                                         f"BenchMARL's {self.kind}collected_frames_per_batch, {self.envs} envs "
                                         f"of {self.frames_per_batch // self.envs} steps", start=start)


def check_task(environment: BenchMARLEnvironment) -> None:
    """A family the worker trains on, a task BenchMARL ships for it, and env_kwargs of its TaskConfig."""
    family, task = environment.family, environment.env_id
    allowed = ", ".join(FAMILIES)
    if family in REFUSED_FAMILIES:
        raise ConfigError("environment.family", f"{family!r}: {REFUSED_FAMILIES[family]}; allowed: {allowed}")
    if family not in FAMILIES:
        raise ConfigError("environment.family", f"{family!r} is not one of BenchMARL's environments here; "
                                                f"allowed: {allowed}")
    tasks = options.task_names(family)
    if task not in tasks:
        close = difflib.get_close_matches(str(task), tasks, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError("environment.env_id", f"{task!r} is not a BenchMARL {family} task{hint}; allowed: "
                                                f"{', '.join(tasks)}")
    params = options.task_options(family, task)
    for key, value in environment.env_kwargs.items():
        field_name = f"environment.env_kwargs.{key}"
        if key in OWNED_TASK:
            raise ConfigError(field_name, f"is set by {OWNED_TASK[key]}")
        if key not in params:
            raise unknown_option("environment.env_kwargs", key, [n for n in params if n not in OWNED_TASK],
                                 f"BenchMARL's {family}/{task} TaskConfig")
        environment.env_kwargs[key] = params[key].check(value, field_name)


def check_models(config: BenchMARLConfig) -> None:
    """``model`` with BenchMARL's yaml filled in where null, ``critic_model`` with the model's; an activation class
    the installed torch has (``options.activation_classes``)."""
    defaults = options.model_defaults()
    for name, value in config.model.values().items():
        if value is None:
            setattr(config.model, name, defaults[name])
    if config.critic_model is not None:
        for name, value in config.critic_model.values().items():
            if value is None:
                setattr(config.critic_model, name, getattr(config.model, name))
    allowed = options.activation_classes()
    for section in ("model", "critic_model"):
        model = getattr(config, section)
        if model is not None and model.activation_class not in allowed:
            value = model.activation_class
            close = [a for a in allowed if str(value).lower() in (a.lower(), a.rpartition(".")[2].lower())] \
                or difflib.get_close_matches(str(value), allowed, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"{section}.activation_class", f"{value!r} is not an activation module of the installed "
                                                              f"torch{hint}; allowed: {', '.join(allowed)}")


def allowed_params(config: BenchMARLConfig) -> dict[str, UpstreamOption]:
    """The options ``algo_params`` may name for the config's algorithm: its config's fields, then
    ExperimentConfig's that it reads (the other kind's on/off-policy fields and the owned ones left out)."""
    other = OFF if config.algo.on_policy else ON
    experiment = {n: p for n, p in options.experiment_options().items()
                  if n not in OWNED and not n.startswith(other)}
    return {**options.algorithm_options(config.algorithm), **experiment}


def check_params(config: BenchMARLConfig) -> dict[str, Any]:
    params = allowed_params(config)
    shared = config.shared_options()
    other = OFF if config.algo.on_policy else ON
    checked = {}
    for name, value in config.algo_params.items():
        field_name = f"algo_params.{name}"
        if name in OWNED:
            by = OWNED[name]
            raise ConfigError(field_name, f"is set by {by}" + (
                f": set the top-level {by!r} instead" if by.partition(".")[0] in BenchMARLConfig.__dataclass_fields__
                else ""))
        if name in shared:
            by = shared[name][0]
            raise ConfigError(by, f"and {field_name} both set BenchMARL's {name}; allowed: one of them "
                                  f"(the shared {by}, or BenchMARL's own {field_name})")
        if name.startswith(other) and name in options.experiment_options():
            kind = "on-policy" if config.algo.on_policy else "off-policy"
            own = [n for n in params if n.startswith(config.kind)]
            raise ConfigError(field_name, f"{config.algorithm} is {kind}: BenchMARL reads only the "
                                          f"{config.kind}* options for it; allowed: {', '.join(own)}")
        if name not in params:
            raise unknown_option("algo_params", name, list(params), f"BenchMARL's {config.algorithm}")
        checked[name] = params[name].check(value, field_name)
    return checked


def check_batches(config: BenchMARLConfig) -> None:
    """What BenchMARL and TorchRL would only fail on (or quietly change) once the run started."""
    batch, envs, kind = config.frames_per_batch, config.envs, config.kind
    by_envs = "num_envs" if config.num_envs is not None else f"algo_params.{kind}n_envs_per_worker"
    if batch % envs:
        # TorchRL's collector would round each batch up to a multiple of the envs, and BenchMARL's loop would
        # ask it for more batches than its budget holds
        raise ConfigError(by_envs, f"{envs} envs do not divide {kind}collected_frames_per_batch ({batch}): "
                                   f"each env steps the same number of times per batch; allowed: a divisor of "
                                   f"{batch}, or set algo_params.{kind}collected_frames_per_batch to a multiple "
                                   f"of {envs}")
    if config.algo.on_policy:
        minibatch = config.setting("on_policy_minibatch_size")
        by = "batch_size" if config.batch_size is not None else "algo_params.on_policy_minibatch_size"
        if minibatch > batch:
            raise ConfigError(by, f"{minibatch} frames per minibatch is more than a collected batch "
                                  f"({batch} frames, on_policy_collected_frames_per_batch); allowed: 1 to {batch}")


def check_restore_from(config: BenchMARLConfig, agents: Sequence[str]) -> None:
    """A benchmarl checkpoint of the same algorithm, task and agents, collected in batches of the same size (the
    run's iterations count on from it), before any run folder exists (the validation hook, hooks.py)."""
    from mosaic.workerkit.checkpoints import TrainedAs, env_words, read_for_restore

    from benchmarl_worker.checkpoint import BenchMARLCheckpointState, policies_in_words, trained_as

    path, field_name = config.checkpoint.restore_from, "checkpoint.restore_from"
    wanted = TrainedAs("benchmarl", config.algorithm, env_words(config.environment), policies_in_words(agents))
    folder, state = read_for_restore(BenchMARLCheckpointState, path, wanted, trained_as, field_name)
    if not (folder / state.state_file).is_file():
        raise ConfigError(field_name, f"has no BenchMARL experiment state ({state.state_file}); allowed: a "
                                      "complete checkpoint of a benchmarl run")
    if state.frames_per_batch and state.frames_per_batch != config.frames_per_batch:
        raise ConfigError(f"algo_params.{config.kind}collected_frames_per_batch",
                          f"{config.frames_per_batch}: the checkpoint collected batches of {state.frames_per_batch} "
                          f"frames, and BenchMARL counts a resumed run's iterations in batches; allowed: "
                          f"{state.frames_per_batch}")
