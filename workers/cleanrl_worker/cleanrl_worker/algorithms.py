"""Each CleanRL script this worker runs, and its traits, in one place.

A trait is a fact about the *upstream script*, read from its source: which
module runs it, which env API it imports (CleanRL 1.2.0 is half-way from gym to
gymnasium), which action space it accepts, and which of its ``__main__``
globals is the policy a checkpoint is played with. Nothing here imports
CleanRL, so it is safe in MOSAIC's own environment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
    #: The env families (``ENVS``) whose tasks the script trains on.
    families: tuple[str, ...] = ("gymnasium",)
    #: The script asserts ``num_envs == 1`` (dqn.py, dqn_atari.py).
    single_env: bool = False
    #: The script's ``make_env`` parameters, in order (ppo_continuous_action.py has no seed and takes gamma).
    make_env_args: tuple[str, ...] = ("env_id", "seed", "idx", "capture_video", "run_name")
    #: The environment's overlay (``[tool.mosaic.environment].overlays`` in the worker's pyproject) the script
    #: runs with, first on its path: a package version the environment's other scripts cannot share.
    overlay: str = ""

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
    Algorithm("dqn", "cleanrl.dqn", "gymnasium", "discrete", False, "q_network", "QNetwork", "CartPole-v1", _Q,
              single_env=True),
    Algorithm("c51", "cleanrl.c51", "gym", "discrete", False, "q_network", "QNetwork", "CartPole-v1", _Q),
    Algorithm("sac", "cleanrl.sac_continuous_action", "gym", "box", False, "actor", "Actor", "Pendulum-v1",
              _CONTINUOUS),
    Algorithm("td3", "cleanrl.td3_continuous_action", "gym", "box", False, "actor", "Actor", "Pendulum-v1",
              _CONTINUOUS),
    Algorithm("ddpg", "cleanrl.ddpg_continuous_action", "gymnasium", "box", False, "actor", "Actor",
              "Pendulum-v1", _CONTINUOUS, families=("gymnasium", "mujoco")),
    # The Atari scripts: dqn_atari.py imports gymnasium and SB3 2.x's Atari wrappers (gymnasium's API), so it
    # runs as it is. ppo_atari.py and c51_atari.py import gym 0.23.1 and wrap its envs with SB3 1.2.0's Atari
    # wrappers (gym's old API): they run with the sb3-gym overlay (SB3 1.2.0) first on their path, on ALE's
    # games registered with gym by the import hook (gym_atari).
    Algorithm("dqn_atari", "cleanrl.dqn_atari", "gymnasium", "discrete", False, "q_network", "QNetwork",
              "BreakoutNoFrameskip-v4", _Q, families=("atari",), single_env=True),
    Algorithm("ppo_atari", "cleanrl.ppo_atari", "gym", "discrete", True, "agent", "Agent",
              "BreakoutNoFrameskip-v4", _ACTOR_CRITIC, families=("atari",), overlay="sb3-gym"),
    Algorithm("c51_atari", "cleanrl.c51_atari", "gym", "discrete", False, "q_network", "QNetwork",
              "BreakoutNoFrameskip-v4", _Q, families=("atari",), overlay="sb3-gym"),
    Algorithm("ppo_continuous_action", "cleanrl.ppo_continuous_action", "gymnasium", "box", True, "agent", "Agent",
              "HalfCheetah-v4", _ACTOR_CRITIC, families=("gymnasium", "mujoco"),
              make_env_args=("env_id", "idx", "capture_video", "run_name", "gamma")),
    # ppo_atari.py's PPO and Nature-CNN agent with EnvPool doing the Atari preprocessing (frame skip 4, 84x84
    # grey, a stack of 4, no-op and FIRE resets, a lost life ending an episode, clipped rewards): it imports gym
    # 0.23.1 only for its spaces and its own RecordEpisodeStatistics, and envpool 0.8.4 makes gym-API envs.
    Algorithm("ppo_atari_envpool", "cleanrl.ppo_atari_envpool", "gym", "discrete", True, "agent", "Agent",
              "Pong-v5", _ACTOR_CRITIC, families=("envpool",), make_env_args=()),
)}

#: The tasks of each env family, by action space: Gymnasium ids (gym 0.23.1 has the classic-control ones
#: too). ``atari``: ALE's ``NoFrameskip-v4`` ids (the Atari wrappers skip frames themselves), from
#: ale-py's wheel, ROMs included: registered with gymnasium for dqn_atari, with gym 0.23.1 for ppo_atari and
#: c51_atari (``gym_atari.GAMES``, the same ids). ``envpool``: EnvPool 0.8.4's Atari ids (``<Game>-v5``, made by ``envpool.make``,
#: ROMs in its wheel; its own preprocessing). ``mujoco``: Gymnasium 0.29.1's MuJoCo v4 tasks (the ``mujoco`` bindings;
#: gym 0.23.1 has only the mujoco-py v2/v3 ones, so the gym scripts sac and td3 do not train on them).
ENVS: dict[str, dict[str, tuple[str, ...]]] = {
    "gymnasium": {"discrete": ("CartPole-v1", "Acrobot-v1", "MountainCar-v0"),
                  "box": ("Pendulum-v1", "MountainCarContinuous-v0")},
    "atari": {"discrete": ("BreakoutNoFrameskip-v4", "PongNoFrameskip-v4", "BeamRiderNoFrameskip-v4",
                           "QbertNoFrameskip-v4", "SeaquestNoFrameskip-v4", "SpaceInvadersNoFrameskip-v4")},
    "mujoco": {"box": ("HalfCheetah-v4", "Hopper-v4", "Walker2d-v4", "Ant-v4", "Humanoid-v4",
                       "HumanoidStandup-v4", "Swimmer-v4", "InvertedPendulum-v4", "InvertedDoublePendulum-v4",
                       "Reacher-v4", "Pusher-v4")},
    "envpool": {"discrete": ("Pong-v5", "Breakout-v5", "BeamRider-v5", "Qbert-v5", "Seaquest-v5",
                             "SpaceInvaders-v5")},
}
#: What each family needs installed (a module), to be listed as offered.
FAMILY_MODULES = {"gymnasium": "gymnasium", "atari": "ale_py", "mujoco": "mujoco", "envpool": "envpool"}
#: The classic-control tasks, by the action space they have (the same ids in gym 0.23.1 and gymnasium 0.29.1).
ENV_IDS = ENVS["gymnasium"]
#: The family a config without one gets (``environment.family``).
FAMILY = "gymnasium"
ENV_FAMILY = FAMILY
FAMILIES = tuple(ENVS)
#: How messages name each family's tasks.
TASK_KINDS = {"gymnasium": "classic-control", "atari": "Atari", "mujoco": "MuJoCo", "envpool": "EnvPool Atari"}


def family_of(env_id: str) -> str | None:
    """The env family listing ``env_id`` (None: none does)."""
    return next((family for family, by_space in ENVS.items() for ids in by_space.values() if env_id in ids), None)


def register_atari() -> None:
    """Register ALE's ids with gymnasium 0.29.1, as ``import ale_py`` does under gymnasium >= 1.1.

    ale-py 0.12 registers its envs from its ``__init__`` only when its vector env imports, which needs
    gymnasium 1.x (``AutoresetMode``); under 0.29.1 that import fails, quietly, and nothing is registered.
    Its single-env ``AtariEnv`` works with 0.29.1's API, so the same registration functions are called here
    (in the script's process from the import hook on ``gymnasium``; in the worker's own process before an
    env is made). Ids already registered are left as they are.
    """
    import gymnasium

    if "PongNoFrameskip-v4" in gymnasium.registry:
        return
    from ale_py import registration

    registration.register_v0_v4_envs()
    registration.register_v5_envs()


#: Where an environment keeps its overlays (``mosaic.host.environments.layout.OVERLAYS_DIR``).
OVERLAYS_DIR = "overlays"


def overlay_path(algorithm: Algorithm, prefix: str | None = None) -> str | None:
    """The folder of ``algorithm``'s overlay in the environment at ``prefix`` (this interpreter's), to put
    first on the script's path; None when the script needs none. :class:`UserError` when it is missing."""
    if not algorithm.overlay:
        return None
    import os
    import sys

    from mosaic.errors import UserError

    path = os.path.join(prefix or sys.prefix, OVERLAYS_DIR, algorithm.overlay)
    if not os.path.isdir(path):
        raise UserError(f"algorithm: {algorithm.name} runs with the environment's {algorithm.overlay!r} overlay, "
                        f"which {path} does not hold: rebuild it with `mosaic envs build cleanrl --force`")
    return path


def make_envpool(env_id: str, num_envs: int = 1, **kwargs: Any) -> Any:
    """An EnvPool env of ``env_id`` with the gym API (old 4-tuple step) ppo_atari_envpool.py asks for."""
    import envpool

    return envpool.make(env_id, env_type="gym", num_envs=num_envs, **kwargs)


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
    """The env ids the script trains on: those of its families with its action space."""
    return tuple(e for f in algorithm.families for e in ENVS[f].get(algorithm.action_space, ()))


def check_env(algorithm: Algorithm, env_id: str, field: str = "env_id") -> None:
    """An env id the algorithm's script can train on: a task of its families with the action space it asserts."""
    allowed = env_ids_for(algorithm)
    if env_id not in allowed:
        other = [a for a in ALGORITHMS.values() if env_id in env_ids_for(a)]
        kind = TASK_KINDS[family_of(env_id) or FAMILY]
        hint = (f"; {env_id} is {'an' if kind[0] in 'AEIOU' else 'a'} {kind} task with a "
                f"{other[0].action_space} action space: use {', '.join(a.name for a in other)}") if other else ""
        kinds = " and ".join(TASK_KINDS[f] for f in algorithm.families)
        raise ConfigError(field, f"{env_id!r} is not a task {algorithm.name} trains on (it trains on the "
                                 f"{algorithm.action_space}-action {kinds} tasks){hint}; allowed: "
                                 f"{', '.join(allowed)}")


def prepare_family(family: str) -> None:
    """In the worker's own process, before a task of ``family`` is made: ALE's ids registered (with gymnasium,
    and with gym 0.23.1 once gym is imported: ``gym_atari``), its banner off,
    MuJoCo's renderer headless (EGL, unless ``MUJOCO_GL`` says otherwise)."""
    if family == "atari":
        register_atari()
        import sys

        if "gym" in sys.modules:  # ppo_atari and c51_atari make their games with gym 0.23.1
            from cleanrl_worker import gym_atari

            gym_atari.register()
        import ale_py

        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
    elif family == "mujoco":
        import os

        os.environ.setdefault("MUJOCO_GL", "egl")


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
