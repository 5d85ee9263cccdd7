"""The runs table: every run the daemon knows, live, with pause, resume, cancel, open and fork.

Rows come from the daemon (``WatchRuns`` for state changes, ``ListRuns`` for
the newest metrics every couple of seconds), so runs started from the CLI
appear as well. Progress is the newest ``metrics`` event's ``timesteps_total``
against the run's budget (from the event, or the run's config).
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QProgressBar, QPushButton,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb
from mosaic.run_status import RunState
from mosaic.runs import RunDir
from mosaic.workerkit.episode_stats import return_label

COLUMNS = ("run", "state", "worker", "algorithm", "env", "progress", "env steps/s", "last return", "ETA")
FIT_COLUMNS_EVERY_S = 1.0
ACTIVE = {s.value for s in RunState if not s.terminal and s is not RunState.CREATED}  # the cancel button's


def state_name(value: int) -> str:
    return pb.RunState.Name(value)


def budget_of(run_dir: str) -> int | None:
    """The run's total env-step budget, from its config (``total_timesteps`` anywhere in it)."""
    try:
        config = RunDir(Path(run_dir)).read_config()
    except (OSError, ValueError):
        return None
    stack = [config]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            value = node.get("total_timesteps")
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
            stack.extend(v for v in node.values() if isinstance(v, dict))
    return None


def progress_of(info: pb.RunInfo, budget: int | None) -> dict[str, Any]:
    """done (env steps), total, fraction, steps/s, last return and ETA (s) of a run, from its newest metrics."""
    try:
        metrics = json.loads(info.last_metrics_json) if info.last_metrics_json else {}
    except ValueError:
        metrics = {}
    done = metrics.get("timesteps_total")
    total = metrics.get("total_timesteps") or budget
    rate = metrics.get("env_steps_per_s")
    out: dict[str, Any] = {"done": done, "total": total, "fraction": None, "rate": rate,
                           "return": metrics.get("episode_return_mean"), "eta_s": None,
                           "return_label": return_label(metrics, 2)}  # a zero-sum game: each agent's, not the sum
    if isinstance(done, (int, float)) and isinstance(total, (int, float)) and total > 0:
        out["fraction"] = min(1.0, done / total)
        if isinstance(rate, (int, float)) and rate > 0 and state_name(info.state) == RunState.RUNNING:
            out["eta_s"] = max(0.0, (total - done) / rate)
    if state_name(info.state) == RunState.COMPLETED:
        out["fraction"] = 1.0
    return out


def format_eta(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return ""
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}" if seconds >= 3600 \
        else f"{seconds // 60}:{seconds % 60:02d}"


class RunsView(QWidget):
    """The table and its buttons; the main window feeds it :class:`pb.RunInfo` and acts on its signals."""

    control = Signal(str, str)   # verb (pause, resume, cancel), run id
    open_run = Signal(str)       # run id
    fork_run = Signal(str)       # run id

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.runs: dict[str, pb.RunInfo] = {}
        self._budgets: dict[str, int | None] = {}
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        # columns fit their contents at most once a second while shown, not on every update:
        # ResizeToContents measures every cell's text each time a cell changes
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self._fitted_at = 0.0
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.itemSelectionChanged.connect(self._update_buttons)
        self.table.cellDoubleClicked.connect(lambda row, _col: self._emit(self.open_run))
        self.buttons: dict[str, QPushButton] = {}
        row = QHBoxLayout()
        for verb in ("pause", "resume", "cancel", "open", "fork"):
            button = QPushButton(verb.capitalize())
            button.setEnabled(False)
            self.buttons[verb] = button
            row.addWidget(button)
        row.addStretch(1)
        self.status = QLabel()
        row.addWidget(self.status)
        for verb in ("pause", "resume", "cancel"):
            self.buttons[verb].clicked.connect(lambda _=False, v=verb: self._control(v))
        self.buttons["open"].clicked.connect(lambda: self._emit(self.open_run))
        self.buttons["fork"].clicked.connect(lambda: self._emit(self.fork_run))
        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addLayout(row)

    # -- data ---------------------------------------------------------------------------
    def update_run(self, info: pb.RunInfo) -> None:
        self.runs[info.run_id] = info
        row = self.row_of(info.run_id)
        if row is None:
            row = 0
            self.table.insertRow(0)  # newest first
            for col in range(len(COLUMNS)):
                if COLUMNS[col] != "progress":
                    self.table.setItem(row, col, QTableWidgetItem())
            bar = QProgressBar()
            bar.setRange(0, 1000)
            bar.setTextVisible(True)
            self.table.setCellWidget(row, COLUMNS.index("progress"), bar)
        if info.run_id not in self._budgets and info.run_dir:
            self._budgets[info.run_id] = budget_of(info.run_dir)
        progress = progress_of(info, self._budgets.get(info.run_id))
        state = state_name(info.state)
        values = {"run": info.run_id, "state": state, "worker": info.worker, "algorithm": info.algorithm,
                  "env": info.env_id,
                  "env steps/s": f"{progress['rate']:.0f}" if isinstance(progress["rate"], (int, float)) else "",
                  "last return": progress["return_label"],
                  "ETA": format_eta(progress["eta_s"])}
        for col, name in enumerate(COLUMNS):
            if name in values:
                self.table.item(row, col).setText(values[name])
        self.table.item(row, COLUMNS.index("state")).setToolTip(info.failure_reason or info.state_reason)
        bar = self.table.cellWidget(row, COLUMNS.index("progress"))
        fraction = progress["fraction"]
        bar.setValue(int(round((fraction or 0.0) * 1000)))
        done, total = progress["done"], progress["total"]
        bar.setFormat(f"{int(done):,} / {int(total):,}" if isinstance(done, (int, float)) and total else
                      ("done" if fraction == 1.0 else ""))
        self._update_buttons()
        self.fit_columns()

    def fit_columns(self, now: bool = False) -> None:
        if not self.isVisible():
            return
        moment = time.monotonic()
        if now or moment - self._fitted_at >= FIT_COLUMNS_EVERY_S:
            self._fitted_at = moment
            self.table.resizeColumnsToContents()

    def showEvent(self, event: Any) -> None:  # noqa: N802  (Qt's name)
        super().showEvent(event)
        self.fit_columns(now=True)

    def row_of(self, run_id: str) -> int | None:
        for row in range(self.table.rowCount()):
            item = self.table.item(row, 0)
            if item is not None and item.text() == run_id:
                return row
        return None

    def state_of(self, run_id: str) -> str | None:
        info = self.runs.get(run_id)
        return state_name(info.state) if info is not None else None

    def selected(self) -> str | None:
        rows = {index.row() for index in self.table.selectionModel().selectedRows()}
        if not rows:
            return None
        item = self.table.item(min(rows), 0)
        return item.text() if item is not None else None

    def select(self, run_id: str) -> None:
        row = self.row_of(run_id)
        if row is not None:
            self.table.selectRow(row)

    # -- buttons ------------------------------------------------------------------------
    def _update_buttons(self) -> None:
        run_id = self.selected()
        state = self.state_of(run_id) if run_id else None
        self.buttons["pause"].setEnabled(state == RunState.RUNNING)
        self.buttons["resume"].setEnabled(state == RunState.PAUSED)
        self.buttons["cancel"].setEnabled(state in ACTIVE)
        self.buttons["open"].setEnabled(run_id is not None)
        self.buttons["fork"].setEnabled(run_id is not None)

    def _control(self, verb: str) -> None:
        run_id = self.selected()
        if run_id:
            self.control.emit(verb, run_id)

    def _emit(self, signal: Signal) -> None:
        run_id = self.selected()
        if run_id:
            signal.emit(run_id)

