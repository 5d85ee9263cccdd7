"""Gymnasium envs for Tianshou: made by id, checked once, vectorised, env 0 streaming frames.

The worker's env vocabulary is Gymnasium's registry (family ``gymnasium``):
whatever ``gymnasium.make`` builds in the worker's environment, with a flat
``Box`` observation and the action space the algorithm acts in. Env 0 of the
training vector also publishes rendered frames to FastLane when the run asks
(an observing wrapper: it never changes what the env returns).
"""

from __future__ import annotations

from typing import Any

from mosaic.errors import ConfigError

#: Gymnasium ids offered in the describe document: the classic-control tasks every install has.
OFFERED = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "MountainCarContinuous-v0")


def make_env(env_id: str, render_mode: str | None = None, field: str = "environment.env_id") -> Any:
    import gymnasium as gym

    try:
        return gym.make(env_id, render_mode=render_mode)
    except gym.error.Error as exc:
        import difflib

        close = difflib.get_close_matches(env_id, list(gym.registry), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(field, f"{env_id!r} is not a Gymnasium env here{hint}: {exc}") from None


def probe_env(config: Any) -> Any:
    """Build the env once: its spaces, checked against what the algorithm can learn on."""
    from gymnasium import spaces as gs

    from tianshou_worker.algorithms import Spaces

    env_id = config.resolved_env_id
    if config.classic:
        from tianshou_worker import classic

        obs, act, agents = classic.spaces_of(env_id)
        classic.seat_index(agents, config.learner_seat)
        return Spaces(obs, act, agents)
    env = make_env(env_id)
    try:
        obs, act = env.observation_space, env.action_space
    finally:
        env.close()
    from mosaic.workerkit.spaces import action_kind

    kind, algo = action_kind(act), config.algo
    if kind not in algo.action_spaces:
        raise ConfigError("environment.env_id", f"{algo.name} acts in {' and '.join(algo.action_spaces)} action "
                                                f"spaces; {env_id} has {kind}")
    if not isinstance(obs, gs.Box) or len(obs.shape) != 1:
        raise ConfigError("environment.env_id", f"{env_id} observes {obs!r}; this worker builds MLPs, which take flat vectors")
    return Spaces(obs, act)


def frame_tap(env: Any, lane: dict[str, Any]) -> Any:
    """``env`` wrapped: after each step, a rendered frame is offered to a FastLane publisher."""
    import gymnasium as gym

    from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
    from mosaic.fastlane.publisher import Publisher

    class Tap(gym.Wrapper):
        def __init__(self, env: Any) -> None:
            super().__init__(env)
            target = FastLaneTarget(lane["run_id"], lane["run_dir"], FastLaneConfig(**lane["config"]))
            self.lane = Publisher(target, "main")
            self.episode, self.steps, self.ret = 0, 0, 0.0

        def reset(self, **kwargs: Any) -> Any:
            out = self.env.reset(**kwargs)
            self.steps, self.ret = 0, 0.0
            return out

        def step(self, action: Any) -> Any:
            out = self.env.step(action)
            self.steps += 1
            self.ret += float(out[1])
            self.lane.offer(self.env.render, self.episode, self.steps,
                            lambda: {"episode_return": self.ret})
            if out[2] or out[3]:
                self.episode += 1
            return out

        def close(self) -> None:
            self.lane.close()
            super().close()

    return Tap(env)


def make_vector_env(env_id: str, num_envs: int, seed: int, fastlane: dict[str, Any] | None = None,
                    family: str = "gymnasium") -> Any:
    """Tianshou's in-process vector of ``num_envs`` envs, seeded ``seed + i`` (envs and action spaces)."""
    from tianshou.env import DummyVectorEnv

    def factory(index: int) -> Any:
        if family == "classic":
            from tianshou_worker import classic

            return lambda: classic.make_env(env_id)
        if index == 0 and fastlane:
            return lambda: frame_tap(make_env(env_id, render_mode="rgb_array"), fastlane)
        return lambda: make_env(env_id)

    envs = DummyVectorEnv([factory(i) for i in range(num_envs)])
    envs.seed(seed)
    return envs
