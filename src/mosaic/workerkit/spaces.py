"""Standard encodings of observation spaces into flat float vectors.

Default networks (RLlib's MLP encoders, CleanRL's and Tianshou's MLPs) take a
1-D float vector. Many envs observe something else: a ``Discrete`` choice
(rps: the opponent's last move), a 2-D table (knights_archers_zombies: one row
per entity), a ``Tuple`` or ``Dict`` of parts. Each is encoded one standard way:

==================  =========================================================
space               encoding
==================  =========================================================
Box, 1-D            unchanged
Box, other ranks    flattened (C order)
Discrete(n)         one-hot of length n
MultiDiscrete       one one-hot per component, concatenated
MultiBinary         flattened 0/1 values
Tuple / Dict        each part encoded, concatenated (Dict: sorted keys)
==================  =========================================================

Images (HxWxC uint8) are not handled here: workers resize and stack them and
give them a CNN. PettingZoo's ``{"observation", "action_mask"}`` dicts are not
handled here either: masked modules read the mask. Needs gymnasium and numpy,
which ``import mosaic`` does not import.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = ["encoded_space", "encode", "encoding_name", "is_image_space", "needs_encoding"]


def action_kind(space: gym.Space) -> str:
    """``discrete`` or ``box`` (how workers name the action kinds they train), else the space's class name."""
    if isinstance(space, gym.spaces.Discrete):
        return "discrete"
    if isinstance(space, gym.spaces.Box):
        return "box"
    return type(space).__name__


def is_image_space(space: gym.Space) -> bool:
    """An HxWxC uint8 Box with 1, 3 or 4 channels: pixels, for a CNN rather than an encoding."""
    return (isinstance(space, gym.spaces.Box) and len(space.shape) == 3
            and space.shape[-1] in (1, 3, 4) and space.dtype == np.uint8)


def needs_encoding(space: gym.Space) -> bool:
    """True unless ``space`` already is a 1-D Box."""
    return not (isinstance(space, gym.spaces.Box) and len(space.shape) == 1)


def _size(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Box):
        return int(np.prod(space.shape, dtype=np.int64)) if space.shape else 1
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, gym.spaces.MultiBinary):
        return int(np.prod(space.shape, dtype=np.int64))
    if isinstance(space, gym.spaces.Tuple):
        return sum(_size(s) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return sum(_size(space.spaces[k]) for k in sorted(space.spaces))
    raise ValueError(f"no standard encoding for observation space {space} ({type(space).__name__}); "
                     "supported: Box, Discrete, MultiDiscrete, MultiBinary, Tuple, Dict")


def encoded_space(space: gym.Space) -> gym.spaces.Box:
    """The flat float32 Box that :func:`encode` maps ``space`` into."""
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        return space
    if isinstance(space, gym.spaces.Box):
        low = np.asarray(space.low, np.float32).reshape(-1)
        high = np.asarray(space.high, np.float32).reshape(-1)
        return gym.spaces.Box(low, high, (low.size,), np.float32)
    size = _size(space)
    if isinstance(space, (gym.spaces.Discrete, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return gym.spaces.Box(0.0, 1.0, (size,), np.float32)
    parts = ([encoded_space(s) for s in space.spaces] if isinstance(space, gym.spaces.Tuple)
             else [encoded_space(space.spaces[k]) for k in sorted(space.spaces)])
    low = np.concatenate([np.asarray(p.low, np.float32).reshape(-1) for p in parts])
    high = np.concatenate([np.asarray(p.high, np.float32).reshape(-1) for p in parts])
    return gym.spaces.Box(low, high, (size,), np.float32)


def encode(space: gym.Space, value: Any) -> np.ndarray:
    """``value`` (an element of ``space``) as a flat float32 vector of ``encoded_space(space)``."""
    if isinstance(space, gym.spaces.Box):
        return np.asarray(value, np.float32).reshape(-1)
    if isinstance(space, gym.spaces.Discrete):
        out = np.zeros(int(space.n), np.float32)
        out[int(value) - int(space.start)] = 1.0
        return out
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec).reshape(-1)
        start = np.asarray(getattr(space, "start", np.zeros_like(nvec))).reshape(-1)
        out = np.zeros(int(nvec.sum()), np.float32)
        offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
        out[offsets + (np.asarray(value).reshape(-1) - start)] = 1.0
        return out
    if isinstance(space, gym.spaces.MultiBinary):
        return np.asarray(value, np.float32).reshape(-1)
    if isinstance(space, gym.spaces.Tuple):
        return np.concatenate([encode(s, v) for s, v in zip(space.spaces, value)])
    if isinstance(space, gym.spaces.Dict):
        return np.concatenate([encode(space.spaces[k], value[k]) for k in sorted(space.spaces)])
    _size(space)  # raises the clear error
    raise AssertionError("unreachable")


def encoding_name(space: gym.Space) -> str:
    """How :func:`encode` treats ``space``, for people: ``one-hot(4)``, ``flatten(27x5)``, ..."""
    if isinstance(space, gym.spaces.Box):
        if len(space.shape) == 1:
            return "none"
        return "flatten(" + "x".join(str(d) for d in space.shape) + ")"
    if isinstance(space, gym.spaces.Discrete):
        return f"one-hot({space.n})"
    if isinstance(space, gym.spaces.MultiDiscrete):
        return "one-hot(" + "+".join(str(int(n)) for n in np.asarray(space.nvec).reshape(-1)) + ")"
    if isinstance(space, gym.spaces.MultiBinary):
        return f"binary({_size(space)})"
    if isinstance(space, gym.spaces.Tuple):
        return "concat[" + ", ".join(encoding_name(s) for s in space.spaces) + "]"
    if isinstance(space, gym.spaces.Dict):
        return "concat{" + ", ".join(f"{k}: {encoding_name(space.spaces[k])}" for k in sorted(space.spaces)) + "}"
    _size(space)
    raise AssertionError("unreachable")
