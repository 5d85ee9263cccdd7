"""The Ray worker's checkpoint state: MOSAIC's counters plus what evaluation and resume need.

RLlib's own files sit beside it (``Algorithm.save_to_path``); this is what
:class:`mosaic.workerkit.checkpoints.CheckpointState` keeps for the Ray worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mosaic.workerkit.checkpoints import CheckpointState, TrainedAs, env_words


@dataclass
class RayCheckpointState(CheckpointState):
    FORMAT: ClassVar[str] = "mosaic-ray-worker/1"

    algorithm: str = ""
    policy_configuration: str = ""
    #: agent id -> the RLlib module that plays it
    agent_to_module: dict[str, str] = field(default_factory=dict)
    #: fixed (untrained) modules in the pool, never evaluated as the run's policy
    baselines: list[str] = field(default_factory=list)
    #: the run's ``environment`` config section
    environment: dict[str, Any] = field(default_factory=dict)
    #: the run's ``ctde`` config section (central critic settings)
    ctde: dict[str, Any] | None = None
    #: the self-play league (pool, win rates), when the run used SELF_PLAY
    self_play: dict[str, Any] | None = None


def policies_in_words(agent_to_module: dict[str, str]) -> str:
    """The policy layout, e.g. ``player_0 shared, player_1 shared``; "" when none is known."""
    return ", ".join(f"{agent} {module}" for agent, module in sorted(agent_to_module.items()))


def trained_as(state: RayCheckpointState) -> TrainedAs:
    """What a checkpoint trained, for the restore check (mosaic.workerkit.checkpoints.check_restore_matches)."""
    return TrainedAs("ray", state.algorithm, env_words(state.environment or {}),
                     policies_in_words(state.agent_to_module))
