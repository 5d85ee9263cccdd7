"""What a XuanCe checkpoint holds beside XuanCe's model file (mosaic.workerkit.checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

from mosaic.workerkit.checkpoints import CheckpointState, TrainedAs, env_words

MODEL_FILE = "xuance_model.pth"


@dataclass
class XuanCeCheckpointState(CheckpointState):
    """MOSAIC's counters next to XuanCe's model file, and what is needed to rebuild the agent."""

    FORMAT: ClassVar[str] = "mosaic-xuance-worker/1"

    algorithm: str = ""
    model_file: str = MODEL_FILE
    environment: dict[str, Any] = field(default_factory=dict)
    agents: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # the MOSAIC config of the run that saved it


def policies_in_words(agents: Sequence[str]) -> str:
    """The agents a model has networks (or a shared one's inputs) for: its layout."""
    return ", ".join(sorted(agents))


def trained_as(state: XuanCeCheckpointState) -> TrainedAs:
    """What a checkpoint trained, for the restore check (mosaic.workerkit.checkpoints.check_restore_matches)."""
    return TrainedAs("xuance", state.algorithm, env_words(state.environment or {}), policies_in_words(state.agents))
