"""A run's status: one enum for the manifest, ``mosaic run``, the daemon and FastLane; and the state of
an experiment cell or arena shard (:class:`JobState`), mapped from its run's in one place (:data:`RUN_TO_JOB`).

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


class JobState(str, Enum):
    """An experiment cell's, an attempt's or an arena shard's state, spelled as journals store it.

    pending (a cell with no live attempt and retries left) → queued → running → completed | failed |
    cancelled; ``missing``: an attempt its backend no longer knows. The value is what journals and JSON
    hold, so ``JobState.FAILED == "failed"`` and an old journal's strings compare equal to the members.
    """

    PENDING = "pending"
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    MISSING = "missing"

    # the value, as a str, in f-strings and str(): journals and messages keep their spelling on every Python
    __str__ = str.__str__
    __format__ = str.__format__

    @property
    def ended(self) -> bool:
        """An attempt in this state is over (``missing`` included)."""
        return self in ATTEMPT_ENDED

    @classmethod
    def from_run(cls, state: "RunState | str | None") -> "JobState":
        """The state of a cell or shard whose run is in ``state`` (a :class:`RunState`, its manifest or API
        spelling): STARTING counts as queued (no step yet) and PAUSED as running (it holds its resources);
        anything unknown as queued."""
        if not isinstance(state, RunState):
            state = RunState.from_manifest(state)
        return RUN_TO_JOB.get(state, cls.QUEUED) if state is not None else cls.QUEUED


#: The run's state → the state of the cell or shard it is an attempt of (the one mapping between the two).
RUN_TO_JOB = {RunState.CREATED: JobState.QUEUED, RunState.QUEUED: JobState.QUEUED,
              RunState.STARTING: JobState.QUEUED, RunState.RUNNING: JobState.RUNNING,
              RunState.PAUSED: JobState.RUNNING, RunState.COMPLETED: JobState.COMPLETED,
              RunState.FAILED: JobState.FAILED, RunState.CANCELLED: JobState.CANCELLED}
#: How a cell or shard can end (its run ended in the matching :data:`TERMINAL_STATES`).
JOB_ENDED = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED)
#: How an attempt can end: as a run does, or lost (its backend no longer knows it).
ATTEMPT_ENDED = JOB_ENDED + (JobState.MISSING,)
#: An attempt's end that uses up one of its cell's retries (unless an experiment cancel or a pruner caused it).
ATTEMPT_FAILED = (JobState.FAILED, JobState.CANCELLED, JobState.MISSING)
#: A cell with one of these states is not done yet.
JOB_LEFT = (JobState.PENDING, JobState.QUEUED, JobState.RUNNING)
#: A cell's states, in the order progress reports count them.
CELL_STATES = (JobState.PENDING, JobState.QUEUED, JobState.RUNNING, JobState.COMPLETED, JobState.FAILED,
               JobState.CANCELLED)
