"""The coordinator: keeps an experiment's cells submitted to a backend until every cell has ended.

One loop, a second apart: ask the backend how the attempts in flight stand and journal what changed;
stop (cancelling what runs) if a cancel was asked for; submit every cell that has no live attempt and
retries left; report the counts. A cell that completed is never submitted again, by this coordinator or
a later ``resume``; a failed or cancelled attempt is retried while the cell has retries left, its cause
kept in the journal; with the spec's ``retry_from: checkpoint`` the retry continues from the newest checkpoint
the cell's earlier attempts saved (the journal's ``restored_from``), else it starts from scratch. Killing the
coordinator loses nothing: the runs go on in the backend and the next coordinator takes them up from the
journal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from mosaic.experiments.backends import Backend, BackendUnavailable
from mosaic.experiments.store import (EXPERIMENT_CANCELLED, CellState, Experiment, newest_checkpoint,
                                      refresh_attempts, run_id_for)
from mosaic.run_status import ATTEMPT_FAILED, CELL_STATES, JOB_LEFT, JobState

EXIT_DONE, EXIT_SOME_FAILED, EXIT_CANCELLED = 0, 1, 3


@dataclass
class Progress:
    """What the grid looks like now; ``eta_s`` is None until a cell has finished."""

    total: int
    counts: dict[str, int]
    retrying: int = 0
    eta_s: float | None = None
    events: list[str] = field(default_factory=list)  # what happened since the last report, one line each

    @property
    def done(self) -> int:
        return self.counts.get(JobState.COMPLETED, 0)


def cell_states(exp: Experiment, cells: dict[str, CellState], revive_cancelled: bool = False) -> dict[str, str]:
    """Each cell's state; with ``revive_cancelled``, cells an experiment cancel stopped count as pending."""
    out = {}
    for cell_id, cell in cells.items():
        state = cell.state(exp.plan.retries)
        if revive_cancelled and state == JobState.CANCELLED and cell.last and cell.last.by_experiment_cancel:
            state = JobState.PENDING
        out[cell_id] = state
    return out


def estimate_eta(cells: dict[str, CellState], states: dict[str, str]) -> float | None:
    """Seconds left: the mean time a completed cell took, times the cells left, over the cells running at once."""
    took = [a.ended_at - a.submitted_at for c in cells.values() for a in c.attempts
            if a.state == JobState.COMPLETED and a.ended_at]
    if not took:
        return None
    left = sum(s in JOB_LEFT for s in states.values())
    running = max(1, sum(s == JobState.RUNNING for s in states.values()))
    return sum(took) / len(took) * left / running


def run(exp: Experiment, backend: Backend, *, report: Callable[[Progress], None] | None = None,
        poll_s: float = 0.25, unavailable_s: float = 60.0) -> int:
    """Run the experiment's cells to their end; the exit code (0 all completed, 1 some failed, 3 cancelled)."""
    exp.claim()
    exp.log("coordinator_started", backend=backend.describe())
    driver = None
    driver_s = 0.0  # a study's time in its driver (Optuna's calls, reading its journal): bench/study_throughput.py
    if exp.plan.study is not None:
        from mosaic.experiments.study.driver import StudyDriver

        driver = StudyDriver(exp)
    revive = True
    unreachable_since: float | None = None
    carried: list[str] = []  # what happened while the backend could not be reached, reported with the next counts
    try:
        while True:
            cells = exp.cells()
            events: list[str] = carried
            carried = []
            try:
                in_flight = [a.run_id for c in cells.values() for a in c.attempts if not a.ended]
                statuses = backend.status(in_flight) if in_flight else {}
                before = {a.run_id: a.state for c in cells.values() for a in c.attempts}
                refresh_attempts(exp, cells, statuses.get)
                for cell_id, cell in cells.items():
                    for a in cell.attempts:
                        if a.state != before.get(a.run_id) and a.state in ATTEMPT_FAILED:
                            events.append(f"{cell_id}: attempt {a.number} {a.state}: {a.cause or 'no cause given'}")
                if exp.cancel_requested():
                    _cancel_in_flight(exp, backend, cells)
                    return EXIT_CANCELLED
                states = cell_states(exp, cells, revive)
                if driver is not None:  # a study: end, prune and ask for trials; its new cells are journaled
                    started = time.perf_counter()
                    added = driver.step(cells, states, backend)
                    driver_s += time.perf_counter() - started
                    events += added
                    if added or len(exp.plan.cells) != len(cells):  # it added or pruned cells
                        cells = exp.cells()
                        states = cell_states(exp, cells, revive)
                batch: list[tuple[str, str, dict]] = []  # (cell, run id, config): submitted in one call
                for cell in exp.plan.cells:
                    if states[cell.cell_id] != JobState.PENDING:
                        continue
                    state = cells[cell.cell_id]
                    attempt = len(state.attempts) + 1
                    run_id = run_id_for(exp.name, cell.cell_id, attempt)
                    config = {**cell.config, "run_id": run_id}
                    restored = ""
                    if state.attempts:
                        if exp.plan.retry_from == "checkpoint":
                            restored = newest_checkpoint(exp.home, state.attempts)
                        if restored:
                            config["checkpoint"] = {**(config.get("checkpoint") or {}), "restore_from": restored}
                        events.append(f"{cell.cell_id}: retrying (attempt {attempt}, "
                                      f"{state.failures} of {exp.plan.retries} retries used"
                                      + (f", from {restored})" if restored else ")"))
                    # a cell that starts from a checkpoint (continue_from) says so too: the report joins the curves
                    restored = restored or str((config.get("checkpoint") or {}).get("restore_from") or "")
                    exp.log("submitted", cell=cell.cell_id, run_id=run_id, attempt=attempt,
                            **({"restored_from": restored} if restored else {}))
                    batch.append((cell.cell_id, run_id, config))
                    states[cell.cell_id] = JobState.QUEUED
                refusals = backend.submit_many([(run_id, config) for _, run_id, config in batch]) if batch else []
                for (cell_id, run_id, _), exc in zip(batch, refusals):
                    if exc is not None:
                        exp.log("ended", cell=cell_id, run_id=run_id, state=JobState.FAILED,
                                cause=f"refused by the backend: {exc}")
                        events.append(f"{cell_id}: refused by the backend: {exc}")
                unreachable_since = None
            except BackendUnavailable as exc:
                now = time.monotonic()
                unreachable_since = unreachable_since or now
                if now - unreachable_since > unavailable_s:
                    raise BackendUnavailable(f"{exc}; the experiment's state is kept: "
                                             f"`mosaic experiment resume {exp.name}` goes on from here") from None
                if not events or not events[-1].startswith("backend unreachable"):
                    events.append(f"backend unreachable ({exc}); trying again")
                carried = events
                time.sleep(poll_s)
                try:
                    backend.reconnect()
                except BackendUnavailable:
                    pass
                continue
            revive = False
            counts = {s.value: 0 for s in CELL_STATES}
            for s in states.values():
                counts[s] += 1
            retrying = sum(1 for c in cells.values() if c.attempts and states[c.cell_id] in (JobState.PENDING, JobState.QUEUED)
                           and c.failures)
            if report:
                report(Progress(len(states), counts, retrying, estimate_eta(cells, states), events))
            if sum(counts[s] for s in JOB_LEFT) == 0 and (driver is None or driver.done):
                exp.log("coordinator_finished", counts=counts)
                if driver is not None:  # a study has done its work when every test cell completed
                    tests = [c.cell_id for c in exp.plan.cells if c.trial is None]
                    ok = bool(tests) and all(states.get(c) == JobState.COMPLETED for c in tests)
                    return EXIT_DONE if ok else EXIT_SOME_FAILED
                return EXIT_DONE if counts[JobState.COMPLETED] == len(states) else EXIT_SOME_FAILED
            time.sleep(poll_s)
    finally:
        if driver is not None:
            exp.log("study_driver_time", seconds=round(driver_s, 4))
        exp.release()


def _cancel_in_flight(exp: Experiment, backend: Backend, cells: dict[str, CellState]) -> None:
    for cell in cells.values():
        for attempt in cell.attempts:
            if not attempt.ended:  # how it really ended (it may complete first) is journaled when next asked
                backend.cancel(attempt.run_id, EXPERIMENT_CANCELLED)
    exp.log("coordinator_finished", cancelled=True)


def cancel(exp: Experiment, backend: Backend | None) -> int:
    """Ask the experiment to stop. A running coordinator sees the journaled cancel and cancels its runs in
    flight itself; without one, they are cancelled here. Never both: a second cancel of a run tells the daemon
    to stop waiting for the worker's safe point (SIGKILL). Returns how many runs were asked to stop here."""
    exp.log("cancel")
    cells = exp.cells()
    stopped = 0
    if backend is not None and exp.coordinator() is None:
        for cell in cells.values():
            for attempt in cell.attempts:
                if not attempt.ended:
                    backend.cancel(attempt.run_id, EXPERIMENT_CANCELLED)
                    stopped += 1
    return stopped
