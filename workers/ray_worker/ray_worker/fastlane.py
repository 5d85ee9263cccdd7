"""FastLane for RLlib: env runners publish rendered frames, one stream per env runner.

The RLlib env is wrapped, not RLlib: :class:`FastLaneParallelEnv` and
:class:`FastLaneAECEnv` subclass RLlib's own PettingZoo wrappers and, after
each ``reset``/``step``, offer a frame to a throttled :class:`Publisher`. The
frame comes from the PettingZoo env itself (built with
``render_mode="rgb_array"``), because RLlib's wrappers' ``render()`` raises a
TypeError on this RLlib version. Each frame is tagged with the episode, the
step and the step's per-agent rewards and episode returns.

A single-agent (Gymnasium) env is wrapped the same way by :class:`FastLaneGymEnv`, a
``gymnasium.Wrapper``; its one agent is ``agent_0`` in the frames' rewards and returns.

Streams are named ``runner-<worker_index>`` (0 is the driver's local env
runner). An env runner with several vectorised sub-envs publishes from the
first one it builds: the claim is per process and passes on when that env
closes, so an env runner that rebuilds its env keeps its stream.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import gymnasium as gym
from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv

from mosaic.fastlane.config import FastLaneTarget
from mosaic.fastlane.publisher import Publisher
from mosaic.workerkit.contract import SINGLE_AGENT  # the one agent of a single-agent env (as environment.py)

_claims: dict[str, int] = {}  # stream -> id() of the env publishing it, in this process
_claims_lock = threading.Lock()


def stream_name(env_context: Any) -> str:
    return f"runner-{int(getattr(env_context, 'worker_index', 0) or 0)}"


def _claim(stream: str, owner: object) -> bool:
    with _claims_lock:
        if stream in _claims:
            return False
        _claims[stream] = id(owner)
        return True


def _release(stream: str, owner: object) -> None:
    with _claims_lock:
        if _claims.get(stream) == id(owner):
            del _claims[stream]


class _FrameTap:
    """Episode/step/return bookkeeping and the publisher of one env (shared by both wrappers)."""

    def __init__(self, pz_env: Any, target: FastLaneTarget, stream: str, env_id: str) -> None:
        self.pz_env, self.stream, self.env_id = pz_env, stream, env_id
        self.publisher = Publisher(target, stream, owner={"env_id": env_id, "pid": os.getpid()})
        self.episode, self.step = -1, 0
        self.returns: dict[str, float] = {}
        self.rewards: dict[str, float] = {}

    def on_reset(self) -> None:
        self.episode += 1
        self.step = 0
        self.returns, self.rewards = {}, {}
        self._offer()

    def on_step(self, rewards: dict) -> None:
        self.step += 1
        self.rewards = rewards
        for agent, reward in rewards.items():
            self.returns[agent] = self.returns.get(agent, 0.0) + float(reward)
        self._offer()

    def _offer(self) -> None:
        if self.publisher.due():
            self.publisher.offer(self.pz_env.render, self.episode, self.step, self._meta)

    def _meta(self) -> dict[str, Any]:
        return {"env_id": self.env_id, "rewards": {str(a): float(r) for a, r in self.rewards.items()},
                "returns": {str(a): r for a, r in self.returns.items()}}

    def close(self) -> None:
        self.publisher.close()


class _TapOwner:
    """An env wrapper that holds its stream's frame tap (if it claimed the stream) and releases it on close."""

    _tap: _FrameTap | None = None
    _stream: str = ""

    def _attach_tap(self, env: Any, target: FastLaneTarget, env_context: Any, env_id: str) -> None:
        self._stream = stream_name(env_context)
        if _claim(self._stream, self):
            self._tap = _FrameTap(env, target, self._stream, env_id)

    def close(self) -> None:
        if self._tap is not None:
            self._tap.close()
            self._tap = None
            _release(self._stream, self)
        super().close()


class _FastLaneMixin(_TapOwner):
    """reset/step hooks around an RLlib PettingZoo wrapper."""

    def reset(self, *args: Any, **kwargs: Any) -> Any:
        result = super().reset(*args, **kwargs)
        if self._tap is not None:
            self._tap.on_reset()
        return result

    def step(self, action_dict: Any) -> Any:
        result = super().step(action_dict)
        if self._tap is not None:
            self._tap.on_step(result[1])
        return result


class FastLaneParallelEnv(_FastLaneMixin, ParallelPettingZooEnv):
    def __init__(self, env: Any, target: FastLaneTarget, env_context: Any = None, env_id: str = "") -> None:
        super().__init__(env)
        self._attach_tap(env, target, env_context, env_id)


class FastLaneAECEnv(_FastLaneMixin, PettingZooEnv):
    def __init__(self, env: Any, target: FastLaneTarget, env_context: Any = None, env_id: str = "") -> None:
        super().__init__(env)
        self._attach_tap(env, target, env_context, env_id)


def wrap(pz_env: Any, api_type: str, target: FastLaneTarget, env_context: Any = None, env_id: str = "") -> Any:
    """The RLlib ``MultiAgentEnv`` for ``pz_env``, publishing frames if it can render them."""
    cls = FastLaneAECEnv if api_type == "AEC" else FastLaneParallelEnv
    if getattr(pz_env, "render_mode", None) != "rgb_array":
        import warnings

        warnings.warn(f"FastLane: {env_id or pz_env} was not built with render_mode='rgb_array'; "
                      "no frames will be published", stacklevel=2)
        return (PettingZooEnv if api_type == "AEC" else ParallelPettingZooEnv)(pz_env)
    return cls(pz_env, target, env_context, env_id)


class FastLaneGymEnv(_TapOwner, gym.Wrapper):
    """A single-agent env that offers a frame after each ``reset``/``step`` (RLlib's single-agent path)."""

    def __init__(self, env: gym.Env, target: FastLaneTarget, env_context: Any = None, env_id: str = "") -> None:
        super().__init__(env)
        self._attach_tap(env, target, env_context, env_id)

    def reset(self, **kwargs: Any) -> Any:
        result = self.env.reset(**kwargs)
        if self._tap is not None:
            self._tap.on_reset()
        return result

    def step(self, action: Any) -> Any:
        result = self.env.step(action)
        if self._tap is not None:
            self._tap.on_step({SINGLE_AGENT: float(result[1])})
        return result


def wrap_single(env: gym.Env, target: FastLaneTarget, env_context: Any = None, env_id: str = "") -> gym.Env:
    """The single-agent env for RLlib, publishing frames if it can render them."""
    if getattr(env, "render_mode", None) != "rgb_array":
        import warnings

        warnings.warn(f"FastLane: {env_id or env} was not built with render_mode='rgb_array'; "
                      "no frames will be published", stacklevel=2)
        return env
    return FastLaneGymEnv(env, target, env_context, env_id)
