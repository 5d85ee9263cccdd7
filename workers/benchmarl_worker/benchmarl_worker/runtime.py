"""``BenchMARLRuntime``: one BenchMARL training run, in this process, start to finish.

The steps a BenchMARL user writes without Hydra (its README's "Python" example), with MOSAIC around them:

1. BenchMARL's config dataclasses: ``ExperimentConfig``, the algorithm's config and the task's, from the
   MOSAIC config over BenchMARL's yaml (``config.py``), and its MLP (``MlpConfig.get_from_yaml()``) with the
   config's ``model`` and ``critic_model`` fields;
2. ``Experiment(task, algorithm_config, model_config, seed, config, callbacks=[...])``, its folder under
   ``benchmarl/`` of the run folder, BenchMARL's own loggers off;
3. observation: a BenchMARL ``Callback`` (``telemetry.py``);
4. the safe point, at the end of every iteration: pause, cancel, progress ticks, periodic and final
   checkpoints; a cancel not honoured within seconds there is honoured between gradient steps, without a
   final checkpoint (the iteration is half done);
5. checkpoints: BenchMARL's ``Experiment.state_dict()`` (networks, target networks, replay buffers, collector,
   counters) saved under BenchMARL's own file name, plus MOSAIC's state file; ``checkpoint.restore_from``
   loads one with ``Experiment.load_state_dict`` and ``Experiment.run()`` goes on from its iteration.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from mosaic.errors import ConfigError
from mosaic.workerkit.checkpoints import CheckpointCadence
from mosaic.workerkit.cli import WorkerContext
from mosaic.workerkit.program import run_started
from mosaic.workerkit.threads import limit_torch_threads

from benchmarl_worker import PACKAGES
from benchmarl_worker.checkpoint import BenchMARLCheckpointState, agents_of, state_file_name
from benchmarl_worker.config import BenchMARLConfig

#: A cancel waits this long for the iteration's end (and its checkpoint) before it is honoured mid-iteration.
CANCEL_GRACE_S = 4.0


def quiet() -> None:
    """Before BenchMARL (tqdm, pygame, TorchRL) is imported: no progress bar, SIGTERM still MOSAIC's."""
    os.environ.setdefault("TQDM_DISABLE", "1")
    os.environ.setdefault("RL_WARNINGS", "False")
    os.environ.setdefault("SDL_NO_SIGNAL_HANDLERS", "1")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def build_task(config: BenchMARLConfig) -> Any:
    """BenchMARL's TaskClass of the config's task, its TaskConfig from BenchMARL's yaml and ``env_kwargs``."""
    from benchmarl.environments import task_config_registry

    env = config.environment
    return task_config_registry[f"{env.family}/{env.env_id}"].get_task(config=config.task_values())


def continuous_actions(config: BenchMARLConfig, task: Any) -> bool:
    """The action space BenchMARL will choose (``Experiment._set_action_type``), or a ConfigError when the
    algorithm acts in none the task offers."""
    algo = config.algo
    task_kinds = [k for k, ok in (("discrete", task.supports_discrete_actions()),
                                  ("continuous", task.supports_continuous_actions())) if ok]
    if task.supports_continuous_actions() and algo.continuous and config.setting("prefer_continuous_actions"):
        return True
    if task.supports_discrete_actions() and algo.discrete:
        return False
    if task.supports_continuous_actions() and algo.continuous:
        return True
    algo_kinds = ["discrete" if k == "discrete" else "continuous" for k in algo.action_spaces]
    raise ConfigError("algorithm", f"{config.algorithm} acts in {' and '.join(algo_kinds)} action spaces; BenchMARL's "
                                   f"{config.environment.family}/{config.environment.env_id} has "
                                   f"{' and '.join(task_kinds)} actions only")


def probe_task(config: BenchMARLConfig) -> dict[str, Any]:
    """Build the task's env once: its agent groups and the action space the run will use."""
    task = build_task(config)
    continuous = continuous_actions(config, task)
    try:
        env = task.get_env_fun(num_envs=1, continuous_actions=continuous, seed=config.seed, device="cpu")()
    except (TypeError, ValueError, AssertionError) as exc:
        raise ConfigError("environment.env_kwargs", f"rejected by {config.environment.env_id}: {exc}") from None
    except (ImportError, KeyError) as exc:  # a package the task needs is missing here (TorchRL says so by a KeyError)
        raise ConfigError("environment.env_id", f"{config.environment.env_id} cannot be built in the worker's "
                                                f"environment: {type(exc).__name__}: {exc}") from None
    try:
        groups = {group: list(agents) for group, agents in task.group_map(env).items()}
        max_steps = task.max_steps(env)
    finally:
        env.close()
    return {"groups": groups, "actions": "continuous" if continuous else "discrete", "max_steps": max_steps}


def build_experiment(config: BenchMARLConfig, folder: Path, callbacks: list[Any]) -> Any:
    """BenchMARL's Experiment of the config, its files in ``folder``."""
    from benchmarl.algorithms import algorithm_config_registry
    from benchmarl.experiment import Experiment, ExperimentConfig

    folder.mkdir(parents=True, exist_ok=True)
    experiment_config = ExperimentConfig(**{**config.experiment_values(), "save_folder": str(folder)})
    algorithm_config = algorithm_config_registry[config.algorithm](**config.algorithm_values())
    return Experiment(task=build_task(config), algorithm_config=algorithm_config,
                      model_config=model_config(config), critic_model_config=model_config(config, critic=True),
                      seed=config.seed, config=experiment_config, callbacks=callbacks)


def model_config(config: BenchMARLConfig, critic: bool = False) -> Any:
    """BenchMARL's ``MlpConfig`` of the actors (``critic``: of the critics): its yaml's, with the config's
    ``model`` (``critic_model``) fields, classes named as the yaml names them (``torch.nn.ReLU``)."""
    import torch
    from benchmarl.models import MlpConfig

    values = config.model_values(critic)
    activation = getattr(torch.nn, values["activation_class"].rpartition(".")[2])  # checked: config.check_models
    return dataclasses.replace(MlpConfig.get_from_yaml(), num_cells=list(values["num_cells"]),
                               activation_class=activation)


class BenchMARLRuntime:
    def __init__(self, config: BenchMARLConfig, context: WorkerContext) -> None:
        self.config = config
        self.ctx = context
        self.experiment: Any = None
        self.reporter: Any = None
        self.groups: dict[str, list[str]] = {}
        self.cadence = CheckpointCadence.of(config.checkpoint)
        self.finished = False

    # -- checkpoints -----------------------------------------------------------------------------
    def save_checkpoint(self, periodic: bool = False) -> Path:
        import torch

        exp, cfg = self.experiment, self.config
        name = state_file_name(exp.total_frames)
        state = BenchMARLCheckpointState(
            iteration=exp.n_iters_performed, timesteps_total=exp.total_frames, episodes=self.reporter.episodes,
            run_id=cfg.run_id, algorithm=cfg.algorithm, state_file=name, environment=cfg.environment.describe(),
            groups=self.groups, frames_per_batch=cfg.frames_per_batch, config=cfg.to_dict())
        return self.cadence.save(self.ctx.emitter, self.ctx.run_dir.root, state,
                                 lambda folder: torch.save(exp.state_dict(), folder / name), periodic)

    def restore(self, path: str) -> BenchMARLCheckpointState:
        """Load a checkpoint that validation checked (config.check_restore_from)."""
        import torch

        state = BenchMARLCheckpointState.read(path, "checkpoint.restore_from", "the benchmarl worker")
        saved = torch.load(Path(path) / state.state_file, map_location=self.config.device, weights_only=False)
        self.experiment.load_state_dict(saved)
        return state

    # -- the safe points -------------------------------------------------------------------------
    def on_iteration_end(self, exp: Any) -> None:
        from mosaic.workerkit.lifecycle import RunCancelled

        rep, frames = self.reporter, exp.total_frames
        rep.reached(frames)  # a metrics event when reporting.every_timesteps passed (null: every iteration)
        self.ctx.progress.tick(exp.n_iters_performed)
        self.finished = exp.n_iters_performed >= exp.config.get_max_n_iters(exp.on_policy)
        if self.cadence.due(frames):
            self.save_checkpoint(periodic=True)
        if self.finished:
            rep.flush()
            if self.cadence.final_due(frames):
                self.save_checkpoint()
        try:
            self.ctx.control.checkpoint()
        except RunCancelled:
            rep.flush()
            if self.cadence.final_due(frames):
                self.save_checkpoint()
            raise

    def on_step(self) -> None:
        """Inside an iteration: a cancel that the iteration's end did not honour within seconds."""
        control = self.ctx.control
        if control.cancel_requested and time.monotonic() - (control.cancel_requested_at or 0) > CANCEL_GRACE_S:
            self.ctx.emitter.log(f"cancelled inside iteration {self.experiment.n_iters_performed + 1}: its batch and "
                                 "training are not checkpointed", level="warning")
            control.checkpoint()

    # -- the run -----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, emit = self.config, self.ctx.emitter
        root = self.ctx.run_dir.root
        quiet()
        limit_torch_threads(cfg.resources.threads)
        probe = probe_task(cfg)
        self.groups = probe["groups"]
        import torch

        from benchmarl_worker.telemetry import MosaicCallback, Reporter

        self.reporter = Reporter(emit, groups=self.groups, total_timesteps=cfg.total_timesteps,
                                 report_every=cfg.reporting.every_timesteps)
        callback = MosaicCallback(self.reporter, self.on_iteration_end, self.on_step)
        self.experiment = exp = build_experiment(cfg, root / "benchmarl", [callback])
        restored, restore_from = None, cfg.checkpoint.restore_from
        if restore_from:
            restored = self.restore(restore_from)
            self.reporter.resume_at(restored.iteration, restored.episodes, restored.timesteps_total)
            self.cadence.last_saved = restored.timesteps_total
        run_started(
            emit, cfg, worker="benchmarl", packages=PACKAGES,
            resources={"cpus": cfg.resources.cpus or 1.0, "gpus": cfg.resources.gpus, "device": cfg.device,
                       "num_envs": cfg.envs, "torch_threads": torch.get_num_threads()},
            algorithm=cfg.algorithm, env=cfg.environment.describe(), seed=cfg.seed,
            total_timesteps=cfg.total_timesteps, agents=agents_of(self.groups), groups=self.groups,
            policy_configuration="PARAMETER_SHARING" if cfg.setting("share_policy_params") else "INDEPENDENT",
            actions=probe["actions"], frames_per_batch=cfg.frames_per_batch,
            iterations=exp.config.get_max_n_iters(exp.on_policy), restored_from=restore_from,
            benchmarl_folder=str(exp.folder_name))
        if restored is not None:  # run_started is the run's first event; then what it resumed from
            emit.log(f"restored from {restore_from} at {restored.timesteps_total} env steps "
                     f"(iteration {restored.iteration})")
        bound = max(600.0, cfg.frames_per_batch * 0.1)
        self.ctx.progress.start(bound, f"algo_params.{cfg.kind}collected_frames_per_batch × 0.1 s (at least 600 s)")
        self.reporter.start_clock()
        t0 = time.perf_counter()
        if exp.n_iters_performed < exp.config.get_max_n_iters(exp.on_policy):
            exp.run()  # closes the experiment when it ends, or fails or is cancelled
        else:
            exp.close()
        return {"timesteps_total": exp.total_frames, "episodes": self.reporter.episodes,
                "iterations": exp.n_iters_performed, "train_seconds": round(time.perf_counter() - t0, 3)}
