"""MOSAIC worker for Tianshou: its single-agent algorithms, called in-process.

Tianshou is imported and driven in the worker's process (its own environment):
the config becomes Tianshou's parameter objects (``algorithms.py``), Gymnasium
envs come from Gymnasium's registry, a Tianshou logger and a wrapped collector
feed MOSAIC telemetry (``telemetry.py``), and ``runtime.py`` runs it.

This module imports nothing but MOSAIC: describing the worker must stay cheap
and work from MOSAIC's own environment, where Tianshou is not installed.
"""

from __future__ import annotations

from mosaic.workerkit.contract import Packages, WorkerCapabilities, WorkerMetadata, worker_metadata

__version__ = "0.1.0"

#: What a config may name (traits: algorithms.py).
ALGORITHMS = ("dqn", "c51", "rainbow", "iqn", "ppo", "a2c", "trpo", "sac", "ddpg", "td3", "redq", "discrete_cql",
              "discrete_bcq", "bcq", "cql", "gail")
#: What ``--describe`` and ``run_started`` report the versions of.
PACKAGES = Packages(("mosaic-tianshou-worker", "tianshou", "torch", "numpy", "gymnasium"))


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    return worker_metadata(
        name="Tianshou", version=__version__, upstream="tianshou",
        description="Tianshou's DQN, C51, Rainbow, IQN, PPO, A2C, TRPO, SAC, DDPG, TD3, REDQ, offline CQL and "
                    "BCQ (discrete and continuous), and GAIL on Gymnasium envs, and DQN in one seat of a "
                    "PettingZoo classic game through Tianshou's multi-agent algorithm, called in-process in its "
                    "own environment.",
        worker_type="tianshou", paradigms=("single_agent", "multi_agent"), policy_configurations=("INDEPENDENT",),
        env_families=("gymnasium", "classic"), algorithms=ALGORITHMS,
        action_spaces=("discrete", "box", "masked_discrete"), observation_spaces=("box", "dict"), max_agents=2,
        supports_checkpointing=True, supports_pause_resume=True, resources={"cpus": 1.0, "memory_mb": 2000})
