"""Global state for a centralised critic, added to every agent's observation (no Ray import).

Each agent observes ``{"obs": local, "state": global}``; ``global`` is the env's
``state()`` or, where an env has none, all agents' observations joined in a
fixed order (absent agents as zeros).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo.utils.env import ParallelEnv

from ray_worker.parallel_wrapper import ParallelPassThrough

from ray_worker.ctde_ids import LOCAL, STATE


def _flat(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).reshape(-1)


class GlobalStateObservations(ParallelPassThrough):
    """Adds the global state to every agent's observation (parallel envs, vector observations)."""

    def __init__(self, env: ParallelEnv) -> None:
        super().__init__(env)
        self._local_dims = {a: int(np.prod(env.observation_space(a).shape)) for a in self.possible_agents}
        env.reset(seed=0)
        try:
            state = env.state()
            self.uses_env_state = True
        except (NotImplementedError, AttributeError):
            state = np.zeros(sum(self._local_dims.values()), np.float32)
            self.uses_env_state = False
        self.state_dim = int(np.asarray(state).size)
        if np.asarray(state).ndim != 1:
            raise ValueError(f"global state of shape {np.asarray(state).shape} is not a vector")
        state_space = gym.spaces.Box(-np.inf, np.inf, (self.state_dim,), np.float32)
        self._spaces = {a: gym.spaces.Dict({LOCAL: env.observation_space(a), STATE: state_space})
                        for a in self.possible_agents}

    def observation_space(self, agent: str) -> gym.Space:
        return self._spaces[agent]

    def _global(self, obs: dict[str, Any]) -> np.ndarray:
        if self.uses_env_state:
            return _flat(self.env.state())
        parts = [_flat(obs[a]) if a in obs else np.zeros(self._local_dims[a], np.float32)
                 for a in self.possible_agents]
        return np.concatenate(parts)

    def _wrap(self, obs: dict[str, Any]) -> dict[str, dict[str, Any]]:
        state = self._global(obs)
        return {a: {LOCAL: o, STATE: state} for a, o in obs.items()}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._wrap(obs), infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        return self._wrap(obs), rewards, terms, truncs, infos

