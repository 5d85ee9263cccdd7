"""MOSAIC: train, watch and evaluate multi-agent RL agents from several libraries.

The core package is dependency-free; RL libraries live in worker packages
discovered through the ``mosaic.workers`` entry-point group.
"""

from mosaic.workerkit.contract import (
    ResourceEstimate,
    WorkerCapabilities,
    WorkerConfig,
    WorkerMetadata,
    WorkerRuntime,
)

__version__ = "0.1.0"

__all__ = [
    "ResourceEstimate",
    "WorkerCapabilities",
    "WorkerConfig",
    "WorkerMetadata",
    "WorkerRuntime",
    "__version__",
]
