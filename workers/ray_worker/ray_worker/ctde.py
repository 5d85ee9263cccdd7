"""Centralised training, decentralised execution (MAPPO) on RLlib's new API stack.

* :class:`GlobalStateObservations` gives every agent ``{"obs": local, "state": global}``,
  where ``global`` is the env's ``state()`` or, where an env has none, all agents'
  observations joined in a fixed order.
* :class:`CTDEActor` is a per-agent (or per-group) policy that reads only ``obs``:
  execution needs nothing but the local observation.
* :class:`CentralCritic` is ONE value network on ``state``, held once by
  :class:`CTDEMultiRLModule`; every actor's ``compute_values`` calls it, so
  RLlib's GAE connector computes advantages from the central value and every
  agent's value loss trains the same parameters.
* :class:`CTDEPPOTorchLearner` keeps PPO's loss but a single optimizer over the
  union of parameters, so the shared critic is stepped once per update.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule
from ray.rllib.core.rl_module.torch.torch_rl_module import TorchRLModule
from ray.rllib.core.distribution.torch.torch_distribution import TorchCategorical, TorchDiagGaussian
from ray_worker.ctde_ids import CRITIC_ID, LOCAL, STATE
from ray_worker.global_state import GlobalStateObservations

__all__ = ["CRITIC_ID", "CTDEActor", "CTDEMultiRLModule", "CTDEPPOTorchLearner", "CentralCritic",
           "GlobalStateObservations"]


# -- the modules ---------------------------------------------------------------
def _mlp(inputs: int, hidden: list[int], outputs: int, activation: str) -> torch.nn.Sequential:
    act = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU, "elu": torch.nn.ELU,
           "swish": torch.nn.SiLU, "silu": torch.nn.SiLU}.get(activation, torch.nn.Tanh)
    layers: list[torch.nn.Module] = []
    size = inputs
    for width in hidden:
        layers += [torch.nn.Linear(size, width), act()]
        size = width
    layers.append(torch.nn.Linear(size, outputs))
    return torch.nn.Sequential(*layers)


def _local_part(obs: Any) -> torch.Tensor:
    x = obs[LOCAL] if isinstance(obs, dict) else obs
    return x.reshape(x.shape[0], -1).float()


class CentralCritic(TorchRLModule, ValueFunctionAPI):
    """V(global state): the one critic every actor shares. It never acts."""

    def setup(self) -> None:
        space = self.observation_space[STATE] if isinstance(self.observation_space, gym.spaces.Dict) \
            else self.observation_space
        self.state_dim = int(np.prod(space.shape))
        cfg = self.model_config or {}
        self.net = _mlp(self.state_dim, list(cfg.get("fcnet_hiddens", [64, 64])), 1,
                        cfg.get("fcnet_activation", "tanh"))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        obs = batch[Columns.OBS]
        state = obs[STATE] if isinstance(obs, dict) else obs
        return self.net(state.reshape(state.shape[0], -1).float()).squeeze(-1)


class CTDEActor(TorchRLModule, ValueFunctionAPI):
    """A decentralised policy on the local observation; values come from the central critic."""

    def setup(self) -> None:
        space = self.observation_space[LOCAL] if isinstance(self.observation_space, gym.spaces.Dict) \
            else self.observation_space
        cfg = self.model_config or {}
        if isinstance(self.action_space, gym.spaces.Discrete):
            outputs, self._dist = int(self.action_space.n), TorchCategorical
        elif isinstance(self.action_space, gym.spaces.Box):
            outputs, self._dist = 2 * int(np.prod(self.action_space.shape)), TorchDiagGaussian
        else:
            raise ValueError(f"CTDE actors support Discrete and Box actions, not {self.action_space}")
        self.pi = _mlp(int(np.prod(space.shape)), list(cfg.get("fcnet_hiddens", [64, 64])), outputs,
                       cfg.get("fcnet_activation", "tanh"))
        self.__dict__["critic_ref"] = None  # set by CTDEMultiRLModule; not a submodule of the actor

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.pi(_local_part(batch[Columns.OBS]))}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        critic = self.__dict__.get("critic_ref")
        if critic is None:
            raise RuntimeError("this actor is not attached to a central critic (inference-only use)")
        return critic.compute_values(batch)

    def get_inference_action_dist_cls(self) -> type:
        return self._dist

    def get_exploration_action_dist_cls(self) -> type:
        return self._dist

    def get_train_action_dist_cls(self) -> type:
        return self._dist


class CTDEMultiRLModule(MultiRLModule):
    """Holds the actors and the one central critic, and wires them together."""

    def setup(self) -> None:
        super().setup()
        critic = self._rl_modules.get(CRITIC_ID)
        for module_id, module in self._rl_modules.items():
            if module_id != CRITIC_ID:
                module.__dict__["critic_ref"] = critic


class CTDEPPOTorchLearner(PPOTorchLearner):
    """PPO's loss with one optimizer over every distinct parameter (the critic exactly once)."""

    def configure_optimizers(self) -> None:
        params, seen = [], set()
        for module_id in self.module.keys():
            module = self.module[module_id]
            if not self.rl_module_is_compatible(module):
                continue
            for p in module.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        self.register_optimizer(optimizer_name="ctde", optimizer=torch.optim.Adam(params=params),
                                params=params, lr_or_lr_schedule=self.config.lr)
