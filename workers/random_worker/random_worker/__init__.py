"""MOSAIC reference worker: random, action-mask-respecting play on any PettingZoo env.

It has no learning in it on purpose: it is the smallest complete example of
the worker contract for third-party authors, and lets MOSAIC's core be
tested without Ray.
"""

from __future__ import annotations

from importlib import metadata

from mosaic.workerkit.envs import ENV_FAMILIES
from mosaic.workerkit.contract import ResourceEstimate, WorkerCapabilities, WorkerMetadata

__version__ = "0.1.0"


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    try:
        pz_version = metadata.version("pettingzoo")
    except metadata.PackageNotFoundError:
        pz_version = "not installed"
    meta = WorkerMetadata(
        name="Random (reference worker)",
        version=__version__,
        description="Uniform random actions that respect action masks; speaks the full telemetry protocol.",
        upstream_library="pettingzoo",
        upstream_version=pz_version,
        license="MIT",
        homepage="",
    )
    caps = WorkerCapabilities(
        worker_type="random",
        paradigms=("multi_agent",),
        policy_configurations=("RANDOM",),
        env_families=ENV_FAMILIES,
        algorithms=("random",),
        action_spaces=("discrete", "masked_discrete", "box", "multi_discrete"),
        observation_spaces=("box", "dict", "image"),
        max_agents=100,
        supports_checkpointing=True,
        supports_pause_resume=True,
        resources=ResourceEstimate(cpus=1.0, memory_mb=300),
    )
    return meta, caps
