"""RLModules MOSAIC adds to RLlib (by subclassing, never by patching).

Action masking: PettingZoo classic games observe
``{"observation": ..., "action_mask": ...}``, a Dict RLlib's default encoder
rejects. The masked modules build the default network on the flattened
observation and add ``log(mask)`` to the action logits in every forward
pass, so an illegal move has probability zero in exploration, inference and
the loss alike.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.appo.torch.default_appo_torch_rl_module import DefaultAPPOTorchRLModule
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.utils.torch_utils import FLOAT_MIN

MASK_KEY = "action_mask"


def _inner_key(space: gym.spaces.Dict) -> str:
    for key in ("observation", "observations", "obs"):
        if key in space.spaces:
            return key
    raise ValueError(f"masked observation space needs an 'observation' entry, got keys {list(space.spaces)}")


class ActionMaskingMixin:
    """Mixed in before an RLlib default torch module with discrete actions."""

    def __init__(self, *, observation_space: gym.Space | None = None, **kwargs: Any) -> None:
        if not isinstance(observation_space, gym.spaces.Dict) or MASK_KEY not in observation_space.spaces:
            raise ValueError(f"{type(self).__name__} needs a Dict observation with {MASK_KEY!r}, "
                             f"got {observation_space}")
        self._dict_space = observation_space
        self._obs_key = _inner_key(observation_space)
        size = int(np.prod(observation_space[self._obs_key].shape))
        flat = gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        super().__init__(observation_space=flat, **kwargs)

    def setup(self) -> None:
        super().setup()
        self.observation_space = self._dict_space  # checkpoints record the env's real space

    def _split(self, batch: dict[str, Any]) -> tuple[torch.Tensor, dict[str, Any]]:
        obs = batch[Columns.OBS]
        rest = dict(batch)  # never mutate the caller's batch
        x = obs[self._obs_key]
        rest[Columns.OBS] = x.reshape(x.shape[0], -1).float()
        return obs[MASK_KEY], rest

    @staticmethod
    def _mask_logits(out: dict[str, Any], mask: torch.Tensor) -> dict[str, Any]:
        out[Columns.ACTION_DIST_INPUTS] = out[Columns.ACTION_DIST_INPUTS] + torch.clamp(
            torch.log(mask.float()), min=FLOAT_MIN)
        return out

    def _forward_inference(self, batch: dict[str, Any], **kw: Any) -> dict[str, Any]:
        mask, rest = self._split(batch)
        return self._mask_logits(super()._forward_inference(rest, **kw), mask)

    def _forward_exploration(self, batch: dict[str, Any], **kw: Any) -> dict[str, Any]:
        mask, rest = self._split(batch)
        return self._mask_logits(super()._forward_exploration(rest, **kw), mask)

    def _forward_train(self, batch: dict[str, Any], **kw: Any) -> dict[str, Any]:
        mask, rest = self._split(batch)
        return self._mask_logits(super()._forward_train(rest, **kw), mask)

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> Any:
        if embeddings is None and isinstance(batch[Columns.OBS], dict):
            _, batch = self._split(batch)
        return super().compute_values(batch, embeddings)


class MaskedPPOTorchRLModule(ActionMaskingMixin, DefaultPPOTorchRLModule):
    """PPO and IMPALA (which uses the PPO module) with action masking."""


class MaskedAPPOTorchRLModule(ActionMaskingMixin, DefaultAPPOTorchRLModule):
    """APPO (PPO module plus target networks) with action masking."""


MASKED_MODULES = {"PPO": MaskedPPOTorchRLModule, "A2C": MaskedPPOTorchRLModule, "IMPALA": MaskedPPOTorchRLModule,
                  "APPO": MaskedAPPOTorchRLModule}


class UniformRandomRLModule(RLModule):
    """A fixed baseline opponent: uniformly random *legal* actions, no parameters, never trained.

    It returns actions directly, so RLlib samples nothing from it; with an action
    mask it draws only among the legal moves. It is deliberately not a torch
    module: learners then give it no optimizer. Draws use NumPy's global
    generator, which RLlib seeds per env runner from the run's seed.
    """

    def setup(self) -> None:
        space = self.observation_space
        self._masked = isinstance(space, gym.spaces.Dict) and MASK_KEY in space.spaces

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        obs = batch[Columns.OBS]
        first = next(iter(obs.values())) if isinstance(obs, dict) else obs
        n = int(first.shape[0])
        space = self.action_space
        if self._masked:
            mask = np.asarray(obs[MASK_KEY], dtype=np.float64).reshape(n, -1)
            actions = np.empty(n, dtype=np.int64)
            for i, row in enumerate(mask):
                # A row with no legal move (not this agent's turn) falls back to uniform.
                legal = np.flatnonzero(row) if row.any() else np.arange(row.size)
                actions[i] = np.random.choice(legal)
        elif isinstance(space, gym.spaces.Discrete):
            actions = np.random.randint(int(space.start), int(space.start + space.n), size=n)
        elif isinstance(space, gym.spaces.Box):
            low = np.nan_to_num(space.low, neginf=-1.0)
            high = np.nan_to_num(space.high, posinf=1.0)
            actions = (low + (high - low) * np.random.random_sample((n, *space.shape))).astype(space.dtype)
        else:
            raise ValueError(f"the random baseline supports Discrete and Box actions, not {space}")
        return {Columns.ACTIONS: actions}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        raise RuntimeError("the random baseline is never trained; keep it out of policies_to_train")
