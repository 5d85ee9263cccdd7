"""PPO on ``jumanji.training``'s own networks, beside its A2C.

Jumanji ships an A2C agent and no PPO. :class:`PPOAgent` is a subclass of Jumanji's
``A2CAgent``: the actor-critic networks ``jumanji.training`` builds for each env
(unmodified, by its own ``_setup_actor_critic_neworks``), the parameter layout
(``ActorCriticParams``), ``init_params``, ``make_policy`` (so Jumanji's ``Evaluator``
plays it greedily or stochastically exactly as it plays A2C) and the training rollout
(``A2CAgent.rollout``: the same ``jax.lax.scan`` over the auto-resetting env batch)
are all A2C's. Only the learner step differs (:meth:`PPOAgent.run_epoch`):

1. one rollout of ``n_steps`` x the device's envs with the current policy, as A2C's;
   the sampled actions are kept before Jumanji's postprocessing (the "raw" actions
   its distributions score; :meth:`make_policy` hands them out beside the logits while
   a training rollout runs);
2. values of every observation and the last one, GAE advantages
   (``rlax.truncated_generalized_advantage_estimation``, lambda = Jumanji's
   ``bootstrapping_factor``, discount = ``discount_factor`` times the env's discount),
   returns = advantages + values;
3. ``update_epochs`` passes over the rollout, each shuffled into ``num_minibatches``
   minibatches of whole time steps (each time step: the device's env batch as the
   rollout saw it, in its order; Jumanji's networks are applied to it as the rollout
   applied them, vmapped over time as A2C's critic is: some index across the batch
   axis, e.g. TSP's attention masks, so a network's output for an env depends on the
   batch it is in, and a minibatch of shuffled transitions would score other
   log-probabilities than the rollout's); per minibatch one optimiser step on
   ``l_pg * clipped surrogate + l_td * (returns - value)^2 - l_en * entropy``, the
   ratio against the rollout's log-probabilities clipped to 1 +- ``clip_epsilon``,
   advantages standardised per minibatch when ``normalize_advantage``; gradients are
   averaged over devices (``pmean``, as A2C's) and clipped to ``max_grad_norm`` (0: no
   clipping) before Adam.

``train.py``'s loop runs it unchanged: ``num_learner_steps_per_epoch`` learner steps
(rollouts) per epoch, the same env steps per epoch as A2C, the same evaluations. Its
training values carry A2C's names (``total_loss``, ``policy_loss``, ``critic_loss``,
``entropy``, ``entropy_loss``, ``advantage``, ``value``) plus ``approx_kl`` and
``clip_fraction``, each the mean over the learner step's minibatches.

This module imports JAX and Jumanji: it is loaded only in the worker's own environment, when a run starts.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Callable, Dict, Tuple

import chex
import haiku as hk
import jax
import jax.numpy as jnp
import optax
import rlax
from omegaconf import DictConfig, open_dict

from jumanji.env import Environment
from jumanji.training import setup_train
from jumanji.training.agents.a2c import A2CAgent
from jumanji.training.agents.base import Agent
from jumanji.training.networks.actor_critic import ActorCriticNetworks
from jumanji.training.types import ActingState, ActorCriticParams, ParamsState, TrainingState


class PPOAgent(A2CAgent):
    """Jumanji's A2C agent with a PPO learner step: clipped surrogate, GAE, epochs of minibatches."""

    def __init__(self, env: Environment, n_steps: int, total_batch_size: int,
                 actor_critic_networks: ActorCriticNetworks, optimizer: optax.GradientTransformation,
                 normalize_advantage: bool, discount_factor: float, bootstrapping_factor: float, l_pg: float,
                 l_td: float, l_en: float, clip_epsilon: float, update_epochs: int, num_minibatches: int) -> None:
        super().__init__(env=env, n_steps=n_steps, total_batch_size=total_batch_size,
                         actor_critic_networks=actor_critic_networks, optimizer=optimizer,
                         normalize_advantage=normalize_advantage, discount_factor=discount_factor,
                         bootstrapping_factor=bootstrapping_factor, l_pg=l_pg, l_td=l_td, l_en=l_en)
        if n_steps % num_minibatches:
            raise ValueError(f"num_minibatches={num_minibatches} does not divide n_steps={n_steps} (minibatches "
                             "are whole time steps of the rollout)")
        self.clip_epsilon = clip_epsilon
        self.update_epochs = update_epochs
        self.num_minibatches = num_minibatches
        self.minibatch_steps = n_steps // num_minibatches
        self._keep_raw_actions = False  # set while a training rollout is traced (see make_policy)

    # -- acting: A2C's policy, plus the raw actions while a training rollout is traced -------------
    def make_policy(self, policy_params: hk.Params, stochastic: bool = True) -> Callable:
        policy = super().make_policy(policy_params=policy_params, stochastic=stochastic)
        if not self._keep_raw_actions:
            return policy
        distribution = self.actor_critic_networks.parametric_action_distribution

        def policy_keeping_raw_actions(observation: Any, key: chex.PRNGKey) -> Tuple[chex.Array, Any]:
            action, (log_prob, logits) = policy(observation, key)
            # the same draw A2C's policy made (same logits, same key): the action before postprocessing
            raw_action = distribution.sample_no_postprocessing(logits, key)
            return action, (log_prob, (logits, raw_action))

        return policy_keeping_raw_actions

    def training_rollout(self, policy_params: hk.Params, acting_state: ActingState) -> Tuple[ActingState, Any]:
        """A2C's rollout; its ``logits`` field holds (logits, raw actions)."""
        self._keep_raw_actions = True
        try:
            return self.rollout(policy_params=policy_params, acting_state=acting_state)
        finally:
            self._keep_raw_actions = False

    # -- learning ------------------------------------------------------------------------------------
    def run_epoch(self, training_state: TrainingState) -> Tuple[TrainingState, Dict]:
        """One learner step: a rollout, then ``update_epochs`` x ``num_minibatches`` PPO updates."""
        if not isinstance(training_state.params_state, ParamsState):
            raise TypeError(f"Expected params_state to be of type ParamsState, got "
                            f"{type(training_state.params_state)}.")
        params_state = training_state.params_state
        acting_key, shuffle_key = jax.random.split(training_state.acting_state.key)
        acting_state = training_state.acting_state._replace(key=acting_key)
        acting_state, batch, values, extras = self.collect(params_state.params, acting_state)

        def minibatch_step(carry: Tuple[ParamsState, chex.PRNGKey], minibatch: Dict) -> Tuple[Any, Dict]:
            state, key = carry
            key, entropy_key = jax.random.split(key)
            grad, metrics = jax.grad(self.ppo_loss, has_aux=True)(state.params, minibatch, entropy_key)
            grad, metrics = jax.lax.pmean((grad, metrics), "devices")
            updates, opt_state = self.optimizer.update(grad, state.opt_state, state.params)
            state = ParamsState(params=optax.apply_updates(state.params, updates), opt_state=opt_state,
                                update_count=state.update_count + 1)
            return (state, key), metrics

        def one_pass(carry: Tuple[ParamsState, chex.PRNGKey], key: chex.PRNGKey) -> Tuple[Any, Dict]:
            permutation = jax.random.permutation(key, self.n_steps)  # of the time steps
            minibatches = jax.tree_util.tree_map(
                lambda x: x[permutation].reshape((self.num_minibatches, self.minibatch_steps) + x.shape[1:]), batch)
            return jax.lax.scan(minibatch_step, carry, minibatches)

        pass_keys = jax.random.split(shuffle_key, self.update_epochs + 1)
        (params_state, _), metrics = jax.lax.scan(one_pass, (params_state, pass_keys[0]), pass_keys[1:])
        metrics = jax.tree_util.tree_map(jnp.mean, metrics)  # over the passes' minibatches
        metrics.update(value=jnp.mean(values))
        if extras:  # the env's measures of the rollout, as A2C logs them
            metrics.update(extras)
        return TrainingState(params_state=params_state, acting_state=acting_state), metrics

    def collect(self, params: ActorCriticParams, acting_state: ActingState) -> Tuple[ActingState, Dict, Any, Any]:
        """A2C's rollout, then GAE with the rollout's values: (acting state, the transitions with their
        log-probabilities, advantages and returns, time-major (T, B, ...), the values (T + 1, B), the env's
        extras)."""
        acting_state, data = self.training_rollout(params.actor, acting_state)
        _, raw_action = data.logits
        last_observation = jax.tree_util.tree_map(lambda x: x[-1], data.next_observation)
        observations = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b[None]], axis=0),
                                              data.observation, last_observation)
        values = jax.vmap(self.actor_critic_networks.value_network.apply, in_axes=(None, 0))(
            params.critic, observations)  # (T + 1, B): time-major, one column per env
        discounts = jnp.asarray(self.discount_factor * data.discount, float)
        gae = jax.vmap(rlax.truncated_generalized_advantage_estimation, in_axes=(1, 1, None, 1), out_axes=1)
        advantages = gae(data.reward, discounts, self.bootstrapping_factor, values)
        returns = advantages + values[:-1]
        batch = {"observation": data.observation, "raw_action": raw_action, "log_prob": data.log_prob,
                 "advantage": advantages, "return": returns}
        return acting_state, jax.lax.stop_gradient(batch), values, data.extras

    def ppo_loss(self, params: ActorCriticParams, minibatch: Dict, key: chex.PRNGKey) -> Tuple[chex.Array, Dict]:
        distribution = self.actor_critic_networks.parametric_action_distribution
        over_time = functools.partial(jax.vmap, in_axes=(None, 0))  # each time step: the env batch, as rolled out
        logits = over_time(self.actor_critic_networks.policy_network.apply)(params.actor, minibatch["observation"])
        log_prob = distribution.log_prob(logits, minibatch["raw_action"])
        log_ratio = log_prob - minibatch["log_prob"]
        ratio = jnp.exp(log_ratio)
        advantage = minibatch["advantage"]
        metrics: Dict = {}
        if self.normalize_advantage:
            metrics.update(unnormalized_advantage=jnp.mean(advantage))
            advantage = jax.nn.standardize(advantage)
        clipped_ratio = jnp.clip(ratio, 1.0 - self.clip_epsilon, 1.0 + self.clip_epsilon)
        policy_loss = -jnp.mean(jnp.minimum(ratio * advantage, clipped_ratio * advantage))
        value = over_time(self.actor_critic_networks.value_network.apply)(params.critic, minibatch["observation"])
        critic_loss = jnp.mean((minibatch["return"] - value) ** 2)
        entropy = jnp.mean(distribution.entropy(logits, key))
        entropy_loss = -entropy
        total_loss = self.l_pg * policy_loss + self.l_td * critic_loss + self.l_en * entropy_loss
        metrics.update(total_loss=total_loss, policy_loss=policy_loss, critic_loss=critic_loss,
                       entropy_loss=entropy_loss, entropy=entropy, advantage=jnp.mean(advantage),
                       approx_kl=jnp.mean((ratio - 1.0) - log_ratio),
                       clip_fraction=jnp.mean((jnp.abs(ratio - 1.0) > self.clip_epsilon).astype(float)))
        return total_loss, metrics


def make_optimizer(learning_rate: float, max_grad_norm: float) -> optax.GradientTransformation:
    """A2C's optimiser (``optax.adam``), after clipping the gradients' global norm (0: not clipped)."""
    adam = optax.adam(learning_rate)
    return optax.chain(optax.clip_by_global_norm(max_grad_norm), adam) if max_grad_norm > 0 else adam


def setup_agent(cfg: DictConfig, env: Environment) -> Agent:
    """``setup_train.setup_agent`` with ``agent=ppo`` added: the env's A2C networks, PPO's learner step
    (hyperparameters: the composed config's ``env.ppo`` section). Other agents: Jumanji's own setup."""
    if cfg.agent != "ppo":
        return setup_train.setup_agent(cfg, env)
    as_a2c = copy.deepcopy(cfg)
    with open_dict(as_a2c):
        as_a2c.agent = "a2c"  # Jumanji builds an env's networks for its A2C only; they are the same networks
    networks = setup_train._setup_actor_critic_neworks(as_a2c, env)
    ppo = cfg.env.ppo
    return PPOAgent(env=env, n_steps=cfg.env.training.n_steps, total_batch_size=cfg.env.training.total_batch_size,
                    actor_critic_networks=networks, optimizer=make_optimizer(ppo.learning_rate, ppo.max_grad_norm),
                    normalize_advantage=ppo.normalize_advantage, discount_factor=ppo.discount_factor,
                    bootstrapping_factor=ppo.bootstrapping_factor, l_pg=ppo.l_pg, l_td=ppo.l_td, l_en=ppo.l_en,
                    clip_epsilon=ppo.clip_epsilon, update_epochs=ppo.update_epochs, num_minibatches=ppo.num_minibatches)
