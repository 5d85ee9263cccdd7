"""Compare runs of any workers: one metric overlaid, optionally grouped by a config value as mean and 95% band.

Runs are picked from the daemon's list; their stored telemetry is fetched by
the main window (``StreamTelemetry`` without follow) and handed to
:meth:`CompareView.set_history`. Grouping by a config path (``seed``'s
siblings, say ``algo_params.lr``) draws each group's mean over its runs with a
95% bootstrap band (runs resampled; ``mosaic.scoring.stats.curve_band``, the
band of the experiments view and the report), on the x values every run of the
group covers. The figure exports to PNG and the drawn data to CSV.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QFileDialog, QHBoxLayout, QLabel, QLineEdit, QListWidget, QListWidgetItem,
                               QPushButton, QWidget)

from mosaic.configkit import get_path
from mosaic.runs import RunDir
from mosaic.scoring import stats
from mosaic.scoring.curves import X_AXES, RunCurves, increasing
from mosaic.clients.gui.run_view import PALETTE, list_beside_plot

#: At most this many x values per group's band (the logged ones when there are fewer, else evenly spaced).
BAND_POINTS = 200


def config_value(run_dir: str | None, path: str) -> Any:
    """The value at dotted ``path`` in a run's config.json (None when absent)."""
    if not run_dir or not path:
        return None
    try:
        node: Any = json.loads(RunDir(Path(run_dir)).config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return get_path(node, path, None)


class CompareView(QWidget):
    history_wanted = Signal(str)  # run id whose stored telemetry the view needs

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.run_dirs: dict[str, str] = {}
        self.labels: dict[str, str] = {}
        self.history: dict[str, RunCurves] = {}
        self.drawn: list[dict[str, Any]] = []  # what the plot shows: label, x, y (and band)
        self.runs = QListWidget()
        self.runs.itemChanged.connect(self._run_toggled)
        self.metric = QComboBox()
        self.metric.setEditable(True)
        self.metric.setMinimumContentsLength(28)
        self.metric.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.metric.setCurrentText("episode_return_mean")
        self.metric.currentTextChanged.connect(lambda _t: self.redraw())
        self.x_axis = QComboBox()
        self.x_axis.addItems(X_AXES)
        self.x_axis.currentTextChanged.connect(lambda _t: self.redraw())
        self.group_by = QLineEdit()
        self.group_by.setPlaceholderText("group by a config path, e.g. algorithm, environment.env_id or learning_rate")
        self.group_by.editingFinished.connect(self.redraw)
        self.plot = pg.PlotWidget(background="w")
        self.plot.showGrid(x=True, y=True, alpha=0.3)
        self.legend = self.plot.addLegend(offset=(10, 10))
        self.status = QLabel()
        export_png = QPushButton("Export PNG…")
        export_png.clicked.connect(self._png_dialog)
        export_csv = QPushButton("Export CSV…")
        export_csv.clicked.connect(self._csv_dialog)
        controls = QHBoxLayout()
        for widget in (QLabel("metric"), self.metric, QLabel("x"), self.x_axis, QLabel("group by"), self.group_by):
            controls.addWidget(widget)
        buttons = QHBoxLayout()
        buttons.addWidget(export_png)
        buttons.addWidget(export_csv)
        buttons.addStretch(1)
        buttons.addWidget(self.status)
        list_beside_plot(self, "runs (check to compare)", self.runs, controls, self.plot, buttons)

    # -- runs ----------------------------------------------------------------------------
    def add_run(self, run_id: str, run_dir: str, label: str) -> None:
        if run_id in self.run_dirs:
            return
        self.run_dirs[run_id] = run_dir
        self.labels[run_id] = label
        item = QListWidgetItem(f"{run_id}  {label}")
        item.setData(Qt.ItemDataRole.UserRole, run_id)
        item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
        item.setCheckState(Qt.CheckState.Unchecked)
        self.runs.blockSignals(True)
        self.runs.addItem(item)
        self.runs.blockSignals(False)

    def check(self, run_ids: list[str]) -> None:
        for i in range(self.runs.count()):
            item = self.runs.item(i)
            if item.data(Qt.ItemDataRole.UserRole) in run_ids:
                item.setCheckState(Qt.CheckState.Checked)

    def selected(self) -> list[str]:
        return [self.runs.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.runs.count())
                if self.runs.item(i).checkState() == Qt.CheckState.Checked]

    def _run_toggled(self, item: QListWidgetItem) -> None:
        run_id = item.data(Qt.ItemDataRole.UserRole)
        if item.checkState() == Qt.CheckState.Checked and run_id not in self.history:
            self.status.setText(f"loading {run_id}…")
            self.history_wanted.emit(run_id)
        self.redraw()

    def set_history(self, run_id: str, events: list[dict[str, Any]]) -> None:
        curves = RunCurves(run_id)
        for event in events:
            curves.add(event)
        self.history[run_id] = curves
        known = {self.metric.itemText(i) for i in range(self.metric.count())}
        for key in curves.keys():
            if key not in known:
                self.metric.addItem(key)
                known.add(key)
        self.status.clear()
        self.redraw()

    # -- drawing ---------------------------------------------------------------------------
    def redraw(self) -> None:
        self.plot.clear()
        self.legend.clear()
        self.drawn = []
        key, x_key, group_path = self.metric.currentText(), self.x_axis.currentText(), self.group_by.text().strip()
        ready = [r for r in self.selected() if r in self.history]
        if group_path:
            groups: dict[str, list[str]] = {}
            for run_id in ready:
                groups.setdefault(json.dumps(config_value(self.run_dirs.get(run_id), group_path)), []).append(run_id)
            for n, (value, members) in enumerate(sorted(groups.items())):
                curves = [increasing(*self.history[r].series(key, x_key)) for r in members]
                try:
                    band = stats.curve_band([c for c in curves if c[0]], stats.mean, max_points=BAND_POINTS)
                except ValueError:  # no run with the metric, or no x range every run covers
                    continue
                colour = PALETTE[n % len(PALETTE)]
                label = f"{group_path}={value} (n={band.n_runs})"
                low = self.plot.plot(band.x, band.low, pen=pg.mkPen(colour, width=0))
                high = self.plot.plot(band.x, band.high, pen=pg.mkPen(colour, width=0))
                fill = pg.FillBetweenItem(low, high, brush=pg.mkBrush(pg.mkColor(colour).red(),
                                                                     pg.mkColor(colour).green(),
                                                                     pg.mkColor(colour).blue(), 60))
                self.plot.addItem(fill)
                self.plot.plot(band.x, band.point, pen=pg.mkPen(colour, width=2), name=label)
                self.drawn.append({"label": label, "x": band.x.tolist(), "y": band.point.tolist(),
                                   "low": band.low.tolist(), "high": band.high.tolist()})
        else:
            for n, run_id in enumerate(ready):
                xs, ys = self.history[run_id].series(key, x_key)
                if not xs:
                    continue
                label = f"{run_id} {self.labels.get(run_id, '')}".strip()
                self.plot.plot(xs, ys, pen=pg.mkPen(PALETTE[n % len(PALETTE)], width=2), name=label)
                self.drawn.append({"label": label, "x": xs, "y": ys})
        self.plot.setLabel("bottom", x_key)
        self.plot.setLabel("left", key)

    # -- export ------------------------------------------------------------------------------
    def export_png(self, path: Path) -> bool:
        return self.plot.grab().save(str(path))

    def export_csv(self, path: Path) -> None:
        with Path(path).open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(["series", self.x_axis.currentText(), self.metric.currentText(), "ci95_low", "ci95_high"])
            for series in self.drawn:
                for i, (x, y) in enumerate(zip(series["x"], series["y"])):
                    writer.writerow([series["label"], x, y, series["low"][i] if "low" in series else "",
                                     series["high"][i] if "high" in series else ""])

    def _png_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export figure", "compare.png", "PNG (*.png)")
        if path:
            self.export_png(Path(path))

    def _csv_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export data", "compare.csv", "CSV (*.csv)")
        if path:
            self.export_csv(Path(path))
