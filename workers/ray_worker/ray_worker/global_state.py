"""Global state for a centralised critic, added to every agent's observation (no Ray import).

Each agent observes ``{"obs": local, "state": global}``. ``global`` is, in order:

* the env's ``state()`` when it is a vector (MPE, multiwalker), flattened to float32;
* the env's ``state()`` when it is an image (pistonball's whole board), resized with the
  observations' own helper to ``height`` rows and as many columns as keep the board's
  aspect ratio, grayscaled and frame-stacked as the observations are (:class:`StateImage`);
* without ``state()``: all agents' observations joined in a fixed order (absent agents as
  zeros): concatenated for vectors, stacked on the channel axis for images of equal size.

With ``with_actions`` a vector state also carries every agent's previous action
(one-hot if discrete, the raw vector if continuous; zeros at reset and for absent
agents), so the critic can condition on what the team just did. The current
actions are not known when an observation is made, and a value function that saw
them would no longer be V(s).

The ``state`` space describes exactly what is produced (shape, dtype, bounds), so the
critic RLlib builds and the one a checkpoint restores agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo.utils.env import ParallelEnv

from ray_worker.ctde_ids import LOCAL, STATE
from ray_worker.parallel_wrapper import ParallelPassThrough
from ray_worker.preprocessing import FrameResizer, FrameStack


@dataclass(frozen=True)
class StateImage:
    """How an image global state is shrunk: rows after resizing, grayscale, frames stacked."""

    height: int = 42
    grayscale: bool = True
    frame_stack: int = 3

    def size_for(self, shape: tuple[int, ...]) -> tuple[int, int]:
        """``height`` rows and the columns that keep the aspect ratio (pixels stay square)."""
        return self.height, max(1, round(self.height * shape[1] / shape[0]))


def _flat(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).reshape(-1)


def _action_size(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    return int(np.prod(space.shape))


def _encode_action(space: gym.Space, action: Any) -> np.ndarray:
    """One-hot for a discrete action, the flattened vector for a continuous one."""
    if isinstance(space, gym.spaces.Discrete):
        out = np.zeros(int(space.n), np.float32)
        out[int(action) - int(space.start)] = 1.0
        return out
    return _flat(action)


def _is_image(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


class GlobalStateObservations(ParallelPassThrough):
    """Adds the global state to every agent's observation (parallel envs).

    ``image`` says how to shrink an image ``state()``; without it only vector states
    (or joined observations) are accepted.
    """

    def __init__(self, env: ParallelEnv, image: StateImage | None = None, with_actions: bool = False) -> None:
        super().__init__(env)
        self.with_actions = with_actions
        self._action_dims = {a: _action_size(env.action_space(a)) for a in self.possible_agents}
        self._last_actions: dict[str, np.ndarray] = {}
        local = {a: env.observation_space(a) for a in self.possible_agents}
        self._local_dims = {a: int(np.prod(s.shape)) for a, s in local.items()}
        self._resize: FrameResizer | None = None
        self._stack: FrameStack | None = None
        env.reset(seed=0)
        try:
            state = np.asarray(env.state())
            self.uses_env_state = True
        except (NotImplementedError, AttributeError):
            state = None
            self.uses_env_state = False
        if state is not None and state.ndim == 1:
            self.kind = "vector"
            state_space = gym.spaces.Box(-np.inf, np.inf, (state.size,), np.float32)
        elif state is not None and state.ndim == 3 and image is not None:
            self.kind = "image"
            self._resize = FrameResizer(image.size_for(state.shape), image.grayscale)
            self._stack = FrameStack(image.frame_stack)
            channels = self._resize.channels(state.shape[-1]) * image.frame_stack
            state_space = gym.spaces.Box(0.0, 1.0, (*self._resize.size, channels), np.float32)
        elif state is not None:
            what = ("an image, which the critic gets only with environment.preprocessing enabled"
                    if state.ndim == 3 else "neither a vector nor an image")
            raise ValueError(f"global state of shape {state.shape} is {what}")
        elif all(_is_image(s) for s in local.values()) \
                and len({s.shape[:2] for s in local.values()}) == 1:
            self.kind = "joined_images"
            spaces = [local[a] for a in self.possible_agents]
            state_space = gym.spaces.Box(np.concatenate([s.low for s in spaces], axis=-1).astype(np.float32),
                                         np.concatenate([s.high for s in spaces], axis=-1).astype(np.float32),
                                         dtype=np.float32)
        else:
            self.kind = "joined"
            state_space = gym.spaces.Box(-np.inf, np.inf, (sum(self._local_dims.values()),), np.float32)
        if with_actions:
            if self.kind not in ("vector", "joined"):
                raise ValueError(f"the critic sees actions only with a vector global state, not a {self.kind} one "
                                 f"(set ctde.critic_actions to false)")
            size = int(state_space.shape[0]) + sum(self._action_dims.values())
            state_space = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.state_space = state_space
        self.state_dim = int(np.prod(state_space.shape))
        self._spaces = {a: gym.spaces.Dict({LOCAL: local[a], STATE: state_space}) for a in self.possible_agents}

    def observation_space(self, agent: str) -> gym.Space:
        return self._spaces[agent]

    def _global(self, obs: dict[str, Any], first: bool) -> np.ndarray:
        if self.kind == "vector":
            return _flat(self.env.state())
        if self.kind == "image":
            frame = self._resize(self.env.state())
            return self._stack.reset(frame) if first else self._stack.push(frame)
        if self.kind == "joined_images":
            parts = [np.asarray(obs[a], np.float32) if a in obs
                     else np.zeros(self.env.observation_space(a).shape, np.float32) for a in self.possible_agents]
            return np.concatenate(parts, axis=-1)
        parts = [_flat(obs[a]) if a in obs else np.zeros(self._local_dims[a], np.float32)
                 for a in self.possible_agents]
        return np.concatenate(parts)

    def _actions_part(self) -> np.ndarray:
        return np.concatenate([self._last_actions.get(a, np.zeros(self._action_dims[a], np.float32))
                               for a in self.possible_agents])

    def _remember(self, actions: dict[str, Any]) -> None:
        self._last_actions = {a: _encode_action(self.env.action_space(a), act) for a, act in actions.items()}

    def _wrap(self, obs: dict[str, Any], first: bool = False) -> dict[str, dict[str, Any]]:
        state = self._global(obs, first)
        if self.with_actions:
            state = np.concatenate([state, self._actions_part()])
        return {a: {LOCAL: o, STATE: state} for a, o in obs.items()}

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        self._last_actions = {}
        return self._wrap(obs, first=True), infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        if self.with_actions:
            self._remember(actions)
        return self._wrap(obs), rewards, terms, truncs, infos
