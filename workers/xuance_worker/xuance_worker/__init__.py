"""MOSAIC worker for XuanCe: its multi-agent algorithms, called in-process.

XuanCe is imported and driven in the worker's process (its own environment:
XuanCe needs numpy<2): the config becomes XuanCe's arguments over its shipped
yaml defaults (``config.py``), PettingZoo envs come from MOSAIC's env layer
through a XuanCe registry entry (``envs.py``), a XuanCe callback and the agent's
logger feed MOSAIC telemetry (``telemetry.py``), and ``runtime.py`` runs it.

This module imports nothing but MOSAIC: describing the worker must stay cheap
and work from MOSAIC's own environment, where XuanCe is not installed.
"""

from __future__ import annotations

from mosaic.workerkit.contract import Packages, WorkerCapabilities, WorkerMetadata, worker_metadata

__version__ = "0.1.0"

#: What a config may name (traits: algorithms.py; COMA through learner_shims.py).
ALGORITHMS = ("mappo", "ippo", "qmix", "vdn", "iql", "maddpg", "coma")
#: What ``--describe`` and ``run_started`` report the versions of.
PACKAGES = Packages(("mosaic-xuance-worker", "xuance", "torch", "numpy", "pettingzoo", "gymnasium"))


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    return worker_metadata(
        name="XuanCe", version=__version__, upstream="xuance",
        description="XuanCe's multi-agent algorithms (MAPPO, IPPO, QMIX, VDN, IQL, MADDPG, COMA) on PettingZoo "
                    "MPE, SISL, Butterfly and simultaneous classic envs, called in-process in its own "
                    "environment (numpy 1).",
        worker_type="xuance", paradigms=("multi_agent",), policy_configurations=("PARAMETER_SHARING", "INDEPENDENT"),
        env_families=("mpe", "sisl", "butterfly", "classic"), algorithms=ALGORITHMS,
        action_spaces=("discrete", "box"), observation_spaces=("box", "image", "discrete"), max_agents=16,
        supports_checkpointing=True, supports_pause_resume=True, resources={"cpus": 1.0, "memory_mb": 2000})
