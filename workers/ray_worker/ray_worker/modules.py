"""RLModules MOSAIC adds to RLlib (by subclassing, never by patching).

Action masking: PettingZoo classic games observe
``{"observation": ..., "action_mask": ...}``, a Dict RLlib's default encoder
rejects. The masked modules build the default network on the flattened
observation and mask every output that ranks actions, in every forward path
(exploration, inference, the loss and target networks):

* policy-gradient modules (PPO, A2C, IMPALA, APPO) set an illegal move's
  logit to a very negative number, so it has probability zero;
* the Q module (DQN) sets an illegal move's Q value to a very negative number
  and draws epsilon-greedy's random moves among the legal ones only.

A row without any legal move (not the agent's turn, or a final observation)
is left unmasked: nothing is chosen from it, and bootstrapping from it stays finite.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.appo.torch.default_appo_torch_rl_module import DefaultAPPOTorchRLModule
from ray.rllib.algorithms.dqn.default_dqn_rl_module import QF_PREDS
from ray.rllib.algorithms.dqn.torch.default_dqn_torch_rl_module import DefaultDQNTorchRLModule
from ray.rllib.algorithms.ppo.torch.default_ppo_torch_rl_module import DefaultPPOTorchRLModule
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import TARGET_NETWORK_ACTION_DIST_INPUTS
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.utils.torch_utils import FLOAT_MIN

from ray_worker.traits import TRAITS

MASK_KEY = "action_mask"


def _inner_key(space: gym.spaces.Dict) -> str:
    for key in ("observation", "observations", "obs"):
        if key in space.spaces:
            return key
    raise ValueError(f"masked observation space needs an 'observation' entry, got keys {list(space.spaces)}")


def _legal(mask: torch.Tensor) -> torch.Tensor:
    """Boolean legality per action; rows without any legal move count every action as legal."""
    legal = mask.reshape(mask.shape[0], -1) > 0
    return legal | ~legal.any(dim=-1, keepdim=True)


def _mask_scores(scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Scores (logits or Q values) with every illegal action pushed to a very negative number."""
    return torch.where(_legal(mask), scores, torch.full_like(scores, FLOAT_MIN))


class MaskedObservationMixin:
    """Mixed in before an RLlib default torch module: builds it on the flattened inner observation."""

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


class ActionMaskingMixin(MaskedObservationMixin):
    """Masked action logits for a policy-gradient module with discrete actions."""

    @staticmethod
    def _mask_logits(out: dict[str, Any], mask: torch.Tensor, key: str = Columns.ACTION_DIST_INPUTS
                     ) -> dict[str, Any]:
        out[key] = _mask_scores(out[key], mask)
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
    """APPO (PPO module plus target networks) with action masking; the target policy is masked too."""

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        mask, rest = self._split(batch)
        return self._mask_logits(super().forward_target(rest), mask, TARGET_NETWORK_ACTION_DIST_INPUTS)


class MaskedDQNTorchRLModule(MaskedObservationMixin, DefaultDQNTorchRLModule):
    """DQN with action masking: illegal actions have very negative Q values in the online and target
    networks, so greedy choices, double-Q's next action and the bootstrapped maximum are legal moves."""

    def compute_q_values(self, batch: dict[str, Any]) -> dict[str, Any]:
        mask, rest = self._split(batch)
        out = super().compute_q_values(rest)
        out[QF_PREDS] = _mask_scores(out[QF_PREDS], mask)
        return out

    def forward_target(self, batch: dict[str, Any]) -> dict[str, Any]:
        mask, rest = self._split(batch)
        out = super().forward_target(rest)
        out[QF_PREDS] = _mask_scores(out[QF_PREDS], mask)
        return out

    def _forward_exploration(self, batch: dict[str, Any], t: int) -> dict[str, Any]:
        """Epsilon-greedy over legal moves: the random move is drawn uniformly among them."""
        q = self.compute_q_values(batch)
        greedy = torch.argmax(q[QF_PREDS], dim=-1)
        self.epsilon_schedule.update(t)
        epsilon = self.epsilon_schedule.get_current_value()
        legal = _legal(batch[Columns.OBS][MASK_KEY]).float()
        random_moves = torch.multinomial(legal, num_samples=1).squeeze(1)
        explore = torch.rand(greedy.shape, device=greedy.device) < epsilon
        return {Columns.ACTIONS: torch.where(explore, random_moves, greedy)}


#: Algorithm -> its masked module class, as ray_worker.traits names it.
MASKED_MODULES = {name: globals()[t.masked_module] for name, t in TRAITS.items() if t.masked_module}


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
