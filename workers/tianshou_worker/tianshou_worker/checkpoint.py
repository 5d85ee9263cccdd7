"""What a Tianshou checkpoint holds beside the algorithm's weights (mosaic.workerkit.checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mosaic.workerkit.checkpoints import CheckpointState, TrainedAs

WEIGHTS_FILE = "tianshou_algorithm.pt"


@dataclass
class TianshouCheckpointState(CheckpointState):
    """MOSAIC's counters next to the algorithm's weights, and what is needed to rebuild it."""

    FORMAT: ClassVar[str] = "mosaic-tianshou-worker/1"

    algorithm: str = ""
    env_id: str = ""
    weights_file: str = WEIGHTS_FILE
    config: dict[str, Any] = field(default_factory=dict)  # the MOSAIC config of the run that saved it


def policies_in_words(hidden_sizes: Any) -> str:
    """The learner's network, the layout its weights have ("" when a checkpoint did not record it)."""
    return f"hidden_sizes {list(hidden_sizes)}" if hidden_sizes else ""


def trained_as(state: TianshouCheckpointState) -> TrainedAs:
    """What a checkpoint trained, for the restore check (mosaic.workerkit.checkpoints.check_restore_matches)."""
    return TrainedAs("tianshou", state.algorithm, state.env_id, policies_in_words(state.config.get("hidden_sizes")))
