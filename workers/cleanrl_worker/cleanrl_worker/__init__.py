"""MOSAIC worker for CleanRL: its unmodified single-file scripts, run as MOSAIC runs.

The shim never edits or imports-and-drives CleanRL: it translates a MOSAIC
config into the script's command line (``config.py``), starts the script as a
child process (``runtime.py``) with a ``sitecustomize`` on its path that
observes it (``site/``, ``child.py``: TensorBoard calls become telemetry, the
script's networks become checkpoints, rendered frames go to FastLane) and
turns what it observed into MOSAIC events (``telemetry.py``).

This module imports nothing but MOSAIC: describing the worker must stay cheap
and work from MOSAIC's own environment, where CleanRL is not installed.
"""

from __future__ import annotations

from mosaic.workerkit.contract import Packages, WorkerCapabilities, WorkerMetadata, worker_metadata

__version__ = "0.1.0"

#: The scripts this worker runs, by MOSAIC algorithm name (traits: ``algorithms.py``).
ALGORITHMS = ("ppo", "dqn", "c51", "sac", "td3", "ddpg", "dqn_atari", "ppo_atari", "c51_atari",
              "ppo_continuous_action", "ppo_atari_envpool")
#: Env families (``algorithms.ENVS``): classic control, ALE Atari, MuJoCo (made by Gym/Gymnasium ids), and
#: EnvPool's Atari (made by ``envpool.make``).
ENV_FAMILIES = ("gymnasium", "atari", "mujoco", "envpool")
#: What ``--describe`` and ``run_started`` report the versions of (a script's overlay adds its own: runtime.py).
PACKAGES = Packages(("mosaic-cleanrl-worker", "cleanrl", "torch", "gym", "gymnasium", "numpy", "ale-py", "mujoco",
                     "envpool"),
                    optional=("stable-baselines3", "tensorboard", "moviepy", "pygame", "opencv-python-headless",
                              "wandb"))


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    return worker_metadata(
        name="CleanRL", version=__version__, upstream="cleanrl",
        description="CleanRL's single-file PPO, DQN, C51, SAC, TD3 and DDPG scripts, run unmodified "
                    "on Gym/Gymnasium classic-control tasks, dqn_atari, ppo_atari and c51_atari on ALE Atari games and "
                    "ppo_continuous_action and ddpg on MuJoCo tasks, ppo_atari_envpool on EnvPool's Atari games; telemetry, checkpoints and FastLane "
                    "frames observed from outside the script.",
        worker_type="cleanrl", paradigms=("single_agent",), policy_configurations=("INDEPENDENT",),
        env_families=ENV_FAMILIES, algorithms=ALGORITHMS, action_spaces=("discrete", "box"),
        observation_spaces=("box",), max_agents=1, supports_checkpointing=True, supports_pause_resume=True,
        resources={"cpus": 1.0, "memory_mb": 1500})
