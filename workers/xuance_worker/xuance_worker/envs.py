"""PettingZoo envs from MOSAIC's env layer, in the shape XuanCe's runners expect.

XuanCe's own MPE class builds ``pettingzoo.mpe.<id>`` with nothing but
``continuous_actions``: no ``N``, no ``max_cycles``, no other family. This
adapter builds any parallel env :func:`mosaic.envs.make_env` offers, with the
config's ``env_kwargs``, and is registered in XuanCe's env registry under
:data:`ENV_NAME` when a run starts (a registry entry, not an edit of XuanCe).

What XuanCe's multi-agent loop assumes, and the adapter guarantees or refuses:
every agent acts at every step (envs whose agents leave mid-episode are refused
at validation), one observation and action space per agent, a global state
(the env's own ``state()`` when it has one, else the agents' observations
concatenated), and a step bound (``max_cycles``) after which the episode is
truncated. Env 0 also streams its frames to FastLane when the run asks for it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

ENV_NAME = "mosaic_pettingzoo"  # the key in XuanCe's REGISTRY_MULTI_AGENT_ENV
DEFAULT_MAX_STEPS = 500  # for envs that state no bound of their own


def action_kind(space: Any) -> str:
    from gymnasium import spaces

    if isinstance(space, spaces.Discrete):
        return "discrete"
    if isinstance(space, spaces.Box):
        return "box"
    return type(space).__name__


def flat_state_space(env: Any, agents: list[str]) -> Any:
    from gymnasium import spaces

    state_space = getattr(env, "state_space", None)
    if state_space is not None:
        return state_space
    size = sum(int(np.prod(env.observation_space(a).shape)) for a in agents)
    return spaces.Box(-np.inf, np.inf, (size,), np.float32)


def seed_action_spaces(env: Any, agents: list[str], env_seed: int) -> None:
    """Seed each agent's action space (``env_seed`` × 1000 + its index).

    XuanCe's epsilon-greedy and random warm-up draw from ``action_space.sample()``,
    and PettingZoo seeds its envs, not their spaces: without this a XuanCe run is
    not repeatable even with a fixed seed (run directly, it is not).
    """
    for index, agent in enumerate(agents):
        env.action_space(agent).seed(env_seed * 1000 + index)


def make_raw_env_class() -> type:
    """The adapter class; built on first use, as it subclasses XuanCe's base."""
    from xuance.environment import RawMultiAgentEnv

    from mosaic.envs import make_env

    class MosaicPettingZooEnv(RawMultiAgentEnv):
        def __init__(self, config: Any) -> None:
            super().__init__()
            spec = config.mosaic_env
            # Env 0 (seeded with the run's own seed) streams its frames when FastLane is on.
            lane = getattr(config, "mosaic_fastlane", None) if config.env_seed == config.seed else None
            self.env = make_env(spec["family"], spec["env_id"], "PARALLEL", spec["env_kwargs"],
                                "rgb_array" if lane else None)
            self.lane = publisher(lane) if lane else None
            self._episode, self._returns = 0, {}
            self.env.reset(seed=config.env_seed)
            self.agents = list(self.env.possible_agents)
            seed_action_spaces(self.env, self.agents, config.env_seed)
            self.num_agents = len(self.agents)
            self.observation_space = {a: self.env.observation_space(a) for a in self.agents}
            self.action_space = {a: self.env.action_space(a) for a in self.agents}
            self.state_space = flat_state_space(self.env, self.agents)
            self._has_state = getattr(self.env, "state_space", None) is not None
            self.max_episode_steps = int(getattr(self.env.unwrapped, "max_cycles", 0) or DEFAULT_MAX_STEPS)
            self.metadata = getattr(self.env, "metadata", {})
            self._box = {a: action_kind(s) == "box" for a, s in self.action_space.items()}
            self._last_obs: dict[str, Any] = {}
            self._steps = 0

        def reset(self) -> tuple[dict, dict]:
            observations, infos = self.env.reset()
            if self._steps:
                self._episode += 1
            self._last_obs, self._steps = observations, 0
            self._returns = {a: 0.0 for a in self.agents}
            return observations, {"infos": infos}

        def step(self, actions: dict) -> tuple[dict, dict, dict, bool, dict]:
            for agent, action in actions.items():
                if self._box[agent]:
                    space = self.action_space[agent]
                    actions[agent] = np.clip(action, space.low, space.high)
            observations, rewards, terminated, truncated, infos = self.env.step(actions)
            self._steps += 1
            self._last_obs = observations
            if self.lane is not None:
                for agent, reward in rewards.items():
                    self._returns[agent] = self._returns.get(agent, 0.0) + float(reward)
                if self.lane.due():
                    self.lane.offer(self.env.render, self._episode, self._steps, lambda: {
                        "rewards": {a: float(r) for a, r in rewards.items()}, "returns": dict(self._returns)})
            done = any(truncated.values()) or self._steps >= self.max_episode_steps
            return observations, rewards, terminated, done, {"infos": infos}

        def state(self) -> np.ndarray:
            if self._has_state:
                return self.env.state()
            return np.concatenate([np.asarray(self._last_obs[a], np.float32).ravel() for a in self.agents])

        def avail_actions(self) -> dict | None:
            if any(self._box.values()):
                return None
            return {a: np.ones(self.action_space[a].n, np.bool_) for a in self.agents}

        def render(self, *args: Any) -> Any:
            return self.env.render()

        def close(self) -> None:
            if self.lane is not None:
                self.lane.close()
            self.env.close()

    return MosaicPettingZooEnv


def publisher(lane: dict[str, Any]) -> Any:
    from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
    from mosaic.fastlane.publisher import Publisher

    target = FastLaneTarget(lane["run_id"], lane["run_dir"], FastLaneConfig(**lane["config"]))
    return Publisher(target, "main")


def register() -> None:
    """Put the adapter into XuanCe's multi-agent env registry (idempotent)."""
    from xuance.environment.multi_agent_env import REGISTRY_MULTI_AGENT_ENV

    if not isinstance(REGISTRY_MULTI_AGENT_ENV.get(ENV_NAME), type):
        REGISTRY_MULTI_AGENT_ENV[ENV_NAME] = make_raw_env_class()
