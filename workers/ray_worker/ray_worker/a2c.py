"""A2C on RLlib's new API stack: synchronous advantage actor-critic.

RLlib 2.x dropped A2C. It is PPO's machinery without PPO's trust region:
the same sampling and GAE/n-step advantages (RLlib's learner connector),
but exactly one gradient step per sampled batch (one epoch, the whole batch
as one minibatch), no ratio clipping and no KL term. The loss is

    -E[log pi(a|s) * A] + vf_loss_coeff * E[(V(s) - R)^2] - entropy_coeff * E[H(pi(.|s))]

``lambda_=1.0`` turns GAE into n-step/Monte-Carlo returns bootstrapped at the
fragment end (classic A2C); the default 0.95 is GAE.
"""

from __future__ import annotations

from typing import Any

import torch
from ray.rllib.algorithms.ppo import PPO, PPOConfig
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.torch_utils import explained_variance


class A2CConfig(PPOConfig):
    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class or A2C)
        self.num_epochs = 1  # one pass ...
        self.minibatch_size = None  # ... over the whole batch: one gradient step per batch
        self.use_kl_loss = False
        self.lr = 7e-4
        self.vf_loss_coeff = 0.5
        self.entropy_coeff = 0.01
        self.grad_clip = 0.5

    def get_default_learner_class(self) -> type:
        return A2CTorchLearner

    def validate(self) -> None:
        super().validate()
        if self.num_epochs != 1 or self.minibatch_size is not None or self.use_kl_loss:
            raise ValueError("A2C takes exactly one gradient step per batch: num_epochs=1, "
                             "minibatch_size=None, use_kl_loss=False")


class A2C(PPO):
    @classmethod
    def get_default_config(cls) -> A2CConfig:
        return A2CConfig()


class A2CTorchLearner(PPOTorchLearner):
    """PPO's learner with the vanilla advantage actor-critic loss."""

    def compute_loss_for_module(self, *, module_id: str, config: A2CConfig, batch: dict[str, Any],
                                fwd_out: dict[str, Any]) -> torch.Tensor:
        module = self.module[module_id].unwrapped()
        if Columns.LOSS_MASK in batch:
            mask = batch[Columns.LOSS_MASK]
            count = torch.sum(mask)

            def mean(values: torch.Tensor) -> torch.Tensor:
                return torch.sum(values[mask]) / count
        else:
            mean = torch.mean
        dist = module.get_train_action_dist_cls().from_logits(fwd_out[Columns.ACTION_DIST_INPUTS])
        logp = dist.logp(batch[Columns.ACTIONS])
        advantages = batch[Postprocessing.ADVANTAGES]
        values = module.compute_values(batch, embeddings=fwd_out.get(Columns.EMBEDDINGS))
        value_targets = batch[Postprocessing.VALUE_TARGETS]
        policy_loss = -mean(logp * advantages)
        vf_loss = mean(torch.pow(values - value_targets, 2.0))
        entropy = mean(dist.entropy())
        entropy_coeff = self.entropy_coeff_schedulers_per_module[module_id].get_current_value()
        total = policy_loss + config.vf_loss_coeff * vf_loss - entropy_coeff * entropy
        self.metrics.log_dict({
            POLICY_LOSS_KEY: policy_loss,
            VF_LOSS_KEY: vf_loss,
            ENTROPY_KEY: entropy,
            "vf_explained_var": explained_variance(value_targets, values),
        }, key=module_id, window=1)
        return total
