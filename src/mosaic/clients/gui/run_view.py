"""One run: live curves, episodes, self-play pool, checkpoints, log, FastLane frames and evaluations.

The main window streams the run's telemetry (history first, then live) into
:meth:`RunView.add_events`; everything here is drawn from those events, the
run folder (evaluations, checkpoints) and FastLane. Redraws are throttled to
ten a second and happen only while the curves are on screen, and frames are
read only while they are shown, so many open runs cannot flood the UI thread.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterable

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel, QListWidget,
                               QListWidgetItem, QPlainTextEdit, QSlider, QSplitter, QTableWidget, QTableWidgetItem,
                               QTabWidget, QVBoxLayout, QWidget)

from mosaic.runs import RunDir
from mosaic.scoring.curves import X_AXES, RunCurves, ema
from mosaic.clients.gui.frames import FramesView

#: Line colours, in order (Okabe–Ito, readable by colour-blind users).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000")
LEVELS = ("debug", "info", "warning", "error")
MAX_EPISODE_ROWS = 500
REDRAW_MS = 100
FIT_COLUMNS_EVERY_S = 1.0  # a shown table's columns follow its new rows this often


def list_beside_plot(owner: QWidget, title: str, items: QWidget, controls: QHBoxLayout, plot: QWidget,
                     below: QHBoxLayout | None = None) -> None:
    """``owner``'s layout: a titled list on the left; controls, the plot (and ``below``) on the right."""
    left = QWidget()
    left_box = QVBoxLayout(left)
    left_box.addWidget(QLabel(title))
    left_box.addWidget(items, 1)
    right = QWidget()
    right_box = QVBoxLayout(right)
    right_box.addLayout(controls)
    right_box.addWidget(plot, 1)
    if below is not None:
        right_box.addLayout(below)
    split = QSplitter()
    split.addWidget(left)
    split.addWidget(right)
    split.setStretchFactor(1, 4)
    QVBoxLayout(owner).addWidget(split)


class CurvesPanel(QWidget):
    """Checked metric keys drawn against the chosen x axis, EMA-smoothed as TensorBoard does."""

    def __init__(self, curves: RunCurves, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.curves = curves
        self.plot = pg.PlotWidget(background="w")
        self.plot.showGrid(x=True, y=True, alpha=0.3)
        self.plot.addLegend(offset=(10, 10))
        self.keys = QListWidget()
        self.keys.itemChanged.connect(lambda _item: self.redraw())
        self.x_axis = QComboBox()
        self.x_axis.addItems(X_AXES)
        self.x_axis.currentTextChanged.connect(lambda _t: self.redraw())
        self.smoothing = QSlider(Qt.Orientation.Horizontal)
        self.smoothing.setRange(0, 99)
        self.smoothing.setValue(60)
        self.smoothing.valueChanged.connect(lambda _v: self.redraw())
        self.smoothing_label = QLabel()
        controls = QHBoxLayout()
        controls.addWidget(QLabel("x"))
        controls.addWidget(self.x_axis)
        controls.addWidget(QLabel("smoothing"))
        controls.addWidget(self.smoothing, 1)
        controls.addWidget(self.smoothing_label)
        list_beside_plot(self, "metrics", self.keys, controls, self.plot)
        self.items: dict[str, Any] = {}

    def sync_keys(self) -> None:
        present = {self.keys.item(i).text() for i in range(self.keys.count())}
        for key in self.curves.keys():
            if key not in present:
                item = QListWidgetItem(key)
                item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
                item.setCheckState(Qt.CheckState.Checked if key == "episode_return_mean" or
                                   (key == "env_steps_per_s" and "episode_return_mean" not in self.curves.keys())
                                   else Qt.CheckState.Unchecked)
                self.keys.blockSignals(True)
                self.keys.addItem(item)
                self.keys.blockSignals(False)

    def checked(self) -> list[str]:
        return [self.keys.item(i).text() for i in range(self.keys.count())
                if self.keys.item(i).checkState() == Qt.CheckState.Checked]

    def set_checked(self, keys: Iterable[str]) -> None:
        wanted = set(keys)
        self.keys.blockSignals(True)
        for i in range(self.keys.count()):
            item = self.keys.item(i)
            item.setCheckState(Qt.CheckState.Checked if item.text() in wanted else Qt.CheckState.Unchecked)
        self.keys.blockSignals(False)
        self.redraw()

    def weight(self) -> float:
        return self.smoothing.value() / 100.0

    def redraw(self) -> None:
        self.smoothing_label.setText(f"{self.weight():.2f}")
        x_key = self.x_axis.currentText()
        wanted = self.checked()
        for key in list(self.items):
            if key not in wanted:
                for item in self.items.pop(key):
                    self.plot.removeItem(item)
        for n, key in enumerate(wanted):
            xs, ys = self.curves.series(key, x_key)
            colour = PALETTE[n % len(PALETTE)]
            if key not in self.items:
                raw = self.plot.plot([], [], pen=pg.mkPen(colour, width=1))
                raw.setOpacity(0.3)
                smooth = self.plot.plot([], [], pen=pg.mkPen(colour, width=2), name=key)
                self.items[key] = (raw, smooth)
            raw, smooth = self.items[key]
            raw.setData(xs, ys)
            smooth.setData(xs, ema(ys, self.weight()) if ys else [])
        self.plot.setLabel("bottom", x_key)

    def points(self, key: str) -> int:
        """How many points the drawn curve of ``key`` has (0 when it is not drawn)."""
        item = self.items.get(key)
        if item is None:
            return 0
        data = item[1].getData()[0]
        return 0 if data is None else len(data)


class RunView(QWidget):
    """Every live view of one run, in tabs."""

    def __init__(self, run_id: str, run_dir: str | None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run_id = run_id
        self.run_dir = Path(run_dir) if run_dir else None
        self.curves = RunCurves(run_id)
        self.header = QLabel(run_id)
        self.header.setWordWrap(True)
        self.tabs = QTabWidget()
        self.curves_panel = CurvesPanel(self.curves)
        self.tabs.addTab(self.curves_panel, "Curves")

        self.episodes = QTableWidget(0, 5)
        self.episodes.setHorizontalHeaderLabels(("episode", "env steps", "length", "returns", "winner"))
        self.episodes.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        # columns fit their contents when the table is shown (see _fit_episode_columns), not on every
        # new row: ResizeToContents measures every row's text each time, hidden or not
        self.episodes.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self._episodes_fitted_at = 0.0
        self._episode_rows_new = False
        self.episodes.horizontalHeader().setStretchLastSection(True)
        self.tabs.addTab(self.episodes, "Episodes")

        self.pool = QTableWidget(0, 3)
        self.pool.setHorizontalHeaderLabels(("pool member", "main's win rate against it", "Elo [95%]"))
        self.pool.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.pool.horizontalHeader().setStretchLastSection(True)
        self.snapshots = QListWidget()
        pool_tab = QWidget()
        pool_box = QVBoxLayout(pool_tab)
        pool_box.addWidget(self.pool, 2)
        pool_box.addWidget(QLabel("snapshot events"))
        pool_box.addWidget(self.snapshots, 1)
        self.tabs.addTab(pool_tab, "Self-play")

        self.checkpoints = QListWidget()
        self.tabs.addTab(self.checkpoints, "Checkpoints")

        self.level = QComboBox()
        self.level.addItems(LEVELS)
        self.level.setCurrentText("info")
        self.level.currentTextChanged.connect(lambda _t: self._refill_log())
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(5000)
        log_tab = QWidget()
        log_box = QVBoxLayout(log_tab)
        row = QHBoxLayout()
        row.addWidget(QLabel("level at least"))
        row.addWidget(self.level)
        row.addStretch(1)
        log_box.addLayout(row)
        log_box.addWidget(self.log, 1)
        self.tabs.addTab(log_tab, "Log")

        self.frames = FramesView(run_id, run_dir)
        self.tabs.addTab(self.frames, "Frames")

        self.evaluations = QPlainTextEdit()
        self.evaluations.setReadOnly(True)
        self.tabs.addTab(self.evaluations, "Evaluations")

        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(self.tabs, 1)
        self._dirty = False
        self.timer = QTimer(self)
        self.timer.setInterval(REDRAW_MS)
        self.timer.timeout.connect(self._redraw_if_dirty)
        self.timer.start()
        self.frames.start()
        self.show_evaluations()

    def close_view(self) -> None:
        self.timer.stop()
        self.frames.stop()

    # -- events -------------------------------------------------------------------------
    def add_events(self, events: Iterable[dict[str, Any]]) -> None:
        for event in events:
            kind = self.curves.add(event)
            if kind == "episode":
                self._add_episode(event)
            elif kind == "log":
                self._add_log(event)
                if event.get("self_play_event"):
                    self.snapshots.addItem(f"{event.get('self_play_event')}: {event.get('message', '')}")
            elif kind == "checkpoint_saved":
                self.checkpoints.addItem(f"iteration {event.get('iteration')}, "
                                         f"{event.get('timesteps_total', '?')} env steps: {event.get('path')}")
            elif kind == "metrics" and isinstance(event.get("self_play"), dict):
                self._show_pool(event["self_play"])
            elif kind in ("run_completed", "run_failed", "run_cancelled"):
                self.header.setText(f"{self.run_id}: {kind.removeprefix('run_')}"
                                    + (f" ({event.get('message')})" if event.get("message") else ""))
                self.show_evaluations()
            elif kind == "run_started":
                env = event.get("env") or {}
                self.header.setText(f"{self.run_id}: {event.get('worker')} {event.get('algorithm', '')} on "
                                    f"{env.get('env_id', '')}, {len(event.get('agents') or [])} agents")
        self._dirty = True

    def _redraw_if_dirty(self) -> None:
        if self._dirty and self.curves_panel.isVisible():  # a hidden view catches up when it is shown
            self.redraw()
        if self._episode_rows_new and self.episodes.isVisible():
            self._fit_episode_columns()

    def _fit_episode_columns(self) -> None:
        now = time.monotonic()
        if now - self._episodes_fitted_at >= FIT_COLUMNS_EVERY_S:
            self._episodes_fitted_at = now
            self._episode_rows_new = False
            self.episodes.resizeColumnsToContents()

    def redraw(self) -> None:
        self._dirty = False
        self.curves_panel.sync_keys()
        self.curves_panel.redraw()

    def _add_episode(self, event: dict[str, Any]) -> None:
        if self.episodes.rowCount() >= MAX_EPISODE_ROWS:
            self.episodes.removeRow(self.episodes.rowCount() - 1)
        self.episodes.insertRow(0)
        returns = event.get("returns") or {}
        values = (str(event.get("episode", "")), str(event.get("timesteps_total", "")), str(event.get("length", "")),
                  ", ".join(f"{a} {r:.2f}" for a, r in returns.items()), str(event.get("winner") or ""))
        for col, value in enumerate(values):
            self.episodes.setItem(0, col, QTableWidgetItem(value))
        self._episode_rows_new = True

    def _show_pool(self, self_play: dict[str, Any]) -> None:
        """The pool with main's win rates, and every version's rating against it over training (the ray
        worker's ``self_play.ratings``: pool members, evicted snapshots and the learners' current versions)."""
        rates = self_play.get("win_rate_vs") or {}
        ratings = self_play.get("ratings") or {}
        elo, low, high = (ratings.get(k) or {} for k in ("elo", "low", "high"))
        training = {version: learner for learner, version in (ratings.get("training") or {}).items()}
        members = list(self_play.get("pool") or rates)
        members += sorted((m for m in elo if m not in members), key=lambda m: -elo[m])
        self.pool.setRowCount(len(members))
        for row, member in enumerate(members):
            rate = rates.get(member)
            name = f"{member} ({training[member]}, training)" if member in training else member
            self.pool.setItem(row, 0, QTableWidgetItem(name))
            self.pool.setItem(row, 1, QTableWidgetItem("—" if member not in rates else
                                                       "no games yet" if rate is None else f"{rate:.2f}"))
            rating = "" if member not in elo else f"{elo[member]:.0f} [{low.get(member, elo[member]):.0f}, " \
                                                  f"{high.get(member, elo[member]):.0f}]"
            self.pool.setItem(row, 2, QTableWidgetItem(rating))
        anchor = ratings.get("anchor")
        self.pool.setToolTip(f"Elo: Bradley-Terry over {ratings.get('games')} games, {anchor} = 1000, 95% "
                             f"intervals from {ratings.get('reps')} bootstrap resamples; a training version is "
                             "rated from the games it played on its way to that snapshot" if anchor else "")

    def _passes(self, event: dict[str, Any]) -> bool:
        level = event.get("level", "info")
        return LEVELS.index(level if level in LEVELS else "info") >= LEVELS.index(self.level.currentText())

    def _add_log(self, event: dict[str, Any]) -> None:
        if self._passes(event):
            self.log.appendPlainText(f"[{event.get('level', 'info')}] {event.get('message', '')}")

    def _refill_log(self) -> None:
        self.log.clear()
        for event in self.curves.logs:
            self._add_log(event)

    def show_evaluations(self) -> None:
        """``mosaic eval`` results kept in the run folder's manifest, with their videos."""
        if self.run_dir is None:
            return
        manifest = RunDir(self.run_dir).read_manifest()  # {} when it cannot be read
        entries = manifest.get("evaluations") or []
        if not entries:
            self.evaluations.setPlainText("no evaluation yet: `mosaic eval RUN` plays the latest checkpoint")
            return
        lines = []
        for entry in entries:
            lines.append(f"{entry.get('path')}: {entry.get('num_episodes')} episodes of {entry.get('checkpoint')}")
            results = self.run_dir / entry.get("path", "") / "summary.json"
            try:
                data = json.loads(results.read_text(encoding="utf-8"))
                for agent, stats in (data.get("per_agent_return") or {}).items():
                    lines.append(f"  {agent}: mean {stats['mean']:.2f} "
                                 f"[{stats['ci95_low']:.2f}, {stats['ci95_high']:.2f}] over {stats['n']}")
            except (OSError, ValueError, KeyError, TypeError):
                pass
            if entry.get("outcomes"):
                lines.append(f"  outcomes: {json.dumps(entry['outcomes'])}")
            for video in entry.get("videos") or []:
                lines.append(f"  video: {self.run_dir / video}")
        self.evaluations.setPlainText("\n".join(lines))
