"""PettingZoo wrappers that give every agent a flat float observation (:mod:`mosaic.workerkit.spaces`).

Applied by :class:`~ray_worker.environment.EnvironmentFactory` to any agent whose
observation is not already a 1-D Box, an image, or a PettingZoo action-mask dict,
so training, ``--dry-run`` and the policy actor see the same encoded observations.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from pettingzoo.utils.wrappers.base import BaseWrapper

from mosaic.workerkit.spaces import encode, encoded_space, encoding_name, needs_encoding
from ray_worker.parallel_wrapper import ParallelPassThrough
from ray_worker.preprocessing import is_image_space


MASK_KEY = "action_mask"
OBS_KEY = "observation"


def _masked(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces and OBS_KEY in space.spaces


def _wants(space: gym.Space) -> bool:
    if _masked(space):
        # masked modules read the mask and flatten a Box observation of any rank themselves;
        # anything else inside (Discrete, Tuple, ...) is encoded in place
        return not isinstance(space.spaces[OBS_KEY], gym.spaces.Box)
    return needs_encoding(space) and not is_image_space(space)


def _name(space: gym.Space) -> str:
    return f"{OBS_KEY}: {encoding_name(space.spaces[OBS_KEY])}" if _masked(space) else encoding_name(space)


def _encoded_space(space: gym.Space) -> gym.Space:
    if _masked(space):
        return gym.spaces.Dict({**space.spaces, OBS_KEY: encoded_space(space.spaces[OBS_KEY])})
    return encoded_space(space)


def _encode(space: gym.Space, value: Any) -> Any:
    if _masked(space):
        return {**value, OBS_KEY: encode(space.spaces[OBS_KEY], value[OBS_KEY])}
    return encode(space, value)


def encodings(env: Any) -> dict[str, str]:
    """Agent → encoding name, for the agents whose observations need one."""
    return {a: _name(env.observation_space(a)) for a in env.possible_agents
            if _wants(env.observation_space(a))}


class _Encoder:
    def __init__(self, env: Any) -> None:
        self._inner = {a: env.observation_space(a) for a in env.possible_agents}
        self._encode = {a: _wants(s) for a, s in self._inner.items()}
        self._spaces = {a: _encoded_space(s) if self._encode[a] else s for a, s in self._inner.items()}

    def obs(self, agent: str, value: Any) -> Any:
        return _encode(self._inner[agent], value) if self._encode[agent] and value is not None else value


class EncodedObservations(ParallelPassThrough):
    """Parallel envs: encoded observations, everything else passed through."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self._enc = _Encoder(env)

    def observation_space(self, agent: str) -> gym.Space:
        return self._enc._spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        return {a: self._enc.obs(a, o) for a, o in obs.items()}, infos

    def step(self, actions: dict) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        return {a: self._enc.obs(a, o) for a, o in obs.items()}, rewards, terms, truncs, infos


class EncodedObservationsAEC(BaseWrapper):
    """AEC envs: encoded observations, everything else passed through."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self._enc = _Encoder(env)

    def observation_space(self, agent: str) -> gym.Space:
        return self._enc._spaces[agent]

    def observe(self, agent: str) -> Any:
        return self._enc.obs(agent, super().observe(agent))


def encode_observations(env: Any, parallel: bool) -> Any:
    """``env`` itself when no agent needs an encoding, else wrapped."""
    if not encodings(env):
        return env
    return EncodedObservations(env) if parallel else EncodedObservationsAEC(env)
