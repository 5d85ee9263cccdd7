"""Run states of the daemon and which transitions between them are legal.

QUEUED → STARTING → RUNNING ⇄ PAUSED → COMPLETED | FAILED | CANCELLED. A run
may also fail or be cancelled before it runs (a worker that dies during start,
a queued run cancelled); nothing leaves a terminal state.
"""

from __future__ import annotations

from enum import Enum


class RunState(str, Enum):
    QUEUED = "QUEUED"
    STARTING = "STARTING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL_STATES

    @property
    def active(self) -> bool:
        """A worker process exists (or is being started) for the run."""
        return self in (RunState.STARTING, RunState.RUNNING, RunState.PAUSED)


TERMINAL_STATES = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED})

TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.QUEUED: frozenset({RunState.STARTING, RunState.FAILED, RunState.CANCELLED}),
    RunState.STARTING: frozenset({RunState.RUNNING, RunState.FAILED, RunState.CANCELLED}),
    RunState.RUNNING: frozenset({RunState.PAUSED, RunState.COMPLETED, RunState.FAILED,
                                 RunState.CANCELLED}),
    RunState.PAUSED: frozenset({RunState.RUNNING, RunState.COMPLETED, RunState.FAILED,
                                RunState.CANCELLED}),
    RunState.COMPLETED: frozenset(),
    RunState.FAILED: frozenset(),
    RunState.CANCELLED: frozenset(),
}

#: The manifest's (lower-case) status for each state.
MANIFEST_STATUS = {state: state.value.lower() for state in RunState}
#: Terminal telemetry event → the state it ends a run in.
TERMINAL_EVENT_STATE = {"run_completed": RunState.COMPLETED, "run_failed": RunState.FAILED,
                        "run_cancelled": RunState.CANCELLED}


class InvalidTransition(Exception):
    """A state change the state machine does not allow (a daemon bug or a race lost)."""

    def __init__(self, run_id: str, current: RunState, wanted: RunState) -> None:
        self.current, self.wanted = current, wanted
        super().__init__(f"run {run_id}: cannot go from {current.value} to {wanted.value}")


def check_transition(run_id: str, current: RunState, wanted: RunState) -> None:
    if wanted not in TRANSITIONS[current]:
        raise InvalidTransition(run_id, current, wanted)
