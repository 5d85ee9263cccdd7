"""``XuanCeRuntime``: one XuanCe training run, in this process, start to finish.

The steps a XuanCe user writes (``get_arguments``, ``make_envs``, the agent
from ``REGISTRY_Agents``, ``agent.train``), with MOSAIC around them:

1. XuanCe's arguments: its yaml defaults, the config's overrides, and what the
   env decides (the policy class for its action space, ``continuous_action``);
2. the env: MOSAIC's env layer behind a registry entry (``envs.py``), stepped
   in-process (``DummyVecMultiAgentEnv``), seeded from the config;
3. observation: a XuanCe callback and the agent's ``log_infos`` (``telemetry.py``);
4. the safe point, after every vector step: pause, cancel, progress ticks,
   periodic checkpoints;
5. checkpoints with XuanCe's own ``save_model`` (policy, optimisers, torch RNG)
   plus MOSAIC's state file; ``checkpoint.restore_from`` continues from one.

XuanCe's TensorBoard files go to ``tensorboard/`` of the run folder, its banners
to stderr (the worker CLI keeps stdout for telemetry), tqdm is switched off.
"""

from __future__ import annotations

import os
import time
from argparse import Namespace
from pathlib import Path
from typing import Any

from mosaic.workerkit.checkpoints import CheckpointCadence
from mosaic.workerkit.deferred import defer
from mosaic.errors import ConfigError
from mosaic.workerkit.lifecycle import RunCancelled
from mosaic.workerkit.program import run_started
from mosaic.workerkit.threads import limit_torch_threads
from mosaic.workerkit.cli import WorkerContext
from xuance_worker import PACKAGES

from xuance_worker import envs as env_adapter
from xuance_worker import learner_shims
from xuance_worker.checkpoint import MODEL_FILE, XuanCeCheckpointState  # noqa: F401 (re-exported)
from xuance_worker.config import XuanCeConfig
from xuance_worker.telemetry import Reporter, make_callback



#: Imported at the top of XuanCe's agent base classes for its W&B logger, which a MOSAIC run never uses (the
#: worker sets XuanCe's logger to TensorBoard): about 0.8 s of every XuanCe process's start, deferred to a first
#: use that never comes.
DEFERRED = ("wandb",)


def quiet_xuance() -> None:
    """Before XuanCe (and tqdm) are imported: no progress bars, W&B not imported until used."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("SDL_NO_SIGNAL_HANDLERS", "1")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    defer(*DEFERRED)


def probe_env(config: XuanCeConfig) -> dict[str, Any]:
    """Build the env once: its agents and spaces, checked against what XuanCe can learn on."""
    spaces = env_adapter.env_spaces(config.environment)
    agents = spaces["agents"]
    action_spaces, observation_spaces = spaces["action_spaces"], spaces["observation_spaces"]
    env_id, algo = config.environment.env_id, config.algo
    if len(agents) < 2:
        raise ConfigError("environment", f"{env_id} has a single agent; XuanCe's multi-agent learners need two "
                                         "or more")
    keep_in = [k for k in env_adapter.AGENTS_LEAVE.get(env_id, ()) if config.environment.env_kwargs.get(k, True)]
    if keep_in:
        raise ConfigError("environment.env_kwargs", f"{env_id}: its agents can be killed and leave the episode, and "
                                                    "XuanCe's multi-agent loop needs every agent at every step: set "
                                                    f"{' and '.join(keep_in)} to false")
    kinds = {a: env_adapter.action_kind(s) for a, s in action_spaces.items()}
    bad = sorted({k for k in kinds.values() if k not in algo.policies})
    if bad:
        hint = ""
        if config.environment.family == "mpe":
            want = "true" if "box" in algo.policies else "false"
            hint = f"; for MPE set environment.env_kwargs.continuous_actions to {want}"
        raise ConfigError("environment", f"{algo.name} acts in {' and '.join(algo.action_spaces)} action spaces; "
                                         f"{env_id} has {', '.join(bad)}{hint}")
    if len(set(kinds.values())) > 1:
        raise ConfigError("environment", f"{env_id}: agents with different kinds of action space are not supported")
    try:
        codec = env_adapter.ObservationCodec(observation_spaces)
    except ValueError as exc:
        raise ConfigError("environment", f"{env_id}: {exc}") from None
    kinds_seen = set(codec.kinds.values())
    images = env_adapter.IMAGE in kinds_seen
    if images and len(kinds_seen) > 1:
        raise ConfigError("environment", f"{env_id}: some agents observe images and some do not; XuanCe builds "
                                         "one kind of representation for a run")
    differ = (len({repr(s) for s in observation_spaces.values()}) > 1
              or len({repr(s) for s in action_spaces.values()}) > 1)
    settings: dict[str, Any] = {}
    if images:
        check_images(config, next(iter(observation_spaces.values())).shape, spaces["state_space"], differ)
        settings.update(representation=setting(config, "representation"), use_cnn=True)
    if differ:
        # One shared network cannot take inputs of different sizes; a network per agent can, and XuanCe's
        # MAPPO critic then needs the env's global state, as its stacked observations would not line up.
        if setting(config, "use_parameter_sharing"):
            raise ConfigError("algo_params.use_parameter_sharing",
                              f"{env_id}: its agents observe or act in different spaces, so one shared network "
                              "cannot serve them all: set it to false (a network per agent)")
        if algo.name == "mappo" and not setting(config, "use_global_state"):
            if "use_global_state" in config.algo_params:
                raise ConfigError("algo_params.use_global_state",
                                  f"{env_id}: its agents observe or act in different spaces, so MAPPO's critic "
                                  "cannot stack their observations: leave it out or set it to true (the critic "
                                  "reads the env's global state)")
            settings["use_global_state"] = True
    if config.environment.api_type == "AEC":  # a turn-based game: the turn adapter's masks (envs.py)
        if "use_actions_mask" in config.algo_params and not config.algo_params["use_actions_mask"]:
            raise ConfigError("algo_params.use_actions_mask", f"{env_id} is turn-based: the worker plays it in "
                                                              "turns through action masks; leave it out or set it "
                                                              "to true")
        settings["use_actions_mask"] = True
    if not algo.on_policy:
        check_replay_memory(config, codec, len(agents))
    return {"agents": agents, "action_kind": next(iter(kinds.values())), "settings": settings,
            "heterogeneous": differ, "observations": observations_report(codec),
            "action_spaces": {a: repr(s) for a, s in action_spaces.items()},
            "observation_spaces": {a: repr(s) for a, s in observation_spaces.items()}}


CNN_REPRESENTATIONS = ("Basic_CNN", "AC_CNN_Atari")  # XuanCe's representations for HxWxC images


def check_images(config: XuanCeConfig, image: tuple[int, ...], state_space: Any, differ: bool) -> None:
    """What XuanCe's CNN path cannot do: a flat global state, when the env's is an image, and other representations."""
    env_id, algo = config.environment.env_id, config.algo
    representation = setting(config, "representation")
    if representation not in CNN_REPRESENTATIONS:
        raise ConfigError("algo_params.representation", f"{representation!r} takes flat vectors; {env_id} observes "
                                                         f"images: use one of {', '.join(CNN_REPRESENTATIONS)}")
    check_cnn_layers(config, image)
    flat_state = state_space is None or len(getattr(state_space, "shape", ())) == 1
    if flat_state:
        return
    why = f"{env_id}'s global state is an image ({'x'.join(map(str, state_space.shape))})"
    if algo.name == "qmix":
        raise ConfigError("algorithm", f"qmix: XuanCe's QMIX mixer reads the global state as a flat vector; {why}")
    if algo.name == "mappo" and differ:
        raise ConfigError("environment", f"{env_id}: its agents observe or act in different spaces, which XuanCe's "
                                         f"MAPPO critic serves from a flat global state; {why}")
    if algo.name == "mappo" and setting(config, "use_global_state"):
        raise ConfigError("algo_params.use_global_state", f"XuanCe's MAPPO critic reads the global state as a flat "
                                                          f"vector; {why}: leave it false (the critic stacks the "
                                                          "agents' images)")


def cnn_output_size(height: int, width: int, kernels: list[int], strides: list[int]) -> list[tuple[int, int]]:
    """Height and width after each of XuanCe's CNN layers (its ``cnn_block``: padding (kernel - stride) // 2)."""
    sizes = []
    for kernel, stride in zip(kernels, strides):
        padding = (kernel - stride) // 2
        height = int((height + 2 * padding - (kernel - 1) - 1) / stride + 1)
        width = int((width + 2 * padding - (kernel - 1) - 1) / stride + 1)
        sizes.append((height, width))
    return sizes


def check_cnn_layers(config: XuanCeConfig, image: tuple[int, ...]) -> None:
    """One filters/kernels/strides entry per layer, positive integers, and images that the layers do not shrink away."""
    layers = {name: setting(config, name) for name in ("filters", "kernels", "strides")}
    for name, values in layers.items():
        if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
            raise ConfigError(f"algo_params.{name}", f"{values!r}: one positive integer per CNN layer")
    if len({len(v) for v in layers.values()}) > 1:
        raise ConfigError("algo_params.filters", "filters, kernels and strides need one entry per CNN layer; given "
                          + ", ".join(f"{len(v)} {n}" for n, v in layers.items()))
    sizes = cnn_output_size(image[0], image[1], layers["kernels"], layers["strides"])
    for layer, (height, width) in enumerate(sizes, 1):
        if height < 1 or width < 1:
            raise ConfigError("algo_params.kernels", f"{config.environment.env_id}'s {image[0]}x{image[1]} images "
                                                     f"shrink to nothing at CNN layer {layer} (kernels "
                                                     f"{layers['kernels']}, strides {layers['strides']}): use "
                                                     "fewer layers, smaller kernels or strides, or larger images")


def check_replay_memory(config: XuanCeConfig, codec: Any, n_agents: int) -> None:
    """XuanCe's replay buffer holds float32 observations and next observations: refuse one larger than the RAM."""
    import numpy as np

    size = setting(config, "buffer_size")
    per_transition = sum(2 * 4 * int(np.prod(s.shape)) for s in codec.spaces.values())
    need, ram = size * per_transition, physical_memory()
    if ram and need > ram:
        raise ConfigError("algo_params.buffer_size",
                          f"{size} transitions of {config.environment.env_id}'s observations take "
                          f"{need / 2**30:.0f} GiB in XuanCe's replay buffer (float32, observations and next "
                          f"observations of {n_agents} agents); this machine has {ram / 2**30:.0f} GiB: at most "
                          f"{ram // per_transition} fit")


def physical_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def observations_report(codec: Any) -> dict[str, str]:
    """Agent → how XuanCe takes its observation, for run_started and --dry-run."""
    out = {}
    for agent, space in codec.raw.items():
        kind = codec.kinds[agent]
        shape = "x".join(map(str, getattr(space, "shape", ()) or ()))
        if kind == env_adapter.IMAGE:
            out[agent] = f"image {shape} uint8 (XuanCe's CNN)"
        elif kind == env_adapter.FLATTENED:
            out[agent] = f"{codec.encodings()[agent]} by mosaic.workerkit.spaces, {codec.spaces[agent].shape[0]} numbers"
        else:
            out[agent] = f"vector {shape}"
    return out


def setting(config: XuanCeConfig, name: str) -> Any:
    """An option's value as the run will have it: the config's, else the yaml's default (None: no such option)."""
    if name in config.algo_params:
        return config.algo_params[name]
    param = config.params().get(name)
    return param.default if param is not None else None


def xuance_arguments(config: XuanCeConfig, run_root: Path, probe: dict[str, Any]) -> Namespace:
    """XuanCe's own arguments: its yaml, then the config, then what the env decides."""
    from xuance.common import get_arguments

    algo = config.algo
    overrides = config.overrides()
    overrides.update(probe.get("settings", {}))  # what the env requires (probe_env)
    overrides.update(policy=algo.policies[probe["action_kind"]], continuous_action=probe["action_kind"] == "box",
                     log_dir=str(run_root / "tensorboard"), model_dir=str(run_root / "checkpoints" / "xuance"),
                     env_name=env_adapter.TURNS_ENV_NAME if config.environment.api_type == "AEC"
                     else env_adapter.ENV_NAME, env_id=config.environment.env_id)
    args = get_arguments(algo.name, "mpe", config.environment.env_id,
                         config_path=str(config_path(config)), parser_args=Namespace(**overrides))
    args.mosaic_env = config.environment.describe()
    if config.fastlane.enabled:
        args.mosaic_fastlane = {"run_id": config.run_id, "run_dir": str(run_root),
                                "config": dict(config.fastlane.__dict__)}
    return args


def yaml_name(config: XuanCeConfig) -> str:
    """The run's XuanCe yaml, relative to XuanCe's configs folder (``mappo/atari.yaml``)."""
    from xuance_worker.config import configs_folder

    return config_path(config).relative_to(configs_folder()).as_posix()


def config_path(config: XuanCeConfig) -> Path:
    from xuance_worker.config import yaml_file

    return yaml_file(config.algo.name, config.environment.family, config.environment.env_id,
                     config.observes_images())


class XuanCeRuntime:
    def __init__(self, config: XuanCeConfig, context: WorkerContext) -> None:
        self.config = config
        self.ctx = context
        self.agent: Any = None
        self.reporter: Reporter | None = None
        self.cadence = CheckpointCadence.of(config.checkpoint)

    # -- checkpoints -----------------------------------------------------------
    def save_checkpoint(self, periodic: bool = False) -> Path:
        rep = self.reporter
        assert rep is not None and self.agent is not None
        state = XuanCeCheckpointState(iteration=rep.iteration, timesteps_total=rep.timesteps, episodes=rep.episodes,
                                      run_id=self.config.run_id, algorithm=self.config.algorithm,
                                      environment=self.config.environment.describe(), agents=list(rep.agents),
                                      config=self.config.to_dict())
        return self.cadence.save(self.ctx.emitter, self.ctx.run_dir.root, state,
                                 lambda folder: self.agent.save_model(MODEL_FILE, model_path=str(folder)), periodic)

    def restore(self, path: str) -> XuanCeCheckpointState:
        """Load a checkpoint that validation checked (same algorithm, env id and agents: config.check_restore_from)."""
        state = XuanCeCheckpointState.read(path, "checkpoint.restore_from", "the xuance worker")
        self.agent.load_model(str(Path(path) / state.model_file))
        self.agent.current_step = state.timesteps_total
        return state

    # -- the safe point --------------------------------------------------------
    def on_step_end(self, timesteps: int) -> None:
        rep = self.reporter
        assert rep is not None
        if rep.step_end(timesteps):
            self.ctx.progress.tick(rep.iteration)
            if self.cadence.due(timesteps):
                self.save_checkpoint(periodic=True)
        self.ctx.control.checkpoint()

    # -- the run -----------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, emit = self.config, self.ctx.emitter
        root = self.ctx.run_dir.root
        quiet_xuance()
        limit_torch_threads(cfg.resources.threads)
        probe = probe_env(cfg)
        import torch
        from xuance.environment import make_envs
        from xuance.torch.agents import REGISTRY_Agents

        env_adapter.register()
        learner_shims.register()
        args = xuance_arguments(cfg, root, probe)
        envs = make_envs(args)
        try:
            shared = bool(args.use_parameter_sharing)
            self.reporter = Reporter(emit, agents=list(envs.agents), shared=shared,
                                     total_timesteps=cfg.total_timesteps, report_every=cfg.report_every,
                                     family=cfg.environment.family, env_id=cfg.environment.env_id)
            callback = make_callback(self.reporter, self.on_step_end)
            self.agent = agent = REGISTRY_Agents[args.agent](args, envs, callback=callback)
            log_infos = agent.log_infos

            def observed_log_infos(info: dict, x_index: int) -> None:
                self.reporter.learner_values(info)
                log_infos(info, x_index)

            agent.log_infos = observed_log_infos
            restored, restore_from = None, cfg.checkpoint.restore_from
            if restore_from:
                restored = self.restore(restore_from)
                self.reporter.iteration, self.reporter.episodes = restored.iteration, restored.episodes
                self.reporter.timesteps = self.cadence.last_saved = restored.timesteps_total
                self.reporter.next_report = restored.timesteps_total + cfg.report_every
            run_started(
                emit, cfg, worker="xuance", packages=PACKAGES,
                resources={"cpus": cfg.resources.cpus or 1.0, "gpus": cfg.resources.gpus, "device": cfg.device,
                           "num_envs": agent.n_envs,
                           "torch_threads": torch.get_num_threads()},
                algorithm=cfg.algorithm, xuance_agent=args.agent, xuance_policy=args.policy,
                env=cfg.environment.describe(), policy_configuration="PARAMETER_SHARING" if shared else "INDEPENDENT",
                seed=cfg.seed, total_timesteps=cfg.total_timesteps, agents=list(envs.agents),
                restored_from=restore_from, set_for_env=probe.get("settings", {}),
                observations=probe["observations"], xuance_yaml=yaml_name(cfg))
            if restored is not None:  # run_started is the run's first event; then what it resumed from
                emit.log(f"restored from {restore_from} at {restored.timesteps_total} env steps")
            # A vector step takes milliseconds; an iteration that takes minutes is stuck.
            self.ctx.progress.start(max(300.0, cfg.report_every * 0.5), "reporting.every_timesteps × 0.5 s")
            remaining = cfg.total_timesteps - self.reporter.timesteps
            self.reporter.start_clock()
            t0 = time.perf_counter()
            try:
                if remaining > 0:
                    agent.train(max(1, -(-remaining // agent.n_envs)))
            except RunCancelled:
                if self.cadence.final_due(self.reporter.timesteps):
                    self.save_checkpoint()
                raise
            self.reporter.flush()
            if self.cadence.final_due(self.reporter.timesteps):
                self.save_checkpoint()
            agent.finish()
        finally:
            envs.close()
        return {"timesteps_total": self.reporter.timesteps, "episodes": self.reporter.episodes,
                "iterations": self.reporter.iteration, "train_seconds": round(time.perf_counter() - t0, 3)}
