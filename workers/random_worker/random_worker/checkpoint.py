"""What a random run's checkpoint holds (mosaic.workerkit.checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mosaic.workerkit.checkpoints import CheckpointState, TrainedAs


@dataclass
class RandomCheckpointState(CheckpointState):
    """Counters plus the policy's RNG state: enough to continue a run exactly."""

    FORMAT: ClassVar[str] = "mosaic-random-worker/2"

    policy: dict[str, Any] = field(default_factory=dict)
    #: ``family/env_id`` of the env played ("" in checkpoints saved before it was recorded)
    env: str = ""


def trained_as(state: RandomCheckpointState) -> TrainedAs:
    """What a checkpoint played, for the restore check: its env and the agents its sampling state is of."""
    return TrainedAs("random", "random", state.env, ", ".join(sorted(state.policy.get("spaces") or {})))
