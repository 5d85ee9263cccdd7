"""A run's status: one enum for the manifest, ``mosaic run``, the daemon and FastLane.

CREATED (``mosaic run`` made the folder) or QUEUED (the daemon accepted it) →
STARTING → RUNNING ⇄ PAUSED → COMPLETED | FAILED | CANCELLED. A run may also
fail or be cancelled before it runs; nothing leaves a terminal state. The
manifest stores the lower-case spelling (:attr:`RunState.manifest`); the
daemon's API and registry the upper-case one.
"""

from __future__ import annotations

from enum import Enum


class RunState(str, Enum):
    CREATED = "CREATED"
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

    @property
    def manifest(self) -> str:
        """The manifest's ``status`` spelling."""
        return self.value.lower()

    @classmethod
    def from_manifest(cls, status: object) -> "RunState | None":
        """The state a manifest's ``status`` names; None for anything else."""
        try:
            return cls(str(status).upper())
        except ValueError:
            return None

    @classmethod
    def from_terminal_event(cls, event_type: object) -> "RunState | None":
        """The state a terminal telemetry event ends a run in (``run_completed`` …); None otherwise."""
        return TERMINAL_EVENT_STATE.get(str(event_type))


TERMINAL_STATES = frozenset({RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED})
#: Terminal telemetry event → the state it ends a run in.
TERMINAL_EVENT_STATE = {"run_completed": RunState.COMPLETED, "run_failed": RunState.FAILED,
                        "run_cancelled": RunState.CANCELLED}
