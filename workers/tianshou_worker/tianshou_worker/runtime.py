"""``TianshouRuntime``: one Tianshou training run, in this process, start to finish.

The steps a Tianshou user writes with its algorithm API, with MOSAIC around them:

1. the envs: ``gymnasium.make`` behind Tianshou's ``DummyVectorEnv``, seeded with
   ``envs.seed(seed)`` (env *i* gets ``seed + i``, its action space too);
2. the algorithm: networks, policy and algorithm classes (``algorithms.py``);
3. a collector and replay buffer (online), or a data set collected now (offline:
   ``offline_data``), then ``algorithm.run_training(<Trainer>Params(...))`` for
   the whole budget as one Tianshou epoch;
4. observation: the wrapped ``collect`` and a Tianshou logger (``telemetry.py``);
5. the safe point (pause, cancel, progress ticks, periodic checkpoints, DQN's
   epsilon schedule): the trainer's ``training_fn``, which Tianshou calls before
   every training step (online), or the logger's update hook after every
   gradient step (offline);
6. tests and stopping (``test_every_timesteps``, ``stop_at_return``): Tianshou's
   own test collector, epochs and ``stop_fn``: the budget is split into epochs of
   about ``test_every_timesteps`` and Tianshou tests at the end of each;
7. checkpoints: the (learning) algorithm's ``state_dict`` (networks and optimisers) plus
   MOSAIC's state file; ``restore_from`` continues from one.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import Any

from mosaic.workerkit.checkpoints import CheckpointCadence, resolve
from mosaic.errors import ConfigError
from mosaic.workerkit.lifecycle import RunCancelled
from mosaic.workerkit.program import run_started
from mosaic.workerkit.threads import limit_torch_threads
from mosaic.workerkit.cli import WorkerContext
from tianshou_worker import PACKAGES

from tianshou_worker import algorithms
from tianshou_worker.numba_cache import cache_numba_functions
from tianshou_worker.config import TianshouConfig, epochs
from tianshou_worker.envs import make_vector_env, probe_env
from tianshou_worker.checkpoint import WEIGHTS_FILE, TianshouCheckpointState  # noqa: F401  (re-exported)
from tianshou_worker.telemetry import AGENT, Reporter, make_logger, observe_collector, observe_learner



def quiet() -> None:
    """Before pygame could be imported: SIGTERM must still reach MOSAIC's handler."""
    os.environ.setdefault("SDL_NO_SIGNAL_HANDLERS", "1")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")


def seed_everything(seed: int) -> None:
    import numpy as np
    import torch

    np.random.seed(seed)
    torch.manual_seed(seed)


def build_algorithm(config: TianshouConfig, spaces: algorithms.Spaces, expert_buffer: Any = None) -> Any:
    """The Tianshou algorithm; for a classic game, Tianshou's multi-agent one with it in the learner's seat.
    ``expert_buffer``: an imitation algorithm's expert data (gail; None when only its policy is needed).
    Every path that builds a policy or a buffer comes here first, so numba's cache is on before they compile."""
    cache_numba_functions()
    policy_kw, algo_kw = config.split_params()
    extra = {"expert_buffer": expert_buffer} if config.algo.expert_data else {}
    algo = algorithms.build(config.algorithm, spaces, list(config.hidden_sizes), config.learning_rate,
                            policy_kw, algo_kw, **extra)
    if config.classic:
        from tianshou_worker import classic

        algo = classic.build(algo, config.resolved_env_id, classic.seat_index(spaces.agents, config.learner_seat))
    if config.device != "cpu":  # resources.gpus: Tianshou's networks follow their parameters' device
        algo.to(config.device)
    return algo


def learner_of(config: TianshouConfig, algo: Any) -> Any:
    """The algorithm that learns: itself, or a classic game's learner seat. A checkpoint holds its state:
    Tianshou's multi-agent algorithm cannot load its own ``state_dict`` back (its members' optimiser states
    are unexpected keys to it), and Tianshou's tic-tac-toe example saves the learner's too."""
    if not config.classic:
        return algo
    agents = list(algo.policy.policies)
    from tianshou_worker import classic

    return algo.get_algorithm(agents[classic.seat_index(agents, config.learner_seat)])


def seats(config: TianshouConfig, spaces: algorithms.Spaces) -> dict[str, str]:
    """agent -> who plays it, for telemetry: the policy, and a classic game's random seat."""
    if not config.classic:
        return {AGENT: "policy"}
    from tianshou_worker import classic

    learner = spaces.agents[classic.seat_index(spaces.agents, config.learner_seat)]
    return {a: classic.LEARNER if a == learner else classic.OPPONENT for a in spaces.agents}


def load_checkpoint(path: str | Path, field: str) -> tuple[Path, TianshouCheckpointState, TianshouConfig, Any]:
    """(folder, state, config, algorithm with the checkpoint's weights) of a tianshou checkpoint or run."""
    import torch

    folder = resolve(path, field, "the tianshou worker")
    state = TianshouCheckpointState.read(folder, field, "the tianshou worker")
    data = {k: v for k, v in state.config.items() if k != "run_id"}
    data.update(run_id=state.run_id or "restored", fastlane={"enabled": False})
    data["checkpoint"] = {**dict(data.get("checkpoint") or {}), "restore_from": None}
    # played on the CPU wherever it trained: evaluation needs no GPU (the weights load with map_location="cpu")
    data["resources"] = {**dict(data.get("resources") or {}), "gpus": 0.0}
    config = TianshouConfig.from_dict(data)
    algo = build_algorithm(config, probe_env(config))
    learner_of(config, algo).load_state_dict(torch.load(folder / state.weights_file, map_location="cpu",
                                                        weights_only=False))
    return folder, state, config, algo


def check_restore(config: TianshouConfig) -> tuple[Path, TianshouCheckpointState]:
    """``restore_from``'s folder and state, when it is a checkpoint of the same algorithm, env and network."""
    from mosaic.workerkit.checkpoints import TrainedAs, read_for_restore
    from tianshou_worker.checkpoint import policies_in_words, trained_as

    assert config.restore_from
    wanted = TrainedAs("tianshou", config.algorithm, config.resolved_env_id, policies_in_words(config.hidden_sizes))
    return read_for_restore(TianshouCheckpointState, config.restore_from, wanted, trained_as)


def check_offline_source(config: TianshouConfig) -> None:
    """``offline_data.policy``: 'random', or a checkpoint of a tianshou run on the same env."""
    source = config.offline_data.policy
    if not config.algo.uses_data or source == "random":
        return
    state = TianshouCheckpointState.read(resolve(source, "offline_data.policy", "the tianshou worker"),
                                         "offline_data.policy", "the tianshou worker")
    if state.env_id != config.resolved_env_id:
        raise ConfigError("offline_data.policy", f"was trained on {state.env_id}; this run uses "
                                                 f"{config.resolved_env_id}")


class TianshouRuntime:
    def __init__(self, config: TianshouConfig, context: WorkerContext) -> None:
        self.config = config
        self.ctx = context
        self.algo: Any = None
        self.reporter: Reporter | None = None
        self.logger: Any = None
        self.cadence = CheckpointCadence.of(config.checkpoint)
        self.stop_reason = "budget"  # or why training ended before total_timesteps
        self.test_envs: Any = None

    # -- checkpoints -----------------------------------------------------------
    def save_checkpoint(self) -> Path:
        import torch

        rep = self.reporter
        assert rep is not None and self.algo is not None
        state = TianshouCheckpointState(iteration=rep.iteration, timesteps_total=rep.timesteps, episodes=rep.episodes,
                                        run_id=self.config.run_id, algorithm=self.config.algorithm,
                                        env_id=self.config.resolved_env_id, config=self.config.to_dict())
        return self.cadence.save(self.ctx.emitter, self.ctx.run_dir.root, state, lambda folder: torch.save(
            learner_of(self.config, self.algo).state_dict(), folder / WEIGHTS_FILE))

    def restore(self, path: str) -> TianshouCheckpointState:
        import torch

        folder, state = check_restore(self.config)
        learner_of(self.config, self.algo).load_state_dict(torch.load(folder / state.weights_file, map_location="cpu",
                                                                      weights_only=False))
        return state

    # -- the safe point --------------------------------------------------------
    def safe_point(self, *_: Any) -> None:
        rep = self.reporter
        assert rep is not None
        if self.config.eps_schedule is not None:
            learner_of(self.config, self.algo).policy.set_eps_training(self.config.eps_schedule.at(rep.timesteps))
        if rep.due():
            rep.report()
            self.ctx.progress.tick(rep.iteration)
            if self.cadence.due(rep.timesteps):
                self.save_checkpoint()
        self.ctx.control.checkpoint()

    def offline_update(self) -> None:
        assert self.reporter is not None
        self.reporter.gradient_step()
        self.safe_point()

    # -- the run -----------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, emit = self.config, self.ctx.emitter
        root = self.ctx.run_dir.root
        quiet()
        limit_torch_threads(cfg.resources.threads)
        spaces = probe_env(cfg)
        check_offline_source(cfg)
        import torch

        seed_everything(cfg.seed)
        fastlane = ({"run_id": cfg.run_id, "run_dir": str(root), "config": dict(cfg.fastlane.__dict__)}
                    if cfg.fastlane.enabled else None)
        envs = make_vector_env(cfg.resolved_env_id, cfg.num_envs, cfg.seed, fastlane, cfg.env_family)
        try:
            # imitation (gail): the expert's data set first, since the algorithm is built around it; its log
            # event follows run_started (every run's first event)
            expert, noted = self.collect_data(envs, None) if cfg.algo.expert_data else (None, None)
            self.algo = build_algorithm(cfg, spaces, expert)
            self.reporter = rep = Reporter(emit, total_timesteps=cfg.total_timesteps,
                                           report_every=cfg.report_every_timesteps, modules=seats(cfg, spaces))
            restored = None
            if cfg.restore_from:
                restored = self.restore(cfg.restore_from)
                rep.resume_at(restored.iteration, restored.episodes, restored.timesteps_total)
                self.cadence.last_saved = restored.timesteps_total
            self.logger = logger = make_logger(str(root / "tensorboard"), rep,
                                 self.offline_update if not cfg.algo.online else lambda: None)
            run_started(
                emit, cfg, worker="tianshou", packages=PACKAGES,
                resources={"cpus": 1, "gpus": cfg.resources.gpus, "device": cfg.device, "num_envs": cfg.num_envs,
                           "torch_threads": torch.get_num_threads()},
                algorithm=cfg.algorithm, tianshou_algorithm=type(self.algo).__name__,
                tianshou_policy=type(self.algo.policy).__name__,
                env={"family": cfg.env_family, "env_id": cfg.resolved_env_id,
                     "api_type": "AEC" if cfg.classic else "GYMNASIUM",
                     "env_kwargs": dict(cfg.environment.env_kwargs)},
                policy_configuration="INDEPENDENT", seed=cfg.seed, total_timesteps=cfg.total_timesteps,
                agents=list(rep.modules), modules=rep.modules, restored_from=cfg.restore_from)
            if noted is not None:
                emit.log(noted)
            if restored is not None:  # after run_started: it is every run's first event
                emit.log(f"restored from {cfg.restore_from} at {restored.timesteps_total} "
                         f"{'gradient' if not cfg.algo.online else 'env'} steps")
            # A training step takes milliseconds to seconds; an iteration that takes minutes is stuck.
            self.ctx.progress.start(max(300.0, cfg.report_every_timesteps * 0.5), "report_every_timesteps × 0.5 s")
            t0 = time.perf_counter()
            try:
                tests = self.test_collector() if cfg.test_every_timesteps else None
                if cfg.algo.online:
                    info = self.train_online(envs, tests)
                else:
                    info = self.train_offline(envs, tests)
                # the warm-up and Tianshou's training loop, as a Tianshou user times them: not the replay
                # buffer's set-up (numba compiles its index code there) nor the final checkpoint
                train_seconds = time.perf_counter() - (rep.training_started or t0)
                self.note_stop(info)
            except RunCancelled:
                if self.cadence.final_due(rep.timesteps):
                    self.save_checkpoint()
                raise
            rep.flush()
            if self.cadence.final_due(rep.timesteps):
                self.save_checkpoint()
            logger.finalize()
        finally:
            envs.close()
            if self.test_envs is not None:
                self.test_envs.close()
        summary = {"timesteps_total": rep.timesteps, "episodes": rep.episodes, "iterations": rep.iteration,
                   "train_seconds": round(train_seconds, 3), "stopped": self.stop_reason}
        if rep.tests:
            summary["last_test"] = rep.tests[-1]
        return summary

    # -- tests and stopping ----------------------------------------------------
    def test_collector(self) -> Any:
        """Tianshou's test collector: ``test_episodes`` envs seeded ``seed + num_envs + i``, one episode each,
        the policy in evaluation mode (DQN: ``eps_inference``, as in Tianshou's examples)."""
        from tianshou.data import Collector

        cfg = self.config
        self.test_envs = make_vector_env(cfg.resolved_env_id, cfg.test_episodes, cfg.seed + cfg.num_envs,
                                         family=cfg.env_family)
        return Collector(self.algo, self.test_envs, exploration_noise=True)

    def stop_fn(self) -> Any:
        threshold = self.config.stop_at_return
        return None if threshold is None else (lambda score: score >= threshold)

    def trainer_common(self, tests: Any, remaining: int) -> dict[str, Any]:
        """What every trainer is given: the epochs, the tests, the stop rule, the logger, quiet output."""
        cfg = self.config
        max_epochs, epoch_steps = epochs(remaining, cfg.test_every_timesteps)
        assert self.reporter is not None
        seat = list(self.reporter.modules.values()).index("policy")  # the learner's column of a game's returns
        reduce = (lambda returns: returns[:, seat]) if cfg.classic else None  # it scores tests and stop_fn
        return dict(max_epochs=max_epochs, epoch_num_steps=epoch_steps, test_collector=tests,
                    multi_agent_return_reduction=reduce,
                    test_step_num_episodes=cfg.test_episodes, stop_fn=self.stop_fn() if tests else None,
                    logger=self.logger, verbose=False, show_progress=False)

    def note_stop(self, info: Any) -> None:
        """After training: say in telemetry whether Tianshou's stop rule ended it before the budget."""
        rep, threshold = self.reporter, self.config.stop_at_return
        assert rep is not None
        if threshold is None or info is None or not rep.tests or info.best_score < threshold:
            return
        best = max(t["return_mean"] for t in rep.tests)
        self.stop_reason = (f"stop_at_return: a test's mean return {best:.2f} reached {threshold:g} "
                            f"at {rep.timesteps} of {self.config.total_timesteps} steps")
        self.ctx.emitter.log(f"training stopped: {self.stop_reason}", stopped={
            "reason": "stop_at_return", "test_return_mean": best, "threshold": threshold,
            "timesteps_total": rep.timesteps})

    def train_online(self, envs: Any, tests: Any) -> Any:
        from tianshou.data import Collector, VectorReplayBuffer
        from tianshou.trainer import OffPolicyTrainerParams, OnPolicyTrainerParams

        cfg, rep = self.config, self.reporter
        assert rep is not None
        on_policy = cfg.algo.kind == "on_policy"
        size = max(cfg.resolved_collect_steps if on_policy else cfg.buffer_size, cfg.num_envs)
        if cfg.algo.prioritized_replay:  # rainbow: Tianshou's prioritized buffer, alpha and beta of its examples
            from tianshou.data import PrioritizedVectorReplayBuffer

            buffer = PrioritizedVectorReplayBuffer(size, cfg.num_envs, alpha=algorithms.PRIORITY_ALPHA,
                                                   beta=algorithms.PRIORITY_BETA)
        else:
            buffer = VectorReplayBuffer(size, cfg.num_envs)
        collector = Collector(self.algo, envs, buffer, exploration_noise=not on_policy)
        collector.reset()
        observe_collector(collector, rep)
        if cfg.classic:
            observe_learner(learner_of(cfg, self.algo), rep)
        rep.start_clock()
        if cfg.total_timesteps <= rep.timesteps:  # a restored run already at its budget: no warm-up either
            return None
        if cfg.resolved_learning_starts:
            self.warm_up(collector)
        remaining = cfg.total_timesteps - rep.timesteps
        if remaining <= 0:
            return None
        common = dict(training_collector=collector, collection_step_num_env_steps=cfg.resolved_collect_steps,
                      training_fn=self.safe_point, **self.trainer_common(tests, remaining))
        if on_policy:
            params = OnPolicyTrainerParams(batch_size=cfg.batch_size, update_step_num_repetitions=cfg.repeat_per_collect,
                                           **common)
        else:
            params = OffPolicyTrainerParams(batch_size=cfg.batch_size,
                                            update_step_num_gradient_steps_per_sample=cfg.update_per_step, **common)
        return self.algo.run_training(params)

    def warm_up(self, collector: Any) -> None:
        """``learning_starts`` env steps before training: uniform random actions, or, in a classic game, the
        policies' own moves with their training exploration (uniform random actions would ignore the legal-move
        mask), as Tianshou's tic-tac-toe example collects its first data."""
        cfg = self.config
        if not cfg.classic:
            collector.collect(n_step=cfg.resolved_learning_starts, random=True)
            return
        from tianshou.utils.torch_utils import policy_within_training_step

        assert self.reporter is not None
        if cfg.eps_schedule is not None:
            learner_of(cfg, self.algo).policy.set_eps_training(cfg.eps_schedule.at(self.reporter.timesteps))
        with policy_within_training_step(self.algo.policy):
            collector.collect(n_step=cfg.resolved_learning_starts)

    def collect_data(self, envs: Any, algo: Any) -> tuple[Any, str]:
        """``offline_data``: (a replay buffer of ``transitions`` env steps played now by uniform random actions
        (through ``algo``, Tianshou's ``collect(random=True)``) or by an earlier run's policy in evaluation mode
        (or, with ``exploration_noise``, as it acted while training), and the ``log`` message that says what went
        in)."""
        from tianshou.data import Collector, VectorReplayBuffer
        from tianshou.utils.torch_utils import policy_within_training_step

        cfg = self.config
        data = cfg.offline_data
        buffer = VectorReplayBuffer(data.transitions, cfg.num_envs)
        random = data.policy == "random"
        if random:
            behaviour = algo
        else:
            check_offline_source(cfg)
            behaviour = load_checkpoint(data.policy, "offline_data.policy")[3]
        behaviour.eval()
        collector = Collector(behaviour, envs, buffer, exploration_noise=data.exploration_noise)
        # with exploration noise: as the policy acted while training (DQN's eps_training, SAC's sampled actions)
        acting = policy_within_training_step(behaviour.policy) if data.exploration_noise else contextlib.nullcontext()
        with acting:
            stats = collector.collect(n_step=data.transitions, random=random, reset_before_collect=True)
        returns = [float(r) for r in stats.returns]
        what = "expert data set" if cfg.algo.expert_data else "offline data set"
        source = "random policy" if random else "checkpoint policy" + (" with its exploration noise"
                                                                        if data.exploration_noise else "")
        return buffer, (f"{what}: {len(buffer)} transitions from the {source}, "
                        f"{len(returns)} episodes, mean return {sum(returns) / max(len(returns), 1):.2f}")

    def train_offline(self, envs: Any, tests: Any) -> Any:
        from tianshou.trainer import OfflineTrainerParams

        cfg, rep = self.config, self.reporter
        assert rep is not None
        buffer, noted = self.collect_data(envs, self.algo)
        self.ctx.emitter.log(noted)
        rep.start_clock()
        remaining = cfg.total_timesteps - rep.timesteps
        if remaining <= 0:
            return None
        self.algo.train()
        return self.algo.run_training(OfflineTrainerParams(buffer=buffer, batch_size=cfg.batch_size,
                                                           **self.trainer_common(tests, remaining)))
