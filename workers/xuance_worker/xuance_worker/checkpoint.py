"""What a XuanCe checkpoint holds beside XuanCe's model file (mosaic.workerkit.checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mosaic.workerkit.checkpoints import CheckpointState

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
