"""The run registry: one SQLite database (WAL) per ``MOSAIC_HOME``.

It records what the daemon knows about each run — state, timestamps, exit
code, failure reason, config digest, worker pid — and every state change in
``transitions``, so a restarted daemon can reconcile and a client can audit.
State changes go through :meth:`Registry.transition`, which enforces the
state machine of :mod:`mosaic.host.daemon.states` and tells listeners (WatchRuns).
Telemetry itself stays in the run folders; the registry is small and hot.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from mosaic.host.daemon.states import RunState, check_transition
from mosaic.errors import UserError
from mosaic.runs import LATEST

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    worker TEXT NOT NULL,
    state TEXT NOT NULL,
    state_reason TEXT NOT NULL DEFAULT '',
    config_digest TEXT NOT NULL DEFAULT '',
    run_dir TEXT NOT NULL,
    python TEXT NOT NULL DEFAULT '',
    cpus REAL NOT NULL DEFAULT 1.0,
    heartbeat_timeout_s REAL NOT NULL DEFAULT 0,
    algorithm TEXT NOT NULL DEFAULT '',
    env_id TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    started_at REAL,
    ended_at REAL,
    updated_at REAL NOT NULL,
    exit_code INTEGER,
    exit_signal TEXT NOT NULL DEFAULT '',
    failure_reason TEXT NOT NULL DEFAULT '',
    pid INTEGER,
    proc_start TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_state ON runs(state);
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    from_state TEXT,
    to_state TEXT NOT NULL,
    at REAL NOT NULL,
    reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS transitions_run ON transitions(run_id);
"""


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    worker: str
    state: RunState
    run_dir: str
    created_at: float
    updated_at: float
    state_reason: str = ""
    config_digest: str = ""
    python: str = ""
    cpus: float = 1.0
    heartbeat_timeout_s: float = 0.0
    algorithm: str = ""
    env_id: str = ""
    started_at: float | None = None
    ended_at: float | None = None
    exit_code: int | None = None
    exit_signal: str = ""
    failure_reason: str = ""
    pid: int | None = None
    proc_start: str = ""

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "RunRecord":
        data = dict(row)
        data["state"] = RunState(data["state"])
        return cls(**data)


#: Called as ``listener(record_after, previous_state_or_None)``; None = a new run.
Listener = Callable[[RunRecord, "RunState | None"], None]

_COLUMNS = tuple(f.name for f in dataclasses.fields(RunRecord))


class Registry:
    """All access to the database; used from the daemon's event-loop thread only."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=5000")
        self._db.executescript(SCHEMA)
        self._listeners: list[Listener] = []

    def close(self) -> None:
        self._db.close()

    # -- listeners --------------------------------------------------------------
    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def _notify(self, record: RunRecord, previous: RunState | None) -> None:
        for listener in list(self._listeners):
            listener(record, previous)

    # -- reads ----------------------------------------------------------------
    def get(self, run_id: str) -> RunRecord | None:
        row = self._db.execute("SELECT * FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return RunRecord.from_row(row) if row else None

    def require(self, run_id: str) -> RunRecord:
        record = self.get(run_id)
        if record is None:
            raise UserError(f"run {run_id!r} is not known to the daemon")
        return record

    def list(self, states: Iterable[RunState] = (), worker: str = "",
             limit: int = 0) -> list[RunRecord]:
        """Matching runs, oldest first; ``limit`` keeps the newest N."""
        sql, args = "SELECT * FROM runs WHERE 1=1", []
        states = list(states)
        if states:
            sql += f" AND state IN ({','.join('?' * len(states))})"
            args += [s.value for s in states]
        if worker:
            sql += " AND worker = ?"
            args.append(worker)
        sql += " ORDER BY created_at DESC, run_id DESC"
        if limit > 0:
            sql += f" LIMIT {int(limit)}"
        rows = self._db.execute(sql, args).fetchall()
        return [RunRecord.from_row(r) for r in reversed(rows)]

    def resolve(self, ref: str) -> RunRecord:
        """A run by id, unique id prefix, or ``latest``; :class:`UserError` otherwise."""
        if ref == LATEST:
            row = self._db.execute("SELECT * FROM runs ORDER BY created_at DESC, run_id DESC LIMIT 1").fetchone()
            if row is None:
                raise UserError("the daemon has no runs yet")
            return RunRecord.from_row(row)
        exact = self.get(ref)
        if exact is not None:
            return exact
        pattern = ref.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._db.execute("SELECT * FROM runs WHERE run_id LIKE ? ESCAPE '\\' ORDER BY run_id LIMIT 6",
                                (pattern,)).fetchall()
        if len(rows) == 1:
            return RunRecord.from_row(rows[0])
        if rows:
            raise UserError(f"run {ref!r} is ambiguous: {', '.join(r['run_id'] for r in rows[:5])}")
        raise UserError(f"run {ref!r} is not known to the daemon")

    def counts(self) -> dict[str, int]:
        rows = self._db.execute("SELECT state, COUNT(*) AS n FROM runs GROUP BY state").fetchall()
        return {row["state"]: row["n"] for row in rows}

    def history(self, run_id: str) -> list[tuple[str | None, str, float, str]]:
        """Every transition of a run: (from, to, at, reason), oldest first."""
        rows = self._db.execute("SELECT from_state, to_state, at, reason FROM transitions "
                                "WHERE run_id = ? ORDER BY id", (run_id,)).fetchall()
        return [(r["from_state"], r["to_state"], r["at"], r["reason"]) for r in rows]

    # -- writes ---------------------------------------------------------------
    def insert(self, record: RunRecord) -> RunRecord:
        values = dataclasses.asdict(record)
        values["state"] = record.state.value
        with self._db:
            self._db.execute("BEGIN")
            self._db.execute(f"INSERT INTO runs ({','.join(_COLUMNS)}) VALUES "
                             f"({','.join('?' * len(_COLUMNS))})", [values[c] for c in _COLUMNS])
            self._db.execute("INSERT INTO transitions (run_id, from_state, to_state, at, reason) "
                             "VALUES (?, NULL, ?, ?, ?)", (record.run_id, record.state.value,
                                                          record.created_at, record.state_reason))
        self._notify(record, None)
        return record

    def update(self, run_id: str, **fields: Any) -> RunRecord:
        """Change non-state fields (pid, exit code, …)."""
        if "state" in fields:
            raise ValueError("use transition() to change a run's state")
        unknown = set(fields) - set(_COLUMNS)
        if unknown:
            raise ValueError(f"unknown registry fields: {sorted(unknown)}")
        fields["updated_at"] = time.time()
        assignments = ", ".join(f"{k} = ?" for k in fields)
        self._db.execute(f"UPDATE runs SET {assignments} WHERE run_id = ?", [*fields.values(), run_id])
        return self.require(run_id)

    def transition(self, run_id: str, new_state: RunState, reason: str = "",
                   **fields: Any) -> RunRecord:
        """Move a run to ``new_state`` (validated), updating ``fields`` in the same transaction."""
        now = time.time()
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            current = self.require(run_id)
            check_transition(run_id, current.state, new_state)
            fields = {**fields, "state": new_state.value, "state_reason": reason, "updated_at": now}
            if new_state.terminal and "ended_at" not in fields:
                fields["ended_at"] = now
            assignments = ", ".join(f"{k} = ?" for k in fields)
            self._db.execute(f"UPDATE runs SET {assignments} WHERE run_id = ?",
                             [*fields.values(), run_id])
            self._db.execute("INSERT INTO transitions (run_id, from_state, to_state, at, reason) "
                             "VALUES (?, ?, ?, ?, ?)", (run_id, current.state.value, new_state.value,
                                                        now, reason))
        record = self.require(run_id)
        self._notify(record, current.state)
        return record
