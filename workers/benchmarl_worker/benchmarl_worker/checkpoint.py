"""What a BenchMARL checkpoint holds beside BenchMARL's own experiment state (mosaic.workerkit.checkpoints)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Mapping, Sequence

from mosaic.workerkit.checkpoints import CheckpointState, TrainedAs, env_words


def state_file_name(frames: int) -> str:
    """BenchMARL's own name for its experiment state at ``frames`` (``Experiment._save_experiment``)."""
    return f"checkpoint_{frames}.pt"


@dataclass
class BenchMARLCheckpointState(CheckpointState):
    """MOSAIC's counters next to BenchMARL's ``Experiment.state_dict()`` file, and what rebuilds the experiment."""

    FORMAT: ClassVar[str] = "mosaic-benchmarl-worker/1"

    algorithm: str = ""
    state_file: str = ""
    environment: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)  # BenchMARL's group map: group -> agents
    frames_per_batch: int = 0
    config: dict[str, Any] = field(default_factory=dict)  # the MOSAIC config of the run that saved it


def agents_of(groups: Mapping[str, Sequence[str]]) -> list[str]:
    return [agent for members in groups.values() for agent in members]


def policies_in_words(agents: Sequence[str]) -> str:
    """The agents a checkpoint has networks for: its layout."""
    return ", ".join(sorted(agents))


def trained_as(state: BenchMARLCheckpointState) -> TrainedAs:
    """What a checkpoint trained, for the restore check (mosaic.workerkit.checkpoints.check_restore_matches)."""
    return TrainedAs("benchmarl", state.algorithm, env_words(state.environment or {}),
                     policies_in_words(agents_of(state.groups)))
