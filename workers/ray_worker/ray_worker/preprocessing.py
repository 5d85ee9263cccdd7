"""Image observation preprocessing for PettingZoo parallel envs (numpy only).

Pixel envs such as pistonball emit 457x120x3 frames per agent; resizing,
grayscale and frame stacking make them trainable on a CPU. Done here with
precomputed nearest-neighbour indices rather than an extra dependency.
:class:`FrameResizer` and :class:`FrameStack` are also used for image global
states (:mod:`ray_worker.global_state`), so the critic's input is made the
same way as the actors'.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np
from pettingzoo.utils.env import ParallelEnv

from mosaic.workerkit.spaces import is_image_space  # noqa: F401  (its users import it from here)
from ray_worker.parallel_wrapper import ParallelPassThrough

_LUMA = np.array([0.299, 0.587, 0.114], np.float32)


class FrameResizer:
    """One HxWxC uint8 frame → ``size`` (nearest), optionally grayscale, float32 in [0, 1]."""

    def __init__(self, size: tuple[int, int], grayscale: bool) -> None:
        self.size, self.grayscale = (int(size[0]), int(size[1])), grayscale
        self._index: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def channels(self, inner_channels: int) -> int:
        return 1 if self.grayscale else inner_channels

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        frame = np.asarray(frame)
        key = frame.shape[:2]
        if key not in self._index:  # index arrays computed once per input size
            self._index[key] = (np.linspace(0, key[0] - 1, self.size[0]).astype(np.intp),
                                np.linspace(0, key[1] - 1, self.size[1]).astype(np.intp))
        rows, cols = self._index[key]
        small = frame[rows][:, cols]
        if self.grayscale:
            small = (small[..., :3].astype(np.float32) @ _LUMA)[..., None]
        else:
            small = small.astype(np.float32)
        return small / np.float32(255.0)


class FrameStack:
    """The last ``depth`` frames joined on the channel axis; a reset repeats the first one."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        self._frames: deque = deque(maxlen=depth)

    def reset(self, frame: np.ndarray) -> np.ndarray:
        self._frames = deque([frame] * self.depth, maxlen=self.depth)
        return self.observe()

    def push(self, frame: np.ndarray) -> np.ndarray:
        self._frames.append(frame)
        return self.observe()

    def observe(self) -> np.ndarray:
        return np.concatenate(self._frames, axis=-1)


class ImagePreprocess(ParallelPassThrough):
    """Resize (nearest), optionally grayscale, stack frames, scale to [0, 1] float32."""

    def __init__(self, env: ParallelEnv, size: tuple[int, int] = (42, 42), grayscale: bool = True,
                 frame_stack: int = 3) -> None:
        super().__init__(env)
        self.size, self.grayscale, self.frame_stack = tuple(size), grayscale, frame_stack
        self._resize = FrameResizer(self.size, grayscale)
        self._spaces: dict[str, gym.spaces.Box] = {}
        for agent in self.possible_agents:
            channels = self._resize.channels(env.observation_space(agent).shape[-1])
            self._spaces[agent] = gym.spaces.Box(0.0, 1.0, (*self.size, channels * frame_stack), np.float32)
        self._stacks: dict[str, FrameStack] = {}

    def observation_space(self, agent: str) -> gym.Space:
        return self._spaces[agent]

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        obs, infos = self.env.reset(seed=seed, options=options)
        out = {}
        for agent, frame in obs.items():
            self._stacks[agent] = FrameStack(self.frame_stack)
            out[agent] = self._stacks[agent].reset(self._resize(frame))
        return out, infos

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        obs, rewards, terms, truncs, infos = self.env.step(actions)
        out = {agent: self._stacks[agent].push(self._resize(frame)) for agent, frame in obs.items()}
        return out, rewards, terms, truncs, infos
