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

Vector inputs get an MLP; image inputs (HxWxC, e.g. pistonball's preprocessed frames
for actors and its shrunk board for the critic) get a small CNN (``conv_filters``,
default :data:`ray_worker.algorithms.SMALL_CNN`) followed by that MLP.
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
           "GlobalStateObservations", "ImageEncoder"]


# -- the modules ---------------------------------------------------------------
def _linear(inputs: int, outputs: int, weights: str | None, biases: str | None) -> torch.nn.Linear:
    """A linear layer, its weights and biases set by torch.nn.init's ``weights``/``biases`` (None: torch's default)."""
    layer = torch.nn.Linear(inputs, outputs)
    if weights:
        getattr(torch.nn.init, weights)(layer.weight)
    if biases:
        getattr(torch.nn.init, biases)(layer.bias)
    return layer


def _mlp(inputs: int, hidden: list[int], outputs: int, activation: str,
         cfg: dict[str, Any] | None = None) -> torch.nn.Sequential:
    """Hidden layers as RLlib's default encoders build them (linear, LayerNorm if asked, activation), then the
    output layer at torch's default, as RLlib's PPO heads; the model keys ``fcnet_use_layernorm`` and
    ``fcnet_{kernel,bias}_initializer`` mean what they mean to RLlib."""
    cfg = cfg or {}
    act = {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU, "elu": torch.nn.ELU,
           "swish": torch.nn.SiLU, "silu": torch.nn.SiLU}.get(activation, torch.nn.Tanh)
    layers: list[torch.nn.Module] = []
    size = inputs
    for width in hidden:
        layers.append(_linear(size, width, cfg.get("fcnet_kernel_initializer"), cfg.get("fcnet_bias_initializer")))
        if cfg.get("fcnet_use_layernorm"):
            layers.append(torch.nn.LayerNorm(width))
        layers.append(act())
        size = width
    layers.append(torch.nn.Linear(size, outputs))
    return torch.nn.Sequential(*layers)


def is_image(space: gym.Space) -> bool:
    """An HxWxC Box: read with a CNN rather than flattened into an MLP."""
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


class ImageEncoder(torch.nn.Module):
    """Batches of HxWxC images → flat features: channels-first, conv stack (padded), flatten.

    Padding keeps every layer's output at least 1x1, so small or narrow inputs (a
    24x9 board) work with the same filters as 42x42 frames.
    """

    def __init__(self, space: gym.spaces.Box, filters: list, activation: str = "relu") -> None:
        super().__init__()
        self.input_shape = tuple(int(d) for d in space.shape)
        # raw uint8 pixels (preprocessing off) are scaled like the preprocessed [0, 1] frames
        self.scale = 1.0 / 255.0 if space.dtype == np.uint8 else 1.0
        act = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "elu": torch.nn.ELU,
               "swish": torch.nn.SiLU, "silu": torch.nn.SiLU}.get(activation, torch.nn.ReLU)
        layers: list[torch.nn.Module] = []
        channels = self.input_shape[-1]
        for out, kernel, stride in filters:
            kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
            sh, sw = (stride, stride) if isinstance(stride, int) else stride
            layers += [torch.nn.Conv2d(channels, int(out), (kh, kw), (sh, sw), padding=(kh // 2, kw // 2)), act()]
            channels = int(out)
        layers.append(torch.nn.Flatten())
        self.convs = torch.nn.Sequential(*layers)
        h, w, c = self.input_shape
        with torch.no_grad():
            self.output_size = int(self.convs(torch.zeros(1, c, h, w)).shape[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.reshape(-1, *self.input_shape).float() * self.scale
        return self.convs(x.permute(0, 3, 1, 2))


def _network(space: gym.Space, outputs: int, cfg: dict[str, Any]) -> torch.nn.Sequential:
    """MLP on vectors (as before, so vector checkpoints keep their parameter names); CNN + MLP on images."""
    hidden, activation = list(cfg.get("fcnet_hiddens", [64, 64])), cfg.get("fcnet_activation", "tanh")
    if not is_image(space):
        return _mlp(int(np.prod(space.shape)), hidden, outputs, activation, cfg)
    filters = cfg.get("conv_filters")
    if not filters:
        from ray_worker.algorithms import SMALL_CNN

        filters = SMALL_CNN
    encoder = ImageEncoder(space, filters, cfg.get("conv_activation", "relu"))
    return torch.nn.Sequential(encoder, _mlp(encoder.output_size, hidden, outputs, activation, cfg))


def _part(obs: Any, key: str, image: bool) -> torch.Tensor:
    """This module's input from the observation batch: flat for MLPs, as is for CNNs."""
    x = obs[key] if isinstance(obs, dict) else obs
    return x if image else x.reshape(x.shape[0], -1).float()


def _subspace(space: gym.Space, key: str) -> gym.Space:
    return space[key] if isinstance(space, gym.spaces.Dict) else space


class CentralCritic(TorchRLModule, ValueFunctionAPI):
    """V(global state): the one critic every actor shares. It never acts."""

    def setup(self) -> None:
        space = _subspace(self.observation_space, STATE)
        self.state_dim = int(np.prod(space.shape))
        self._image = is_image(space)
        self.net = _network(space, 1, self.model_config or {})

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {}

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        return self.net(_part(batch[Columns.OBS], STATE, self._image)).squeeze(-1)


class CTDEActor(TorchRLModule, ValueFunctionAPI):
    """A decentralised policy on the local observation; values come from the central critic."""

    def setup(self) -> None:
        space = _subspace(self.observation_space, LOCAL)
        if isinstance(self.action_space, gym.spaces.Discrete):
            outputs, self._dist = int(self.action_space.n), TorchCategorical
        elif isinstance(self.action_space, gym.spaces.Box):
            outputs, self._dist = 2 * int(np.prod(self.action_space.shape)), TorchDiagGaussian
        else:
            raise ValueError(f"CTDE actors support Discrete and Box actions, not {self.action_space}")
        self._image = is_image(space)
        self.pi = _network(space, outputs, self.model_config or {})
        self.__dict__["critic_ref"] = None  # set by CTDEMultiRLModule; not a submodule of the actor

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {Columns.ACTION_DIST_INPUTS: self.pi(_part(batch[Columns.OBS], LOCAL, self._image))}

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

    def postprocess_gradients(self, gradients_dict: dict) -> dict:
        """Clip every gradient together, as ``grad_clip``/``grad_clip_by`` ask.

        RLlib post-processes (clips) gradients module by module, through the optimizers registered for each
        module; the one optimizer here spans all modules (registered under ``ALL_MODULES``), so RLlib's own
        pass would visit none of it and gradients would go to Adam unclipped whatever the config said.
        """
        config = self.config
        if config.grad_clip:
            norm = self._get_clip_function()(gradients_dict, grad_clip=config.grad_clip,
                                             grad_clip_by=config.grad_clip_by)
            if config.grad_clip_by == "global_norm":
                from ray.rllib.core import ALL_MODULES

                self.metrics.log_value(key=(ALL_MODULES, "gradients_ctde_global_norm"), value=norm, window=1)
        return gradients_dict
