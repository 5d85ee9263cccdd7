"""MOSAIC reference worker: random, action-mask-respecting play on any PettingZoo env.

It has no learning in it on purpose: it is the smallest complete example of
the worker contract for third-party authors, and lets MOSAIC's core be
tested without Ray.
"""

from __future__ import annotations

from mosaic.workerkit.contract import Packages, WorkerCapabilities, WorkerMetadata, worker_metadata
from mosaic.workerkit.envs import ENV_FAMILIES

__version__ = "0.1.0"
#: What ``--describe`` and ``run_started`` report the versions of.
PACKAGES = Packages(("mosaic-random-worker", "pettingzoo", "gymnasium", "numpy"), optional=("mpe2",))


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    return worker_metadata(
        name="Random (reference worker)", version=__version__, upstream="pettingzoo",
        description="Uniform random actions that respect action masks; speaks the full telemetry protocol.",
        worker_type="random", paradigms=("multi_agent",), policy_configurations=("RANDOM",),
        env_families=ENV_FAMILIES, algorithms=("random",),
        action_spaces=("discrete", "masked_discrete", "box", "multi_discrete"),
        observation_spaces=("box", "dict", "image"), max_agents=100, supports_checkpointing=True,
        supports_pause_resume=True, resources={"cpus": 1.0, "memory_mb": 300})
