"""Plays episodes with random actions that respect action masks."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from mosaic.workerkit.checkpoints import env_words, save_checkpoint
from mosaic.workerkit.envs import reward_structure
from mosaic.workerkit.episode_stats import episode_statistics, winner
from mosaic.fastlane.config import FastLaneTarget
from mosaic.workerkit.program import run_started
from mosaic.workerkit.cli import WorkerContext
from random_worker import PACKAGES
from random_worker.checkpoint import RandomCheckpointState
from random_worker.config import RandomWorkerConfig



def legal_mask(observation: Any, info: Any) -> np.ndarray | None:
    """The action mask from a Dict observation or the info dict, if any."""
    if isinstance(observation, dict) and "action_mask" in observation:
        return np.asarray(observation["action_mask"])
    if isinstance(info, dict) and "action_mask" in info:
        return np.asarray(info["action_mask"])
    return None


class RandomPolicy:
    """One seeded sampler per agent: masks respected, other spaces sampled."""

    def __init__(self, env: Any, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.spaces = {}
        for i, agent in enumerate(env.possible_agents):
            space = env.action_space(agent)
            space.seed(seed + 7919 * (i + 1))
            self.spaces[agent] = space

    def get_state(self) -> dict[str, Any]:
        return {"rng": self.rng.bit_generator.state,
                "spaces": {a: s.np_random.bit_generator.state for a, s in self.spaces.items()}}

    def set_state(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        for agent, space_state in state["spaces"].items():
            self.spaces[agent].np_random.bit_generator.state = space_state

    def act(self, agent: str, observation: Any, info: Any) -> Any:
        mask = legal_mask(observation, info)
        if mask is not None:
            legal = np.flatnonzero(mask)
            if legal.size:
                return int(self.rng.choice(legal))
        return self.spaces[agent].sample()


def deep_validate(config: RandomWorkerConfig) -> None:
    """Build the env once so a wrong env id or kwarg fails before any run exists; a checkpoint to restore must
    hold the sampling state of this env's agents (one of another env would fail the run at its first move)."""
    env = config.environment.make(render_mode="rgb_array" if config.fastlane.enabled else None)
    agents = list(env.possible_agents)
    env.close()
    if config.checkpoint.restore_from:
        from mosaic.workerkit.checkpoints import TrainedAs, read_for_restore
        from random_worker.checkpoint import trained_as

        read_for_restore(RandomCheckpointState, config.checkpoint.restore_from,
                         TrainedAs("random", "random", env_words(config.environment), ", ".join(sorted(agents))),
                         trained_as)


class RandomWorkerRuntime:
    def __init__(self, config: RandomWorkerConfig, context: WorkerContext) -> None:
        self.config = config
        self.ctx = context
        self.steps = 0
        self.episodes = 0
        self.lane: Any = None  # a FastLane Publisher when frames are streamed

    # -- one episode ---------------------------------------------------------
    def _budget_spent(self) -> bool:
        return self.steps >= self.config.total_timesteps

    def _play_aec(self, env: Any, policy: RandomPolicy, seed: int) -> tuple[dict, int, bool]:
        env.reset(seed=seed)
        returns = {a: 0.0 for a in env.possible_agents}
        length = 0
        for agent in env.agent_iter():
            obs, _, term, trunc, info = env.last()
            if not (term or trunc) and self._budget_spent():
                return returns, length, False  # a move is due but the budget is spent: the episode is cut
            action = None if term or trunc else policy.act(agent, obs, info)
            env.step(action)
            for a, r in env.rewards.items():
                returns[a] += float(r)
            if action is not None:
                length += 1
                if self.lane is not None:
                    self._publish_frame(env, length, env.rewards, returns)
                self._after_step()
            if self.config.max_episode_steps and length >= self.config.max_episode_steps:
                break
        return returns, length, True

    def _play_parallel(self, env: Any, policy: RandomPolicy, seed: int) -> tuple[dict, int, bool]:
        obs, infos = env.reset(seed=seed)
        returns = {a: 0.0 for a in env.possible_agents}
        length = 0
        while env.agents:
            actions = {a: policy.act(a, obs[a], infos.get(a)) for a in env.agents}
            obs, rewards, _, _, infos = env.step(actions)
            for a, r in rewards.items():
                returns[a] += float(r)
            length += 1
            if self.lane is not None:
                self._publish_frame(env, length, rewards, returns)
            self._after_step()
            if self._budget_spent() and env.agents:
                return returns, length, False
            if self.config.max_episode_steps and length >= self.config.max_episode_steps:
                break
        return returns, length, True

    def _publish_frame(self, env: Any, step: int, rewards: dict, returns: dict) -> None:
        """Offer a frame to FastLane; the throttle decides whether it is rendered at all."""
        if self.lane.due():
            self.lane.offer(env.render, self.episodes, step, lambda: {
                "rewards": {a: float(r) for a, r in rewards.items()},
                "returns": {a: float(r) for a, r in returns.items()}})

    # -- checkpoints: counters and RNG state, enough to continue a run -------
    def _save_checkpoint(self, policy: RandomPolicy, iteration: int) -> None:
        state = RandomCheckpointState(iteration=iteration, timesteps_total=self.steps, episodes=self.episodes,
                                      run_id=self.config.run_id, policy=policy.get_state(),
                                      env=env_words(self.config.environment))
        save_checkpoint(self.ctx.emitter, self.ctx.run_dir.root, state)

    def _restore(self, policy: RandomPolicy, path: str) -> int:
        state = RandomCheckpointState.read(path, "checkpoint.restore_from", "the random worker")
        self.steps, self.episodes = state.timesteps_total, state.episodes
        policy.set_state(state.policy)
        self.ctx.emitter.log(f"restored from {path} at {self.steps} steps")
        return state.iteration

    def _after_step(self) -> None:
        self.steps += 1
        if self.config.step_delay_s:
            time.sleep(self.config.step_delay_s)
        self.ctx.control.checkpoint()

    # -- the run -------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, emit = self.config, self.ctx.emitter
        env = cfg.environment.make(render_mode="rgb_array" if cfg.fastlane.enabled else None)
        if cfg.fastlane.enabled:
            from mosaic.fastlane.publisher import Publisher

            self.lane = Publisher(FastLaneTarget(cfg.run_id, str(self.ctx.run_dir.root), cfg.fastlane), "main",
                                  log=lambda message: emit.log(f"fastlane: {message}", level="warning"))
        is_aec = cfg.environment.api_type == "AEC"
        policy = RandomPolicy(env, cfg.seed)
        run_started(
            emit, cfg, worker="random", packages=PACKAGES, resources={"cpus": 1, "gpus": 0},
            algorithm="random", env=cfg.environment.describe(), policy_configuration="RANDOM",
            seed=cfg.seed, total_timesteps=cfg.total_timesteps, agents=list(env.possible_agents),
            restored_from=cfg.checkpoint.restore_from,
        )
        window: list[dict[str, Any]] = []
        structure = reward_structure(cfg.environment.family, cfg.environment.env_id)
        restore_from = cfg.checkpoint.restore_from
        iteration = self._restore(policy, restore_from) if restore_from else 0
        report_every = cfg.reporting.every_timesteps or 500
        next_report = self.steps + report_every
        every = cfg.checkpoint.every_timesteps
        next_save = (self.steps // every + 1) * every if every else None
        last_saved = None
        t_iter, steps_at_iter = time.perf_counter(), 0
        try:
            while self.steps < cfg.total_timesteps:
                t0 = time.perf_counter()
                play = self._play_aec if is_aec else self._play_parallel
                returns, length, finished = play(env, policy, cfg.seed + self.episodes)
                if finished:  # an episode cut by the budget is not an episode: it is not reported
                    window.append({"returns": returns, "length": length,
                                   "modules": {agent: "random" for agent in returns}})
                    emit.episode(episode=self.episodes, length=length, returns=returns,
                                 winner=winner(returns, structure), duration_s=time.perf_counter() - t0)
                    self.episodes += 1
                if self.steps >= next_report or self.steps >= cfg.total_timesteps:
                    iteration += 1
                    elapsed = time.perf_counter() - t_iter
                    emit.metrics(iteration=iteration, timesteps_total=self.steps,
                                 total_timesteps=cfg.total_timesteps,
                                 env_steps_per_s=(self.steps - steps_at_iter) / max(elapsed, 1e-9),
                                 num_episodes_lifetime=self.episodes, **episode_statistics(window))
                    window.clear()
                    t_iter, steps_at_iter = time.perf_counter(), self.steps
                    next_report = self.steps + report_every
                    if next_save is not None and self.steps >= next_save:
                        self._save_checkpoint(policy, iteration)
                        last_saved = iteration
                        next_save = (self.steps // every + 1) * every
            if cfg.checkpoint.at_end and last_saved != iteration:
                self._save_checkpoint(policy, iteration)
        finally:
            if self.lane is not None:
                self.lane.close()
            env.close()
        return {"timesteps_total": self.steps, "episodes": self.episodes, "iterations": iteration}
