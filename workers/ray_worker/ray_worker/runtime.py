"""``RayWorkerRuntime``: one RLlib training run, start to finish.

Builds the env and the algorithm from a :class:`RayWorkerConfig`, trains
iteration by iteration, turns each RLlib result into MOSAIC telemetry, and
checkpoints. Between iterations it honours pause/cancel; a cancelled run
finishes the current iteration and checkpoints before it stops.
"""

from __future__ import annotations

import math
import os
import shutil
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from mosaic.workerkit.checkpoints import PeriodicCheckpoints, checkpoint_folder
from mosaic.workerkit.episode_stats import episode_statistics
from mosaic.errors import ConfigError
from mosaic.workerkit.lifecycle import RunCancelled
from mosaic.workerkit.program import run_started
from mosaic.workerkit.threads import limit_torch_threads
from mosaic.workerkit.cli import WorkerContext
from ray_worker import PACKAGES
from ray_worker.callbacks import EPISODES_KEY
from ray_worker.config import PolicyConfiguration, RayWorkerConfig
from ray_worker.environment import EnvironmentFactory
from ray_worker.policies import prepare

if TYPE_CHECKING:  # imported where it is used, at run time
    from ray_worker.checkpoint import RayCheckpointState

__all__ = ["EnvironmentFactory", "RayWorkerRuntime", "metrics_from_result", "start_ray"]

LOSS_KEYS_SKIPPED = ("num_", "weights_seq_no", "module_train_batch_size", "gradients_", "last_target")


def start_ray(config: RayWorkerConfig) -> bool:
    """Join ``rllib.address`` or start a local Ray sized for the run; True if we started it."""
    import ray

    if ray.is_initialized():
        return False
    rllib = config.rllib
    if rllib.address:
        ray.init(address=rllib.address, log_to_driver=True)
        return True
    # address="local": always a fresh private instance, never whatever cluster happens
    # to run on this machine (use rllib.address="auto" to join that one).
    ray.init(address="local", num_cpus=private_ray_cpus(config), num_gpus=math.ceil(config.resources.gpus),
             include_dashboard=False, log_to_driver=True)
    return True


def private_ray_cpus(config: RayWorkerConfig) -> int:
    """CPUs of the run's own Ray: ``resources.cpus`` when the run was given a reservation (the daemon's, a
    cluster cell's), so that RLlib stays inside it; else every core. Never fewer than the env runners and
    the learner need."""
    rllib = config.rllib
    need = math.ceil(rllib.num_env_runners * rllib.cpus_per_env_runner + 1)
    reserved = config.resources.cpus
    return max(math.ceil(reserved) if reserved else (os.cpu_count() or 1), need)


def learner_metrics(result: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Per-module learner scalars (losses, entropy, KL, learning rate)."""
    learners = result.get("learners") or {}
    out = {}
    for module_id, values in learners.items():
        if module_id == "__all_modules__" or not isinstance(values, Mapping):
            continue
        out[str(module_id)] = {k: float(v) for k, v in values.items()
                               if isinstance(v, (int, float)) and not isinstance(v, bool)
                               and not k.startswith(LOSS_KEYS_SKIPPED)}
    return out


def collect_episode_records(value: Any) -> list[dict[str, Any]]:
    """The iteration's episode records, however RLlib nested them on the way."""
    if isinstance(value, Mapping):
        if "returns" in value:
            return [dict(value)]
        return [r for v in value.values() for r in collect_episode_records(v)]
    if isinstance(value, (list, tuple)):
        return [r for v in value for r in collect_episode_records(v)]
    return []


def metrics_from_result(result: Mapping[str, Any], iteration: int, timesteps: int,
                        total: int, steps_per_s: float) -> tuple[dict[str, Any], list[dict]]:
    """One RLlib result → a MOSAIC ``metrics`` payload and the iteration's episode records."""
    episodes = collect_episode_records((result.get("env_runners") or {}).get(EPISODES_KEY))
    payload = {"iteration": iteration, "timesteps_total": timesteps, "total_timesteps": total,
               "env_steps_per_s": steps_per_s, **episode_statistics(episodes),
               "learner": learner_metrics(result)}
    return payload, episodes


class RayWorkerRuntime:
    def __init__(self, config: RayWorkerConfig, context: WorkerContext) -> None:
        self.config = config
        self.ctx = context
        self.run_dir = Path(config.output_dir) if config.output_dir else context.run_dir.root
        self.checkpoints = PeriodicCheckpoints(config.checkpoint.keep)

    # -- checkpoints ---------------------------------------------------------
    def _save(self, algo: Any, iteration: int, timesteps: int, episodes: int, periodic: bool) -> Path:
        from ray_worker.checkpoint import RayCheckpointState

        path = checkpoint_folder(self.run_dir, iteration)
        if path.exists():
            shutil.rmtree(path)
        algo.save_to_path(str(path))
        layout, league, config = getattr(self, "layout", None), getattr(self, "league", None), self.config
        RayCheckpointState(
            iteration=iteration, timesteps_total=timesteps, episodes=episodes, run_id=config.run_id,
            algorithm=config.rllib_algorithm, policy_configuration=config.policy_configuration.name,
            agent_to_module=dict(layout.agent_to_module) if layout else {},
            baselines=list(layout.baselines) if layout else [],
            environment=config.to_dict()["environment"], ctde=config.to_dict()["ctde"],
            self_play=league.state() if league else None).write(path)
        self.ctx.emitter.checkpoint_saved(path=str(path), iteration=iteration, timesteps_total=timesteps)
        if periodic:
            self.checkpoints.add(path)
        return path

    def _restore(self, algo: Any, path: str) -> "RayCheckpointState":
        from ray_worker.checkpoint import RayCheckpointState

        state = RayCheckpointState.read(path, "checkpoint.restore_from", "the ray worker")
        league = getattr(self, "league", None)
        if league is not None and state.self_play:
            self._restore_pool(algo, league, state.self_play)
        algo.restore_from_path(str(Path(path).resolve()))
        self.ctx.emitter.log(f"restored from {path} at iteration {state.iteration}, "
                             f"{state.timesteps_total} env steps")
        return state

    def _restore_pool(self, algo: Any, league: Any, saved: dict[str, Any]) -> None:
        """Rebuild the checkpoint's pool (its modules must exist before the weights load)."""
        from ray_worker.self_play import add_snapshot, remove_snapshot, snapshot_owner

        try:
            league.load(saved)
        except ValueError as exc:
            raise ConfigError("checkpoint.restore_from", str(exc)) from None
        mapping, trainable = league.mapping(), league.trainable
        for module_id in league.pool:
            if module_id not in algo.config.policies:
                add_snapshot(algo, module_id, mapping, source=snapshot_owner(module_id), trainable=trainable)
        for module_id in list(algo.config.policies):
            if snapshot_owner(module_id) and module_id not in league.pool:
                remove_snapshot(algo, module_id, mapping, trainable=trainable)

    def _self_play_step(self, algo: Any, league: Any, records: list[dict], iteration: int) -> dict[str, Any]:
        """Score the iteration's games; freeze snapshots of learners that earned one."""
        from ray_worker.self_play import EXPLOITER, add_snapshot, copy_weights, remove_snapshot, set_mapping

        summary = league.record(records)
        added, evictions, resets = [], [], []
        for learner in league.due(iteration):
            rate = league.window_win_rate(learner.module_id)
            new, evicted = league.admit(iteration, learner.module_id)
            mapping = league.mapping()
            add_snapshot(algo, new, mapping, source=learner.module_id, trainable=league.trainable)
            if evicted:
                remove_snapshot(algo, evicted, mapping, trainable=league.trainable)
            reset = learner.role == EXPLOITER
            if reset:  # the exploiter found a weakness; it starts again from main
                copy_weights(algo, league.main_of(learner.side), learner.module_id)
                resets.append(learner.module_id)
            added.append(new)
            evictions.append(evicted)
            self.ctx.emitter.log(
                f"self-play: snapshot {new} of {learner.module_id} joined the pool (window win rate {rate:.2f})"
                + (f"; {evicted} left it" if evicted else "")
                + (f"; {learner.module_id} restarts from {league.main_of(learner.side)}" if reset else ""),
                self_play_event="snapshot_added", module_id=new, source=learner.module_id, evicted=evicted,
                exploiter_reset=reset)
        for learner in league.stale(iteration):
            copy_weights(algo, league.main_of(learner.side), learner.module_id)
            resets.append(learner.module_id)
            self.ctx.emitter.log(f"self-play: {learner.module_id} found no weakness in time; it restarts from "
                                 f"{league.main_of(learner.side)}", self_play_event="exploiter_reset",
                                 module_id=learner.module_id)
        if resets:
            summary["exploiters_reset"] = resets
        if added:
            summary.update(snapshot_added=added[0], snapshots_added=added, evicted=evictions[0],
                           evictions=[e for e in evictions if e], exploiters_reset=resets,
                           pool=league.pool, pool_size=len(league.pool),
                           pools={s: league.pool_of(s) for s in league.sides})
        elif self.config.self_play.opponent_sampling == "prioritized":
            set_mapping(algo, league.mapping())  # win rates moved: re-weight the draw
        return summary

    # -- the run -------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        import ray
        import torch
        from ray.tune.registry import register_env

        from ray_worker.algorithms import build_algorithm_config, seed_replay_buffer
        from ray_worker.analytics import MetricsSinks
        from ray_worker.callbacks import MosaicCallbacks

        cfg, emit, control = self.config, self.ctx.emitter, self.ctx.control
        factory, env_info, layout = prepare(cfg)
        self.layout = layout
        limit_torch_threads(cfg.resources.threads)
        started_ray = start_ray(cfg)
        if control.handles_signals:
            control.install_signal_handlers()  # again: ray.init installs its own
        env_name = f"mosaic-{cfg.environment.family}-{cfg.environment.env_id}"
        from mosaic.fastlane.config import FastLaneTarget

        fastlane = FastLaneTarget(cfg.run_id, str(self.ctx.run_dir.root), cfg.fastlane)
        register_env(env_name, EnvironmentFactory(cfg.environment, fastlane, global_state=factory.global_state,
                                                    critic_actions=factory.critic_actions))
        league = None
        if cfg.policy_configuration is PolicyConfiguration.SELF_PLAY:
            from ray_worker.self_play import ORDINALS, League

            ORDINALS.reset()  # this process's episodes (the local env runner's) numbered from 0 again
            league = League(cfg.self_play, layout.sides, cfg.seed)
        self.league = league
        algo_config = build_algorithm_config(cfg, env_info, layout, env_name, MosaicCallbacks,
                                             mapping_fn=league.mapping() if league else None)
        algo_config.learners(**cfg.learner_resources())  # resources.gpus: local learner, or one per GPU
        algo = algo_config.build_algo()
        seed_replay_buffer(algo, cfg.seed)
        sinks = None
        progress = self.ctx.progress
        for role, thread in learner_threads(algo):
            progress.watch_thread(thread, role)
        if cfg.fastlane.enabled:  # a run ended by its watchdog still leaves no segment behind
            from mosaic.fastlane.publisher import finish_run as _finish_lanes

            control.on_abort(lambda: _finish_lanes(self.ctx.run_dir.root, cfg.run_id))
        try:
            iteration, timesteps, episodes = 0, 0, 0
            if league is not None:
                from ray_worker.self_play import copy_weights, snapshot_id

                for side in league.sides:  # the first opponents: each main as initialised
                    main = league.main_of(side)
                    copy_weights(algo, main, snapshot_id(main, 0))
            if cfg.checkpoint.restore_from:
                state = self._restore(algo, cfg.checkpoint.restore_from)
                iteration, timesteps, episodes = state.iteration, state.timesteps_total, state.episodes
            run_started(
                emit, cfg, worker="ray", packages=PACKAGES,
                resources={**cfg.to_dict()["resources"], "env_runners": cfg.rllib.num_env_runners,
                           "ray": ray.cluster_resources(),
                           "torch_threads": torch.get_num_threads(),
                           "ray_nodes": sum(1 for n in ray.nodes() if n.get("Alive"))},
                algorithm=cfg.algorithm, env=cfg.to_dict()["environment"],
                policy_configuration=cfg.policy_configuration.name, seed=cfg.seed,
                total_timesteps=cfg.total_timesteps, agents=list(env_info.agents),
                modules=layout.to_dict(), restored_from=cfg.checkpoint.restore_from,
            )
            sinks = MetricsSinks(self.run_dir, cfg.run_id, cfg.tensorboard, cfg.wandb, cfg.wandb_project,
                                 cfg.wandb_mode, cfg.to_dict())
            derived = "" if cfg.rllib.stall_timeout_s is not None else ", derived from the batch size"
            progress.start(cfg.stall_timeout(), f"rllib.stall_timeout_s{derived}")
            every = cfg.checkpoint.every_timesteps
            next_save = every * (timesteps // every + 1) if every else None
            try:
                while timesteps < cfg.total_timesteps:
                    control.checkpoint()
                    t0 = time.perf_counter()
                    result = algo.train()
                    elapsed = time.perf_counter() - t0
                    iteration += 1
                    progress.tick(iteration)
                    new_steps = steps_this_iteration(result)
                    timesteps += new_steps
                    payload, records = metrics_from_result(result, iteration, timesteps,
                                                           cfg.total_timesteps,
                                                           new_steps / max(elapsed, 1e-9))
                    for record in records:
                        emit.episode(episode=episodes, length=record["length"], returns=record["returns"],
                                     modules=record.get("modules", {}),
                                     illegal_actions=record.get("illegal_actions", 0))
                        episodes += 1
                    payload["num_episodes_lifetime"] = episodes
                    if league is not None:
                        payload["self_play"] = self._self_play_step(algo, league, records, iteration)
                    emit.metrics(**payload)
                    sinks.write(payload)
                    if next_save is not None and timesteps >= next_save:  # the first iteration end at/past it
                        self._save(algo, iteration, timesteps, episodes, periodic=True)
                        next_save = every * (timesteps // every + 1)
            except RunCancelled:
                progress.stop()
                if cfg.checkpoint.at_end and iteration > 0:
                    self._save(algo, iteration, timesteps, episodes, periodic=False)
                raise
            progress.stop()
            final = None
            if cfg.checkpoint.at_end:
                final = self._save(algo, iteration, timesteps, episodes, periodic=False)
            return {"timesteps_total": timesteps, "iterations": iteration, "episodes": episodes,
                    "final_checkpoint": str(final) if final else None}
        finally:
            progress.stop()  # stopping the algorithm ends its learner threads
            if sinks is not None:
                sinks.close()
            algo.stop()
            if cfg.fastlane.enabled:  # segments of env runners that did not close their env
                from mosaic.fastlane.publisher import finish_run

                finish_run(self.ctx.run_dir.root, cfg.run_id)
            if started_ray:
                ray.shutdown()


def learner_threads(algo: Any) -> list[tuple[str, threading.Thread]]:
    """Background threads of RLlib's local learner that training cannot go on without.

    IMPALA and APPO learners update in a learner thread (and, on GPUs, feed it
    from loader threads); if one dies, ``algo.train()`` waits for it for ever.
    Remote learners (``num_learners`` > 0) live in other processes: a stall
    there shows as missing progress instead.
    """
    found: list[tuple[str, threading.Thread]] = []
    group = getattr(algo, "learner_group", None)
    learner = getattr(group, "_learner", None) if group is not None and group.is_local else None
    thread = getattr(learner, "_learner_thread", None)
    if isinstance(thread, threading.Thread):
        found.append(("RLlib's learner thread", thread))
    for loader in getattr(learner, "_gpu_loader_threads", None) or []:
        if isinstance(loader, threading.Thread):
            found.append(("RLlib's GPU loader thread", loader))
    return found


def steps_this_iteration(result: Mapping[str, Any]) -> int:
    """Env steps sampled in this iteration (RLlib may hand back numpy or Stats values)."""
    value = (result.get("env_runners") or {}).get("num_env_steps_sampled")
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0
