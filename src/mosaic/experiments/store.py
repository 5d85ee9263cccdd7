"""An experiment's folder: its spec, its plan, and a journal of what happened to each cell.

``MOSAIC_HOME/experiments/NAME/`` holds ``spec.json`` (the spec as read, base configs inlined),
``plan.json`` (every cell's config as its worker normalised it), ``journal.jsonl`` (append-only: each
attempt's run id when submitted, how it ended and why, cancel and resume requests) and, while a
coordinator runs, ``coordinator.json`` (its pid). The journal is the truth about cells; the runs it
names are ordinary runs in the run store. A cell's run id is ``NAME-CELL-aN``, chosen before it is
submitted, so a coordinator killed between submitting and writing the journal cannot start a cell twice:
the next one finds the run under that id.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator

from mosaic.errors import UserError
from mosaic.experiments.plan import Plan, cell_title
from mosaic.experiments.spec import Cell
from mosaic.pids import is_running, start_ticks
from mosaic.run_status import ATTEMPT_ENDED, ATTEMPT_FAILED, JobState
from mosaic.runs import append_jsonl, mosaic_home, read_jsonl, write_json_atomic
from mosaic.workerkit.run_fields import summarize

#: The journal's event that an attempt's run started running, named by the state it entered (``ended`` brings
#: its end state and cause).
RUNNING_EVENT = JobState.RUNNING.value
#: Why an attempt ended that does not count against the retry limit.
EXPERIMENT_CANCELLED = "experiment cancelled"
#: Why a study's pruner stopped a trial's cells (they end cancelled, and are never retried).
TRIAL_PRUNED = "trial pruned"


@dataclass
class Attempt:
    run_id: str
    number: int
    state: str = JobState.QUEUED  # a JobState's spelling (journals store it): queued, running … missing
    cause: str = ""
    submitted_at: float = 0.0
    ended_at: float | None = None
    restored_from: str = ""  # the checkpoint this attempt continued from ("": it started from scratch)
    pruned: bool = False  # a study's pruner stopped this attempt's trial (journal: ``pruned``)

    @property
    def ended(self) -> bool:
        return self.state in ATTEMPT_ENDED

    @property
    def counts(self) -> bool:
        """Does this attempt use up one of the cell's retries?"""
        return self.state in ATTEMPT_FAILED and not self.by_experiment_cancel and not self.pruned

    @property
    def by_experiment_cancel(self) -> bool:
        return self.state == JobState.CANCELLED and EXPERIMENT_CANCELLED in self.cause


@dataclass
class CellState:
    cell_id: str
    attempts: list[Attempt] = field(default_factory=list)
    pruned: bool = False  # a study's pruner stopped this cell's trial: it is not started, nor run again

    @property
    def last(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None

    @property
    def failures(self) -> int:
        return sum(a.counts for a in self.attempts)

    def state(self, retries: int) -> JobState:
        """``pending``: no attempt yet, or one to retry (retrying is pending after a failure)."""
        last = self.last
        if last is None:
            return JobState.CANCELLED if self.pruned else JobState.PENDING
        if last.state == JobState.COMPLETED:
            return JobState.COMPLETED
        if not last.ended:
            return JobState.RUNNING if last.state == JobState.RUNNING else JobState.QUEUED
        if last.by_experiment_cancel or last.pruned:
            return JobState.CANCELLED
        if self.failures <= retries:
            return JobState.PENDING
        return JobState.CANCELLED if last.state == JobState.CANCELLED else JobState.FAILED

    @property
    def completed_run(self) -> str | None:
        last = self.last
        return last.run_id if last and last.state == JobState.COMPLETED else None


def run_id_for(name: str, cell_id: str, attempt: int) -> str:
    return f"{name}-{cell_id}-a{attempt}"


class ExperimentStore:
    """The experiments below ``MOSAIC_HOME/experiments``."""

    def __init__(self, home: Path | str | None = None) -> None:
        self.home = Path(home) if home is not None else mosaic_home()
        self.root = self.home / "experiments"

    def path(self, name: str) -> Path:
        return self.root / name

    def exists(self, name: str) -> bool:
        return (self.path(name) / "plan.json").is_file()

    def names(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir()  # a hidden folder is one being created
                      if not p.name.startswith(".") and (p / "plan.json").is_file())

    def create(self, plan: Plan, spec_source: dict[str, Any], files: dict[str, Path] | None = None) -> "Experiment":
        """The experiment's folder with its spec and plan (and ``files``: name -> a file copied in, such as a study's
        journal carried from another machine), all or nothing."""
        final = self.path(plan.name)
        if final.exists():
            raise UserError(f"name: an experiment named {plan.name!r} already exists in {self.root}")
        left = self._runs_named_like(plan)
        if left:
            raise UserError(f"name: runs of an earlier experiment named {plan.name!r} are still in the run store "
                            f"({', '.join(left[:3])}{', ...' if len(left) > 3 else ''}): a new one would take them "
                            "for its own cells; allowed: another name (--name), or remove those runs first")
        self.root.mkdir(parents=True, exist_ok=True)
        staging = self.root / f".{plan.name}.{os.getpid()}.{time.monotonic_ns()}"
        staging.mkdir()
        try:
            write_json_atomic(staging / "spec.json", spec_source)
            write_json_atomic(staging / "plan.json", plan.to_dict())
            (staging / "journal.jsonl").touch()
            for name, source in (files or {}).items():
                import shutil

                shutil.copyfile(source, staging / name)
            os.rename(staging, final)
        except BaseException:
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
            raise
        exp = Experiment(final)
        exp.log("created", cells=len(plan.cells))
        return exp

    def _runs_named_like(self, plan: Plan) -> list[str]:
        """Run folders whose ids this plan's cells would use (``NAME-CELL-aN``), left by an earlier experiment."""
        from mosaic.runs import RunStore

        runs = RunStore(self.home).runs_dir
        if not runs.is_dir():
            return []
        cells = {c.cell_id for c in plan.cells}
        prefix = f"{plan.name}-"
        return sorted(p.name for p in runs.iterdir() if p.name.startswith(prefix)
                      and re.fullmatch(r"(c\d+|k\d+t\d+s\d+)-a\d+", p.name[len(prefix):])
                      and (plan.study is not None or p.name[len(prefix):].split("-a")[0] in cells))

    def get(self, name: str) -> "Experiment":
        if not self.exists(name):
            known = ", ".join(self.names()[-5:]) or "none yet"
            raise UserError(f"experiment: no experiment named {name!r} in {self.root} (known: {known})")
        return Experiment(self.path(name))


class Experiment:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = root.name
        self._plan = Plan.from_dict(json.loads((root / "plan.json").read_text(encoding="utf-8")))
        self._added: tuple[int, list[Cell]] = (0, [])  # (journal bytes read, cells journaled as ``cell_added``)

    @property
    def stored_plan(self) -> Plan:
        """The plan as ``plan.json`` holds it (what ``resume --retries`` changes): a study's cells are not in it."""
        return self._plan

    @property
    def plan(self) -> Plan:
        """The plan, with the cells a study added as it went (journal ``cell_added``: its trials' and test cells).

        The journal is append-only, so only the lines written since the last call are read (a torn last
        line is read again once it is whole)."""
        if self._plan.study is None:
            return self._plan
        offset, cells = self._added
        try:
            with open(self.journal_path, "rb") as fh:
                fh.seek(offset)
                tail = fh.read()
        except FileNotFoundError:
            tail = b""
        whole = tail[:tail.rfind(b"\n") + 1]
        if whole:
            added = list(cells)
            for line in whole.splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and event.get("event") == "cell_added":
                    added.append(Cell.from_dict(event["cell"]))
            self._added = (offset + len(whole), added)
        return replace(self._plan, cells=self._plan.cells + self._added[1])

    @property
    def journal_path(self) -> Path:
        return self.root / "journal.jsonl"

    @property
    def home(self) -> Path:
        """The MOSAIC_HOME the experiment lives in (``HOME/experiments/NAME``): its runs are in that run store."""
        return self.root.parent.parent

    @property
    def spec(self) -> dict[str, Any]:
        return json.loads((self.root / "spec.json").read_text(encoding="utf-8"))

    def log(self, event: str, **fields: Any) -> None:
        """Append one journal line (a whole line in one write, flushed to disk)."""
        append_jsonl(self.journal_path, {"ts": time.time(), "event": event, **fields})

    def journal(self) -> Iterator[dict[str, Any]]:
        yield from read_jsonl(self.journal_path)  # a torn last line from a crash is skipped

    def cells(self) -> dict[str, CellState]:
        """Each cell's attempts as the journal tells them (attempts not yet ended are as last known)."""
        states = {c.cell_id: CellState(c.cell_id) for c in self.plan.cells}
        by_run: dict[str, Attempt] = {}
        for event in self.journal():
            kind = event.get("event")
            if kind == "submitted" and event.get("cell") in states:
                attempt = Attempt(str(event["run_id"]), int(event.get("attempt", 1)),
                                  submitted_at=float(event.get("ts", 0)),
                                  restored_from=str(event.get("restored_from") or ""))
                states[event["cell"]].attempts.append(attempt)
                by_run[attempt.run_id] = attempt
            elif kind == "pruned" and event.get("cell") in states:
                states[event["cell"]].pruned = True
                if states[event["cell"]].attempts:
                    states[event["cell"]].attempts[-1].pruned = True
            elif kind in (RUNNING_EVENT, "ended") and event.get("run_id") in by_run:
                attempt = by_run[event["run_id"]]
                attempt.state = str(event.get("state", JobState.RUNNING))
                attempt.cause = str(event.get("cause", ""))
                if kind == "ended":
                    attempt.ended_at = float(event.get("ts", 0))
        return states

    def cancel_requested(self) -> bool:
        """Was a cancel asked for since the last run or resume started?"""
        cancelled = False
        for event in self.journal():
            if event.get("event") == "cancel":
                cancelled = True
            elif event.get("event") == "coordinator_started":
                cancelled = False
        return cancelled

    # -- the one coordinator --------------------------------------------------------------------------
    @property
    def coordinator_path(self) -> Path:
        return self.root / "coordinator.json"

    def coordinator(self) -> dict[str, Any] | None:
        """The coordinator running this experiment now, or None."""
        try:
            data = json.loads(self.coordinator_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if is_running(data.get("pid"), data.get("start_ticks")) else None

    def claim(self) -> None:
        """Become the experiment's coordinator; refused while another one runs."""
        other = self.coordinator()
        if other is not None and other.get("pid") != os.getpid():
            raise UserError(f"experiment: {self.name!r} is being run by pid {other['pid']} already; "
                            f"allowed: wait for it, or `mosaic experiment cancel {self.name}`")
        write_json_atomic(self.coordinator_path, {"pid": os.getpid(), "start_ticks": start_ticks(os.getpid()),
                                                  "started_at": time.time()})

    def release(self) -> None:
        data = self.coordinator()
        if data is None or data.get("pid") == os.getpid():
            try:
                self.coordinator_path.unlink()
            except FileNotFoundError:
                pass


def continue_cells(name: str, cells: list[Cell], home: Path | str | None = None) -> list[Cell]:
    """``cells`` (a spec's, ``continue_from: name``), each set to restore the newest checkpoint of the completed
    cell of experiment ``name`` with the same worker, configuration, env and seed: the same training, run on to
    this spec's budget (random-play cells that measure a random score run afresh). :class:`UserError` naming
    every cell that has no such cell, or no checkpoint of it."""
    store = ExperimentStore(home)
    if not store.exists(name):
        known = ", ".join(store.names()[-5:]) or "none yet"
        raise UserError(f"continue_from: no experiment named {name!r} in {store.root} (known: {known})")
    earlier = store.get(name)
    states = earlier.cells()
    by_key = {(c.worker, c.configuration, c.env, c.seed): c for c in earlier.plan.cells}
    out, problems = [], []
    for cell in cells:
        if cell.baseline:  # random play measures the env's random score afresh: nothing to continue
            out.append(cell)
            continue
        title = cell_title(cell)
        match = by_key.get((cell.worker, cell.configuration, cell.env, cell.seed))
        if match is None:
            problems.append(f"{title}: experiment {name!r} has no cell of worker {cell.worker}, that configuration, "
                            "env and seed")
            continue
        if (cell.config.get("checkpoint") or {}).get("restore_from"):
            problems.append(f"{title}: checkpoint.restore_from is set by continue_from; allowed: one of the two")
            continue
        state = states[match.cell_id]
        if state.last is None or state.last.state != JobState.COMPLETED:
            found = state.last.state if state.last else "not run"
            problems.append(f"{title}: cell {match.cell_id} of {name!r} is {found}; allowed: continuing completed "
                            f"cells (`mosaic experiment resume {name}` first)")
            continue
        now, then = (summarize(c.config, worker=c.worker) for c in (cell, match))
        if now.budget is not None and then.budget is not None and now.budget <= then.budget:
            problems.append(f"{title}: a budget of {now.budget} {now.budget_unit} is not above the {then.budget} "
                            f"that cell {match.cell_id} of {name!r} trained; allowed: a larger budget")
            continue
        path = newest_checkpoint(earlier.home, state.attempts)
        if not path:
            problems.append(f"{title}: cell {match.cell_id} of {name!r} left no checkpoint on disk")
            continue
        config = {**cell.config, "checkpoint": {**(cell.config.get("checkpoint") or {}), "restore_from": path}}
        out.append(replace(cell, config=config))
    if problems:
        raise UserError("continue_from: " + "; ".join(problems))
    return out


def newest_checkpoint(home: Path, attempts: list[Attempt]) -> str:
    """The newest checkpoint a cell's attempts left that is still on disk, newest attempt first (one that saved
    none falls back to the checkpoint it continued from); "" if there is none."""
    from mosaic.runs import RunStore

    store = RunStore(home)
    for attempt in reversed(attempts):
        if store.exists(attempt.run_id):
            entries = store.get(attempt.run_id).read_manifest().get("checkpoints") or []
            for entry in reversed(entries):
                path = entry.get("path") if isinstance(entry, dict) else None
                if path and Path(path).exists():
                    return str(path)
        if attempt.restored_from and Path(attempt.restored_from).exists():
            return attempt.restored_from
    return ""


def refresh_attempts(exp: Experiment, cells: dict[str, CellState],
                     status_of: Callable[[str], tuple[str, str] | None]) -> None:
    """Ask ``status_of(run_id)`` -> ``(state, cause)`` about every attempt not ended in the journal, and
    journal what changed (None: the backend does not know the run)."""
    for cell_id, cell in cells.items():
        for attempt in cell.attempts:
            if attempt.ended:
                continue
            found = status_of(attempt.run_id)
            state, cause = found if found is not None else (JobState.MISSING, "the backend has no such run")
            if state == attempt.state:
                continue
            attempt.state, attempt.cause = state, cause
            if attempt.ended:
                attempt.ended_at = time.time()
                exp.log("ended", cell=cell_id, run_id=attempt.run_id, state=state, cause=cause)
            elif state == JobState.RUNNING:
                exp.log(RUNNING_EVENT, cell=cell_id, run_id=attempt.run_id, state=state)
