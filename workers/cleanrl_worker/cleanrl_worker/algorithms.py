"""Each CleanRL script this worker runs, and its traits, in one place.

A trait is a fact about the *upstream script*, read from its source: which
module runs it, which env API it imports (CleanRL 1.2.0 is half-way from gym to
gymnasium), which action space it accepts, and which of its ``__main__``
globals is the policy a checkpoint is played with. Nothing here imports
CleanRL, so it is safe in MOSAIC's own environment.
"""

from __future__ import annotations

from dataclasses import dataclass

from mosaic.errors import ConfigError, one_of


@dataclass(frozen=True)
class Algorithm:
    name: str
    module: str  # ``python -m <module>``
    env_api: str  # "gym" (0.23.1) or "gymnasium" (0.29.1): what the script imports as ``gym``
    action_space: str  # "discrete" or "box"
    on_policy: bool
    #: The ``__main__`` global holding the network greedy play uses, and its class in the module.
    policy_global: str
    policy_class: str
    default_env: str
    #: Metric names of the script (without ``losses/``) -> the names MOSAIC's metrics use.
    losses: tuple[tuple[str, str], ...] = ()

    @property
    def script(self) -> str:
        return self.module.rsplit(".", 1)[-1] + ".py"


_ACTOR_CRITIC = (("value_loss", "vf_loss"), ("policy_loss", "policy_loss"), ("entropy", "entropy"),
                 ("approx_kl", "mean_kl_loss"))
_Q = (("td_loss", "qf_loss"), ("loss", "qf_loss"), ("q_values", "q_values"))
_CONTINUOUS = (("qf_loss", "qf_loss"), ("actor_loss", "policy_loss"), ("alpha", "alpha_value"),
               ("alpha_loss", "alpha_loss"))

ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("ppo", "cleanrl.ppo", "gym", "discrete", True, "agent", "Agent", "CartPole-v1", _ACTOR_CRITIC),
    Algorithm("dqn", "cleanrl.dqn", "gymnasium", "discrete", False, "q_network", "QNetwork", "CartPole-v1", _Q),
    Algorithm("c51", "cleanrl.c51", "gym", "discrete", False, "q_network", "QNetwork", "CartPole-v1", _Q),
    Algorithm("sac", "cleanrl.sac_continuous_action", "gym", "box", False, "actor", "Actor", "Pendulum-v1",
              _CONTINUOUS),
    Algorithm("td3", "cleanrl.td3_continuous_action", "gym", "box", False, "actor", "Actor", "Pendulum-v1",
              _CONTINUOUS),
    Algorithm("ddpg", "cleanrl.ddpg_continuous_action", "gymnasium", "box", False, "actor", "Actor",
              "Pendulum-v1", _CONTINUOUS),
)}

#: The classic-control tasks, by the action space they have (the same ids in gym 0.23.1 and gymnasium 0.29.1).
ENV_IDS = {
    "discrete": ("CartPole-v1", "Acrobot-v1", "MountainCar-v0"),
    "box": ("Pendulum-v1", "MountainCarContinuous-v0"),
}
#: The env family of a CleanRL run's config (``environment.family``): Gym/Gymnasium ids.
FAMILY = "gymnasium"
ENV_FAMILY = FAMILY


def env_steps(algorithm: Algorithm, params: dict) -> int:
    """The env steps a script runs to its end with these options (each sub-env's steps counted).

    The off-policy scripts loop ``for global_step in range(total_timesteps)``, stepping their envs once
    each pass; ppo runs ``total_timesteps // (num_envs × num_steps)`` whole rollouts.
    """
    total, num_envs = int(params["total_timesteps"]), int(params.get("num_envs") or 1)
    if algorithm.on_policy and "num_steps" in params:
        rollout = num_envs * int(params["num_steps"])
        return (total // rollout) * rollout
    return total * num_envs


def budget_note(algorithm: Algorithm, params: dict) -> str | None:
    """Why the script runs a different number of env steps than total_timesteps; None when it runs them all."""
    total, steps = int(params["total_timesteps"]), env_steps(algorithm, params)
    if steps == total:
        return None
    if algorithm.on_policy and "num_steps" in params:
        rollout = int(params.get("num_envs") or 1) * int(params["num_steps"])
        return (f"total_timesteps {total} is not a whole number of {algorithm.name} rollouts (num_envs × "
                f"num_steps = {rollout} env steps): the script runs {total // rollout} iterations, "
                f"{steps} env steps")
    return (f"total_timesteps {total} is stepped in each of num_envs = {params.get('num_envs')} envs: "
            f"the script runs {steps} env steps")


def get(name: str, field: str = "algorithm") -> Algorithm:
    try:
        return ALGORITHMS[name]
    except (KeyError, TypeError):
        raise ConfigError(field, one_of(name, list(ALGORITHMS))) from None


def env_ids_for(algorithm: Algorithm) -> tuple[str, ...]:
    return ENV_IDS[algorithm.action_space]


def check_env(algorithm: Algorithm, env_id: str, field: str = "env_id") -> None:
    """An env id the algorithm's script can train on: its action space must be the one the script asserts."""
    allowed = env_ids_for(algorithm)
    if env_id not in allowed:
        other = [a for a in ALGORITHMS.values() if env_id in env_ids_for(a)]
        hint = (f"; {env_id} has a {other[0].action_space} action space: "
                f"use {', '.join(a.name for a in other)}") if other else ""
        raise ConfigError(field, f"{one_of(env_id, list(allowed))} (the {algorithm.action_space}-action "
                                 f"classic-control tasks {algorithm.name} trains on){hint}")


def silence_gym_notice() -> None:
    """gym 0.23.1 prints an "unmaintained" banner on stderr at import (from ``gym_notices``).

    In the worker's own process (validation, dry runs, evaluation) it would bury
    the one line a user needs to read; the banner is dropped here before gym is
    imported. The training script's process is left as it is (its stderr goes
    to ``logs/script.stderr``).
    """
    try:
        import gym_notices.notices as notices
    except ImportError:
        return
    notices.notices.clear()
