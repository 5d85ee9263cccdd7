"""The experiments in the home: each one's grid of cells, live, and its learning curves per configuration.

An experiment is a folder under ``MOSAIC_HOME/experiments`` (``mosaic.experiments.store``): its plan
names the cells, its journal says what happened to each attempt. The view reads the journal again
every two seconds, and only when the file changed; in between, the daemon's run states (handed over by
the main window as it receives them) keep the cells live: an attempt the journal has not seen end has
the state its run has in the daemon, and a cell's state follows from its last attempt, as the
coordinator decides it (``cell_states``).

The learning curves come from the run folders of the cells running or completed: each telemetry file is
read from where the previous read stopped (whole lines, ``metrics`` events only), at most every two
seconds. Each configuration is drawn as the IQM over its seeds with a 95% stratified-bootstrap band, on
the env steps every run covers (``mosaic.scoring.stats.curve_band``, as the report's sample-efficiency plot
does).

A tuning study (a spec with a ``tuning`` section) adds its cells as it goes: its trials' cells, then each
contender's best on the test seeds (journal ``cell_added``); the grid grows with the journal. Its trials, each
contender's summary and best-so-far curve are shown above the learning curves (``study_panel``), read from
Optuna's storage only when the journal changed. In the learning curves a study's tuning runs (every trial's,
whatever its params) and its test runs are drawn apart.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel, QListWidget, QSplitter,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from mosaic.errors import UserError
from mosaic.experiments.coordinator import cell_states
from mosaic.experiments.store import CellState, Experiment, ExperimentStore
from mosaic.run_status import JOB_LEFT, JobState, RunState
from mosaic.runs import RunDir, RunStore
from mosaic.scoring import stats
from mosaic.scoring.curves import RunCurves, increasing
from mosaic.clients.gui.lists import refill_names
from mosaic.clients.gui.run_view import PALETTE
from mosaic.clients.gui.runs_view import state_name
from mosaic.clients.gui.study_panel import StudyPanel, StudyReader

COLUMNS = ("cell", "configuration", "env", "seed", "state", "attempts", "run", "last cause")
REFRESH_MS = 2000            # the journal, the list of experiments and the curves: at most this often
READ_LIMIT = 4 << 20         # bytes of one run's telemetry taken at once
READ_BUDGET = 4 << 20        # bytes of telemetry taken per refresh (about 40 ms): a long backlog is read
CATCH_UP_MS = 50             # over several, this far apart, the event loop free in between
CATCH_UP_REDRAW_S = 1.0      # while catching up, the curves are redrawn at most this often
CURVE_POINTS = 50            # as the report: at most this many env-step values per curve
X_KEY = "timesteps_total"
#: A cell's state -> which count it adds to.
COUNTED = {JobState.COMPLETED: "done", JobState.RUNNING: "running", JobState.PENDING: "waiting",
           JobState.QUEUED: "waiting", JobState.FAILED: "failed", JobState.CANCELLED: "cancelled"}
COUNTS = ("done", "running", "waiting", "failed", "cancelled")
STATE_COLOURS = {JobState.COMPLETED: "#009E73", JobState.FAILED: "#D55E00", JobState.CANCELLED: "#7F7F7F",
                 JobState.RUNNING: "#0072B2"}


@dataclass
class CurveTail:
    """One run's curve of ``metric`` over env steps, read from its telemetry file from where the last read
    stopped (only the curve is kept, not the events)."""

    path: Path
    metric: str
    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    last_seq: int = -1
    offset: int = 0
    finished: bool = False   # the run ended and its file was read to the end: never read again
    _skipping: bool = False  # inside a line longer than a whole read: dropped up to its end

    def read(self, limit: int = READ_LIMIT) -> tuple[bool, bool, int]:
        """Take the whole lines appended since the last read, reading at most ``limit`` bytes: (a point of
        the curve came, the read reached the file's end, bytes read). A line still being written is left
        for the next read."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return False, True, 0
        if size <= self.offset:
            return False, True, 0
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            data = fh.read(min(size - self.offset, limit))
        to_the_end = self.offset + len(data) >= size
        end = data.rfind(b"\n")
        if end < 0:  # no whole line: one still being written, or one longer than READ_LIMIT (dropped)
            if len(data) >= READ_LIMIT:
                self.offset += len(data)
                self._skipping = True
            return False, to_the_end, len(data)
        self.offset += end + 1
        lines = data[:end].split(b"\n")
        if self._skipping:
            lines = lines[1:]
            self._skipping = False
        curves = RunCurves(last_seq=self.last_seq)
        for line in lines:
            if b'"metrics"' not in line:  # cheap: episodes and log lines are most of a telemetry file
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and event.get("type") == "metrics":
                curves.add(event)
        self.last_seq = curves.last_seq
        xs, ys = curves.series(self.metric, X_KEY)
        self.xs.extend(xs)
        self.ys.extend(ys)
        return bool(xs), to_the_end, len(data)


def aggregate(curves: list[tuple[list[float], list[float]]], reps: int = 2000, confidence: float = 0.95,
              seed: int = 0) -> dict[str, Any] | None:
    """Runs' curves as one: x, the IQM (or mean) at each x, its band, and how many runs; None if they share
    no env steps."""
    curves = [(xs, ys) for xs, ys in curves if xs]
    if not curves:
        return None
    # as the report: the env steps logged inside the shared range, or CURVE_POINTS evenly spaced ones when
    # there are more
    try:
        band = stats.curve_band(curves, stats.iqm, reps, confidence, seed, max_points=CURVE_POINTS)
    except ValueError:  # no shared range
        return None
    return {"x": band.x.tolist(), "y": band.point.tolist(), "low": band.low.tolist(), "high": band.high.tolist(),
            "runs": band.n_runs, "statistic": "IQM"}


def live_cells(cells: dict[str, CellState], run_states: dict[str, tuple[str, str]]) -> dict[str, CellState]:
    """The journal's cells with each attempt it has not seen end in the state the daemon gives its run."""
    out: dict[str, CellState] = {}
    for cell_id, cell in cells.items():
        attempts = []
        for attempt in cell.attempts:
            live = None if attempt.ended else run_states.get(attempt.run_id)
            attempts.append(replace(attempt, state=live[0], cause=live[1]) if live else attempt)
        out[cell_id] = CellState(cell_id, attempts)
    return out


def curve_group(cell: Any) -> str:
    """The curve a cell's run is drawn in: its configuration's; a study's tuning runs (whatever their trial's
    params) apart from its test runs, which carry the contender's label as the report does."""
    return f"{cell.configuration} (tuning trials)" if cell.trial is not None else cell.configuration


class ExperimentsView(QWidget):
    """The experiments list, the selected one's grid, counts and curves; the main window feeds it the
    daemon's run states (:meth:`update_run`) and opens the runs it asks for (:attr:`open_run`)."""

    open_run = Signal(str)  # run id

    def __init__(self, home: Path | str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = ExperimentStore(home)
        self.run_store = RunStore(home)
        self.run_states: dict[str, tuple[str, str]] = {}  # run id -> (attempt state, cause), from the daemon
        self.exp: Experiment | None = None
        self.metric_key = "episode_return_mean"
        self.report = {"reps": 2000, "confidence": 0.95, "seed": 0}
        self.journal_cells: dict[str, CellState] = {}
        self.cells: dict[str, CellState] = {}   # the journal's, with the daemon's live states
        self.states: dict[str, str] = {}         # cell id -> pending / queued / running / completed / ...
        self.counts: dict[str, int] = {k: 0 for k in COUNTS}
        self.tails: dict[str, CurveTail] = {}
        self.bands: dict[tuple[str, str], dict[str, Any] | None] = {}  # (configuration, env) -> aggregate
        self.members: dict[tuple[str, str], tuple[str, ...]] = {}      # the runs each band was made of
        self.dirty: set[tuple[str, str]] = set()
        self.drawn: list[dict[str, Any]] = []    # what the plot shows: configuration, x, y, low, high, runs
        self._journal_mark: tuple[int, int, int] | None = None
        self._run_cell: dict[str, str] = {}      # attempt run id -> cell id, for the selected experiment
        self._rows: dict[str, int] = {}
        self._catching_up = False
        self._drawn_at = 0.0
        self._undrawn = False     # curves read but not drawn yet (while catching up)
        self.study_reader: StudyReader | None = None  # the selected experiment's, if it is a study
        self.study_error = ""

        self.list = QListWidget()
        self.list.currentTextChanged.connect(self._select)
        self.header = QLabel("no experiment selected")
        self.header.setWordWrap(True)
        self.counts_label = QLabel()
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.verticalHeader().setVisible(False)
        self.table.cellDoubleClicked.connect(self._double_clicked)
        self.env = QComboBox()
        self.env.currentTextChanged.connect(lambda _t: self.redraw())
        self.env_label = QLabel("env")
        self.plot = pg.PlotWidget(background="w")
        self.plot.showGrid(x=True, y=True, alpha=0.3)
        self.legend = self.plot.addLegend(offset=(10, 10))
        self.plot_status = QLabel()
        self.study_panel = StudyPanel()
        self.study_panel.setVisible(False)

        left = QWidget()
        left_box = QVBoxLayout(left)
        left_box.addWidget(QLabel("experiments"))
        left_box.addWidget(self.list, 1)
        curves = QWidget()
        curves_box = QVBoxLayout(curves)
        controls = QHBoxLayout()
        controls.addWidget(self.env_label)
        controls.addWidget(self.env)
        controls.addStretch(1)
        controls.addWidget(self.plot_status)
        curves_box.addLayout(controls)
        curves_box.addWidget(self.plot, 1)
        grid_and_curves = QSplitter(Qt.Orientation.Vertical)
        grid_and_curves.addWidget(self.table)
        grid_and_curves.addWidget(self.study_panel)  # shown for a study only
        grid_and_curves.addWidget(curves)
        right = QWidget()
        right_box = QVBoxLayout(right)
        right_box.addWidget(self.header)
        right_box.addWidget(self.counts_label)
        right_box.addWidget(grid_and_curves, 1)
        split = QSplitter()
        split.addWidget(left)
        split.addWidget(right)
        split.setStretchFactor(1, 4)
        split.setSizes([200, 1000])
        grid_and_curves.setSizes([400, 400, 400])
        QVBoxLayout(self).addWidget(split)
        self._show_env_choice([])

        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self._tick)
        self.timer.start()

    def close_view(self) -> None:
        self.timer.stop()

    # -- refreshing --------------------------------------------------------------------------------
    def _tick(self) -> None:
        if self.isVisible():  # a hidden view catches up when it is shown
            self.refresh()

    def showEvent(self, event: Any) -> None:  # noqa: N802  (Qt's name)
        super().showEvent(event)
        self.refresh()
        self._fit_columns()

    def refresh(self) -> None:
        """The experiments in the home, then the selected one's journal (if it changed) and curves."""
        self.refresh_names()
        if self.exp is None:
            return
        if not self.exp.root.is_dir():
            return
        if self._read_journal():
            self._fit_columns()
        self._show_header()
        if self._read_curves() or self._undrawn:
            self.redraw()

    def refresh_names(self) -> None:
        # not the hidden folder an experiment is staged in while it is created (it has a plan.json too)
        names = [n for n in self.store.names() if not n.startswith(".")]
        wanted = refill_names(self.list, names, self.exp.name if self.exp is not None else None)
        if wanted is not None:
            self._select(wanted)

    def select(self, name: str) -> None:
        """Show experiment ``name`` (listing the experiments again if it is new)."""
        self.refresh_names()
        items = self.list.findItems(name, Qt.MatchFlag.MatchExactly)
        if items:
            self.list.setCurrentItem(items[0])

    def _select(self, name: str) -> None:
        self.exp = None
        self.tails.clear()
        self.bands.clear()
        self.members.clear()
        self.dirty.clear()
        self.journal_cells, self.cells, self.states = {}, {}, {}
        self._journal_mark = None
        self._run_cell = {}
        self._rows = {}
        self.table.setRowCount(0)
        self.counts = {k: 0 for k in COUNTS}
        self.counts_label.clear()
        self.study_reader = None
        self.study_error = ""
        self.study_panel.clear()
        self.study_panel.setVisible(False)
        if name:
            try:
                self.exp = self.store.get(name)
                spec = self.exp.spec
            except (UserError, OSError, ValueError, KeyError, TypeError) as exc:
                self.exp = None
                self.header.setText(f"{name}: cannot be read ({exc})")
                self.redraw()
                return
            score, report = spec.get("score") or {}, spec.get("report") or {}
            self.metric_key = str(score.get("metric") or "episode_return_mean")
            self.report = {"reps": int(report.get("reps", 2000)), "confidence": float(report.get("confidence", 0.95)),
                           "seed": int(report.get("seed", 0))}
            if self.exp.plan.study is not None:
                self.study_reader = StudyReader()
                self.study_panel.configure(self.metric_key, bool(score.get("higher_is_better", True)))
                self.study_panel.setVisible(True)
                self.study_panel.show_message("study: no trial asked yet")
            self._fill_table()
            self._show_env_choice(list(dict.fromkeys(c.env for c in self.exp.plan.cells)))
            self._read_journal()
            self._read_curves()
            self._fit_columns()
        self._show_header()
        self.redraw()

    def _fill_table(self) -> None:
        """A row for each cell of the plan that has none yet (a study's plan grows as it goes)."""
        assert self.exp is not None
        cells = [c for c in self.exp.plan.cells if c.cell_id not in self._rows]
        if not cells:
            return
        first = self.table.rowCount()
        self.table.setRowCount(first + len(cells))
        for row, cell in enumerate(cells, start=first):
            self._rows[cell.cell_id] = row
            for col, value in enumerate((cell.cell_id, cell.configuration, cell.env, str(cell.seed), "", "", "", "")):
                self.table.setItem(row, col, QTableWidgetItem(value))
        envs = list(dict.fromkeys(c.env for c in self.exp.plan.cells))
        if envs != [self.env.itemText(i) for i in range(self.env.count())]:
            current = self.env.currentText()
            self._show_env_choice(envs)
            if current in envs:
                self.env.setCurrentText(current)

    def _show_env_choice(self, envs: list[str]) -> None:
        self.env.blockSignals(True)
        self.env.clear()
        self.env.addItems(envs)
        self.env.blockSignals(False)
        self.env.setVisible(len(envs) > 1)
        self.env_label.setVisible(len(envs) > 1)

    def _fit_columns(self) -> None:
        if self.isVisible():
            self.table.resizeColumnsToContents()
            if self.study_reader is not None:
                self.study_panel.fit_columns()

    def _show_header(self) -> None:
        if self.exp is None:
            if not self.list.count():
                self.header.setText(f"no experiments yet in {self.store.root}")
            return
        plan = self.exp.plan
        coordinator = self.exp.coordinator()
        if plan.study is not None:
            study = plan.study
            status = self.study_panel.status
            phase = status["phase"] if status is not None else "no trial yet"
            what = (f"a tuning study: {len(study['contenders'])} contender(s) × {study['trials']} trials × "
                    f"{len(study['tuning_seeds'])} tuning seed(s) ({study['sampler']} search, pruner "
                    f"{study['pruner']}), then each contender's best trial on {len(study['test_seeds'])} test "
                    f"seed(s); {phase}, {len(plan.cells)} cells so far")
        else:
            sizes = (len({c.configuration for c in plan.cells}), len({c.env for c in plan.cells}),
                     len({c.seed for c in plan.cells}))
            what = (f"{len(plan.cells)} cells, {sizes[0]} configuration(s) × {sizes[1]} env(s) × "
                    f"{sizes[2]} seed(s)")
        self.header.setText(
            f"{self.exp.name}: {what}, a failed cell retried up to {plan.retries} time(s); "
            + (f"coordinator pid {coordinator.get('pid')} running" if coordinator else "no coordinator running")
            + f" · {self.exp.root}")

    # -- cell states -------------------------------------------------------------------------------
    def _read_journal(self) -> bool:
        """Read the journal again if it changed since the last read (its size, or the plan's retries)."""
        assert self.exp is not None
        try:
            journal = self.exp.journal_path.stat()
            plan = (self.exp.root / "plan.json").stat()
        except OSError:
            return False
        mark = (journal.st_size, journal.st_mtime_ns, plan.st_mtime_ns)
        if mark == self._journal_mark:
            return False
        if self._journal_mark is not None and mark[2] != self._journal_mark[2]:
            try:  # `mosaic experiment resume --retries N` rewrote the plan
                self.exp = Experiment(self.exp.root)
            except (OSError, ValueError, KeyError, TypeError):
                return False
        self._journal_mark = mark
        self.journal_cells = self.exp.cells()
        self._fill_table()  # a study's cells added since
        self._run_cell = {a.run_id: cell_id for cell_id, cell in self.journal_cells.items() for a in cell.attempts}
        self._apply_states()
        self._read_study()
        return True

    def _read_study(self) -> None:
        """A study's trials from Optuna's storage (called when the journal changed: the driver journals what
        it asks and tells)."""
        if self.exp is None or self.study_reader is None:
            return
        try:
            status = self.study_reader.status(self.exp)
        except Exception as exc:  # noqa: BLE001  (Optuna's storage, whatever it raises: said, read again later)
            self.study_error = f"study: cannot be read ({type(exc).__name__}: {exc})"
            self.study_panel.show_message(self.study_error)
            self.study_reader = StudyReader()  # afresh on the next change
            return
        self.study_error = ""
        if status is None:
            self.study_panel.show_message("study: no trial asked yet")
            return
        self.study_panel.show_status(status)

    def update_run(self, info: Any) -> None:
        """A run's state from the daemon (a ``RunInfo``): the cell whose attempt it is follows it at once."""
        run_state = RunState.from_manifest(state_name(info.state))
        if run_state is None:
            return
        state = JobState.from_run(run_state)  # the one mapping, as the experiment backends use it
        cause = (info.failure_reason if state == JobState.FAILED else info.state_reason
                 if state == JobState.CANCELLED else "")
        if self.run_states.get(info.run_id) == (state, cause):
            return
        self.run_states[info.run_id] = (state, cause)
        if self.exp is not None and info.run_id in self._run_cell:
            self._apply_states()

    def _apply_states(self) -> None:
        assert self.exp is not None
        self.cells = live_cells(self.journal_cells, self.run_states)
        states = cell_states(self.exp, self.cells)
        counts = {k: 0 for k in COUNTS}
        for state in states.values():
            counts[COUNTED[state]] += 1
        retrying = sum(1 for c in self.cells.values() if states[c.cell_id] in (JobState.PENDING, JobState.QUEUED)
                       and c.failures)
        for cell_id, state in states.items():
            row = self._rows.get(cell_id)
            if row is None:
                continue
            cell = self.cells[cell_id]
            last = cell.last
            causes = [a.cause for a in cell.attempts if a.cause]
            shown = state + (f" (retry {cell.failures} of {self.exp.plan.retries})"
                             if state in JOB_LEFT and cell.failures else "")
            self._set(row, "state", shown, "\n".join(f"attempt {a.number} {a.run_id}: {a.state}"
                                                     + (f" ({a.cause})" if a.cause else "") for a in cell.attempts))
            self.table.item(row, COLUMNS.index("state")).setForeground(QColor(STATE_COLOURS.get(state, "#000000")))
            self._set(row, "attempts", str(len(cell.attempts)))
            self._set(row, "run", last.run_id if last else "-")
            self._set(row, "last cause", causes[-1] if causes else "", causes[-1] if causes else "")
        self.states = states
        self.counts = counts
        total = len(states)
        self.counts_label.setText(f"{counts['done']}/{total} done · {counts['running']} running · "
                                  f"{counts['waiting']} waiting · {counts['failed']} failed · "
                                  f"{counts['cancelled']} cancelled" + (f" · {retrying} retrying" if retrying else ""))

    def _set(self, row: int, column: str, text: str, tip: str | None = None) -> None:
        item = self.table.item(row, COLUMNS.index(column))
        if item.text() != text:
            item.setText(text)
        if tip is not None and item.toolTip() != tip:
            item.setToolTip(tip)

    def run_of(self, row: int) -> str | None:
        """The run of the grid's row (its cell's last attempt), or None."""
        item = self.table.item(row, COLUMNS.index("run"))
        text = item.text() if item is not None else ""
        return text if text and text != "-" else None

    def _double_clicked(self, row: int, _column: int) -> None:
        run_id = self.run_of(row)
        if run_id:
            self.open_run.emit(run_id)

    # -- curves ------------------------------------------------------------------------------------
    def _read_curves(self) -> bool:
        """Read what the cells' runs appended (up to READ_BUDGET bytes; more on a catch-up call soon after)
        and mark the (configuration, env) bands whose runs or points changed; True if any did."""
        if self.exp is None:
            return False
        changed = behind = False
        budget = READ_BUDGET
        members: dict[tuple[str, str], list[str]] = {}
        wanted: set[str] = set()
        for cell in self.exp.plan.cells:
            state = self.cells.get(cell.cell_id)
            last = state.last if state else None
            if last is None or last.state not in (JobState.RUNNING, JobState.COMPLETED):
                continue
            wanted.add(last.run_id)
            tail = self.tails.get(last.run_id)
            if tail is None:
                try:
                    path = RunDir(self.run_store.path_for(last.run_id)).telemetry_path
                except UserError:
                    continue
                tail = self.tails[last.run_id] = CurveTail(path, self.metric_key)
            if not tail.finished:
                if budget <= 0:
                    behind = True
                else:
                    new, at_end, taken = tail.read(min(READ_LIMIT, budget))
                    budget -= taken
                    behind = behind or not at_end
                    if new:
                        self.dirty.add((curve_group(cell), cell.env))
                        changed = True
                    tail.finished = at_end and last.state == JobState.COMPLETED
            if tail.xs:
                members.setdefault((curve_group(cell), cell.env), []).append(last.run_id)
        for run_id in set(self.tails) - wanted:  # a failed attempt's run, say: no longer drawn
            del self.tails[run_id]
        for key in set(members) | set(self.members):
            now = tuple(members.get(key, ()))
            if now != self.members.get(key):
                self.members[key] = now
                self.dirty.add(key)
                changed = True
        if behind and not self._catching_up:  # more to read: go on soon, the event loop free meanwhile
            self._catching_up = True
            QTimer.singleShot(CATCH_UP_MS, self._catch_up)
        return changed

    def _catch_up(self) -> None:
        self._catching_up = False
        if self.exp is None:
            return
        if self._read_curves():
            self._undrawn = True
        if self._undrawn and (not self._catching_up or time.monotonic() - self._drawn_at >= CATCH_UP_REDRAW_S):
            self.redraw()

    def _band(self, key: tuple[str, str]) -> dict[str, Any] | None:
        if key in self.dirty or key not in self.bands:
            self.dirty.discard(key)
            curves = [increasing(self.tails[r].xs, self.tails[r].ys) for r in self.members.get(key, ())]
            # the report's seed for this curve: the same band as its plot
            seed = stats.derived_seed(f"curve:{key[1]}:{key[0]}", self.report["seed"])
            self.bands[key] = aggregate(curves, self.report["reps"], self.report["confidence"], seed)
        return self.bands[key]

    def redraw(self) -> None:
        """Draw each configuration's band for the chosen env (only bands whose runs changed are computed)."""
        self._drawn_at = time.monotonic()
        self._undrawn = False
        self.plot.clear()
        self.legend.clear()
        self.drawn = []
        if self.exp is None:
            self.plot_status.clear()
            return
        env = self.env.currentText()
        configurations = list(dict.fromkeys(curve_group(c) for c in self.exp.plan.cells))
        missing = []
        for n, configuration in enumerate(configurations):
            if not self.members.get((configuration, env)):
                continue
            band = self._band((configuration, env))
            if band is None:
                missing.append(configuration)
                continue
            colour = pg.mkColor(PALETTE[n % len(PALETTE)])
            label = f"{configuration} ({band['runs']} run{'s' if band['runs'] != 1 else ''})"
            low = self.plot.plot(band["x"], band["low"], pen=pg.mkPen(colour, width=0))
            high = self.plot.plot(band["x"], band["high"], pen=pg.mkPen(colour, width=0))
            self.plot.addItem(pg.FillBetweenItem(low, high, brush=pg.mkBrush(colour.red(), colour.green(),
                                                                             colour.blue(), 60)))
            self.plot.plot(band["x"], band["y"], pen=pg.mkPen(colour, width=2), name=label)
            self.drawn.append({"configuration": configuration, "env": env, **band})
        statistic = self.drawn[0]["statistic"] if self.drawn else "IQM"
        self.plot.setLabel("bottom", "env steps")
        self.plot.setLabel("left", f"{statistic} of {self.metric_key}")
        self.plot_status.setText(
            (f"{statistic} over seeds, 95% band" if self.drawn else "no curves yet")
            + (f"; no env steps shared by the runs of {', '.join(missing)}" if missing else ""))
