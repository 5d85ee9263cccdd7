"""What a Jumanji checkpoint holds beside its pickled ``TrainingState`` (mosaic.workerkit.checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mosaic.workerkit.checkpoints import CheckpointState, TrainedAs

STATE_FILE = "training_state.pkl"


@dataclass
class JumanjiCheckpointState(CheckpointState):
    """MOSAIC's counters next to Jumanji's pickled ``TrainingState``."""

    FORMAT: ClassVar[str] = "mosaic-jumanji-worker/1"

    algorithm: str = ""
    environment: str = ""
    state_file: str = STATE_FILE
    config: dict[str, Any] = field(default_factory=dict)  # the MOSAIC config of the run that saved it


def trained_as(state: JumanjiCheckpointState) -> TrainedAs:
    """What a checkpoint trained, for the restore check (mosaic.workerkit.checkpoints.check_restore_matches): one
    agent, so no policy layout; its network and env batch are checked against the config's fields (runtime.py)."""
    return TrainedAs("jumanji", state.algorithm, state.environment)
