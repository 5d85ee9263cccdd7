"""MOSAIC worker for BenchMARL: its multi-agent algorithms on its VMAS and PettingZoo tasks, called in-process.

BenchMARL is imported and driven in the worker's process (its own environment: BenchMARL 1.5.2 needs TorchRL
0.11): the config becomes BenchMARL's own config dataclasses over the yaml defaults it ships (``config.py``,
``options.py``), a BenchMARL ``Callback`` feeds MOSAIC telemetry (``telemetry.py``), and ``runtime.py`` builds
BenchMARL's ``Experiment`` and runs it.

This module imports nothing but MOSAIC: describing the worker must stay cheap and work from MOSAIC's own
environment, where BenchMARL is not installed.
"""

from __future__ import annotations

from mosaic.workerkit.contract import Packages, WorkerCapabilities, WorkerMetadata, worker_metadata

__version__ = "0.1.0"

#: What a config may name: every algorithm BenchMARL 1.5.2 ships, by its own names (options.ALGORITHMS).
ALGORITHMS = ("mappo", "ippo", "maddpg", "iddpg", "masac", "isac", "qmix", "vdn", "iql")
#: Task families a run may train on (config.FAMILIES; smacv2, meltingpot and magent are refused with a reason).
FAMILIES = ("vmas", "pettingzoo")
#: What ``--describe`` and ``run_started`` report the versions of.
PACKAGES = Packages(("mosaic-benchmarl-worker", "benchmarl", "torchrl", "tensordict", "torch", "vmas",
                     "pettingzoo", "numpy"))


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    return worker_metadata(
        name="BenchMARL", version=__version__, upstream="benchmarl",
        description="BenchMARL's multi-agent algorithms (MAPPO, IPPO, MADDPG, IDDPG, MASAC, ISAC, QMIX, VDN, IQL) "
                    "on its VMAS and PettingZoo tasks, its Experiment built from its own config dataclasses "
                    "and run in-process in its own environment (TorchRL 0.11).",
        worker_type="benchmarl", paradigms=("multi_agent",),
        policy_configurations=("PARAMETER_SHARING", "INDEPENDENT", "SHARED_VALUE_FUNCTION", "VALUE_DECOMPOSITION"),
        env_families=FAMILIES, algorithms=ALGORITHMS, action_spaces=("discrete", "box"),
        observation_spaces=("box",), max_agents=64, supports_checkpointing=True, supports_pause_resume=True,
        resources={"cpus": 1.0, "memory_mb": 2000})
