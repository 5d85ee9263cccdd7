"""What a random run's checkpoint holds (mosaic.workerkit.checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mosaic.workerkit.checkpoints import CheckpointState


@dataclass
class RandomCheckpointState(CheckpointState):
    """Counters plus the policy's RNG state: enough to continue a run exactly."""

    FORMAT: ClassVar[str] = "mosaic-random-worker/2"

    policy: dict[str, Any] = field(default_factory=dict)
