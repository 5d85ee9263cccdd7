"""Which transitions between run states the daemon allows (the states: :mod:`mosaic.run_status`).

QUEUED → STARTING → RUNNING ⇄ PAUSED → COMPLETED | FAILED | CANCELLED. A run
may also fail or be cancelled before it runs (a worker that dies during start,
a queued run cancelled); nothing leaves a terminal state.
"""

from __future__ import annotations

from mosaic.run_status import TERMINAL_EVENT_STATE, TERMINAL_STATES, RunState

__all__ = ["MANIFEST_STATUS", "TERMINAL_EVENT_STATE", "TERMINAL_STATES", "TRANSITIONS", "InvalidTransition",
           "RunState", "check_transition"]

TRANSITIONS: dict[RunState, frozenset[RunState]] = {
    RunState.CREATED: frozenset({RunState.STARTING, RunState.FAILED, RunState.CANCELLED}),
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
MANIFEST_STATUS = {state: state.manifest for state in RunState}


class InvalidTransition(Exception):
    """A state change the state machine does not allow (a daemon bug or a race lost)."""

    def __init__(self, run_id: str, current: RunState, wanted: RunState) -> None:
        self.current, self.wanted = current, wanted
        super().__init__(f"run {run_id}: cannot go from {current.value} to {wanted.value}")


def check_transition(run_id: str, current: RunState, wanted: RunState) -> None:
    if wanted not in TRANSITIONS[current]:
        raise InvalidTransition(run_id, current, wanted)
