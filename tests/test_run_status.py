"""One run-status enum: manifest spellings, terminal events, and the daemon's transitions."""

from __future__ import annotations

from mosaic.host.daemon.states import TRANSITIONS
from mosaic.run_status import TERMINAL_STATES, RunState


def test_manifest_spellings_round_trip_and_stay_lower_case():
    for state in RunState:
        assert state.manifest == state.value.lower()
        assert RunState.from_manifest(state.manifest) is state
    assert RunState.from_manifest("exploded") is None and RunState.from_manifest(None) is None


def test_terminal_events_and_states():
    assert RunState.from_terminal_event("run_completed") is RunState.COMPLETED
    assert RunState.from_terminal_event("run_failed") is RunState.FAILED
    assert RunState.from_terminal_event("run_cancelled") is RunState.CANCELLED
    assert RunState.from_terminal_event("metrics") is None
    assert {s for s in RunState if s.terminal} == set(TERMINAL_STATES)
    assert {s for s in RunState if s.active} == {RunState.STARTING, RunState.RUNNING, RunState.PAUSED}
    for state in RunState:  # every state has its transitions; nothing leaves a terminal one
        assert state in TRANSITIONS and (not TRANSITIONS[state]) == state.terminal
