"""A tuning study in the Experiments view: its trials, each contender's summary, and the best-so-far curves.

A study (an experiment spec with a ``tuning`` section, :mod:`mosaic.experiments.study`) keeps its trials in
Optuna's storage (by default ``study.journal`` in the experiment's folder). :class:`StudyReader` reads them as
``mosaic experiment status`` does (:func:`mosaic.experiments.study.describe.study_status`: the same dict), but
without writing to the storage (it loads each contender's study, never creates one) and keeping the storage
between reads, so a journal file is read on from where the previous read stopped. The view reads it only when
the experiment's own journal changed: the driver journals every trial it asks for and ends there right after
telling Optuna.

:class:`StudyPanel` shows a status: one summary row per contender (trials asked of its budget, running,
completed, pruned, failed, the best so far), one row per trial (contender, number, Optuna's state, the value:
the mean score over the tuning seeds, the params), and per contender the best value after each trial against
the trial's number (:func:`mosaic.scoring.expected_best.best_so_far`: a trial that did not complete keeps the
best where it was), with the completed trials' values as dots.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (QAbstractItemView, QHBoxLayout, QHeaderView, QLabel, QSplitter, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from mosaic.clients.gui.run_view import PALETTE
from mosaic.experiments.store import Experiment
from mosaic.scoring.expected_best import best_so_far

SUMMARY_COLUMNS = ("contender", "trials", "running", "completed", "pruned", "failed", "best so far", "best trial",
                   "best params")
TRIAL_COLUMNS = ("contender", "trial", "state", "value", "params")
STATE_COLOURS = {"COMPLETE": "#009E73", "FAIL": "#D55E00", "PRUNED": "#7F7F7F", "RUNNING": "#0072B2"}
VALUE_ROLE = Qt.ItemDataRole.UserRole  # a value cell's exact float (the text is rounded)


def value_text(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def params_text(params: dict[str, Any]) -> str:
    """``name=value, ...``: floats to 4 significant digits."""
    return ", ".join(f"{k}={value_text(v)}" for k, v in params.items())


def best_curve(trials: list[dict[str, Any]], higher_is_better: bool) -> tuple[list[int], list[float]]:
    """A contender's trials (``trials_list``) as (trial numbers, the best value after each), in trial order."""
    ordered = sorted(trials, key=lambda t: t["number"])
    values = [float(t["value"]) if t["state"] == "COMPLETE" and t.get("value") is not None else math.nan
              for t in ordered]
    return [int(t["number"]) for t in ordered], best_so_far(values, higher_is_better).tolist()


def staircase(x: list[int], y: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """The best so far as steps: each trial's value held up to the next trial."""
    xs = np.repeat(np.asarray(x, dtype=float), 2)[1:]
    ys = np.repeat(np.asarray(y, dtype=float), 2)[:-1]
    return xs, ys


class StudyReader:
    """One experiment's study, read from its Optuna storage without writing to it (see the module's docstring)."""

    def __init__(self) -> None:
        self._spec_source: dict[str, Any] | None = None
        self._spec: Any = None
        self._storage: Any = None
        self._studies: dict[str, Any] = {}  # contender label -> its loaded optuna study
        self._journal_size = -1

    def status(self, exp: Experiment) -> dict[str, Any] | None:
        """``study_status(exp)``'s dict; None while Optuna's storage has no study yet (the coordinator makes it)."""
        from mosaic.experiments.spec import parse_spec
        from mosaic.experiments.study.driver import config_values, quiet_optuna, storage_for
        from mosaic.experiments.study.space import JOURNAL, JOURNAL_FILE

        plan_study = exp.plan.study or {}
        storage = str(plan_study.get("storage", JOURNAL))
        if storage == JOURNAL:
            try:  # not made here: Optuna's journal backend creates a missing file
                size = (exp.root / JOURNAL_FILE).stat().st_size
            except OSError:
                return None
            if size < self._journal_size:  # a new journal (the experiment made again): read it afresh
                self._storage = None
            self._journal_size = size
        source = exp.spec
        if source != self._spec_source or self._storage is None:
            self._spec_source, self._storage, self._studies = source, storage_for(exp.root, storage), {}
            self._spec = parse_spec(source)
        study = self._spec.study
        assert study is not None, f"experiment {exp.name} is not a study"
        optuna = quiet_optuna()
        out = []
        for contender in plan_study.get("contenders", []):
            label, worker = str(contender["label"]), str(contender["worker"])
            loaded = self._studies.get(label)
            if loaded is None:
                try:  # the driver's name for it (StudyDriver.study_name); load_study never creates one
                    loaded = optuna.load_study(study_name=f"{exp.name}:{label}", storage=self._storage,
                                               sampler=optuna.samplers.RandomSampler())
                except KeyError:
                    return None
                self._studies[label] = loaded
            dims = study.for_worker(worker)
            trials = [{"number": t.number, "state": t.state.name, "value": None if t.value is None else float(t.value),
                       "params": config_values(dims, dict(t.params)),
                       **({"cause": str(t.user_attrs["cause"])} if t.user_attrs.get("cause") else {})}
                      for t in loaded.get_trials(deepcopy=False)]
            counts = {s: sum(t["state"] == s for t in trials) for s in ("RUNNING", "COMPLETE", "PRUNED", "FAIL")}
            best = None
            if counts["COMPLETE"]:
                b = loaded.best_trial
                best = {"trial": b.number, "value": float(b.value), "params": config_values(dims, dict(b.params))}
            out.append({"contender": label, "trials": study.trials, "asked": len(trials),
                        "running": counts["RUNNING"], "completed": counts["COMPLETE"], "pruned": counts["PRUNED"],
                        "failed": counts["FAIL"], "best": best, "trials_list": trials})
        phase = "testing" if any(c.trial is None for c in exp.plan.cells) else "tuning"
        return {"phase": phase, "contenders": out, "checked_at": time.time()}


def _table(columns: tuple[str, ...]) -> QTableWidget:
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(columns)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    table.horizontalHeader().setStretchLastSection(True)
    table.verticalHeader().setVisible(False)
    return table


class StudyPanel(QWidget):
    """A study's summary per contender, its trials, and each contender's best value so far against the trial."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.status: dict[str, Any] | None = None
        self.metric = "episode_return_mean"
        self.higher_is_better = True
        self.drawn: dict[str, dict[str, list[float]]] = {}  # contender -> {"x": trial numbers, "y": best so far}
        self._keys: list[tuple[int, int]] = []  # the trials table's rows: (contender index, trial number)
        self.title = QLabel("study")
        self.summary = _table(SUMMARY_COLUMNS)
        self.trials = _table(TRIAL_COLUMNS)
        self.plot = pg.PlotWidget(background="w")
        self.plot.showGrid(x=True, y=True, alpha=0.3)
        self.legend = self.plot.addLegend(offset=(10, 10))
        self.plot.setLabel("bottom", "trial")
        self.plot_status = QLabel()

        curves = QWidget()
        curves_box = QVBoxLayout(curves)
        curves_box.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("best so far"))
        row.addStretch(1)
        row.addWidget(self.plot_status)
        curves_box.addLayout(row)
        curves_box.addWidget(self.plot, 1)
        trials_and_curves = QSplitter()
        trials_and_curves.addWidget(self.trials)
        trials_and_curves.addWidget(curves)
        trials_and_curves.setSizes([500, 500])
        top = QSplitter(Qt.Orientation.Vertical)
        top.addWidget(self.summary)
        top.addWidget(trials_and_curves)
        top.setSizes([90, 400])
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.title)
        box.addWidget(top, 1)

    def clear(self) -> None:
        self.status = None
        self.summary.setRowCount(0)
        self.trials.setRowCount(0)
        self._keys = []
        self.title.setText("study")
        self.redraw()

    def configure(self, metric: str, higher_is_better: bool) -> None:
        self.metric = metric
        self.higher_is_better = higher_is_better

    def show_message(self, text: str) -> None:
        self.title.setText(text)

    def show_status(self, status: dict[str, Any]) -> None:
        """Show ``study_status``'s dict (only rows whose text changed are touched)."""
        self.status = status
        contenders = status["contenders"]
        self.title.setText(f"study: {status['phase']} · trials scored by the mean {self.metric} over the tuning "
                           f"seeds ({'higher' if self.higher_is_better else 'lower'} is better)")
        self.summary.setRowCount(len(contenders))
        for row, c in enumerate(contenders):
            best = c["best"]
            texts = (c["contender"], f"{c['asked']}/{c['trials']}", str(c["running"]), str(c["completed"]),
                     str(c["pruned"]), str(c["failed"]), value_text(best["value"]) if best else "-",
                     str(best["trial"]) if best else "-", params_text(best["params"]) if best else "")
            for col, text in enumerate(texts):
                self._set(self.summary, row, col, text)
            if best:
                self.summary.item(row, SUMMARY_COLUMNS.index("best so far")).setData(VALUE_ROLE, best["value"])
        trials = [(i, t) for i, c in enumerate(contenders) for t in sorted(c["trials_list"], key=lambda t: t["number"])]
        keys = [(i, t["number"]) for i, t in trials]
        if keys != self._keys:
            self.trials.setRowCount(0)
            self.trials.setRowCount(len(keys))
            self._keys = keys
        for row, (i, t) in enumerate(trials):
            texts = (contenders[i]["contender"], str(t["number"]), t["state"], value_text(t["value"]),
                     params_text(t["params"]))
            for col, text in enumerate(texts):
                self._set(self.trials, row, col, text)
            state = self.trials.item(row, TRIAL_COLUMNS.index("state"))
            state.setForeground(QColor(STATE_COLOURS.get(t["state"], "#000000")))
            state.setToolTip(t.get("cause", ""))
            self.trials.item(row, TRIAL_COLUMNS.index("value")).setData(VALUE_ROLE, t["value"])
        self.redraw()

    @staticmethod
    def _set(table: QTableWidget, row: int, col: int, text: str) -> None:
        item = table.item(row, col)
        if item is None:
            table.setItem(row, col, QTableWidgetItem(text))
        elif item.text() != text:
            item.setText(text)

    def fit_columns(self) -> None:
        if self.isVisible():
            self.summary.resizeColumnsToContents()
            self.trials.resizeColumnsToContents()

    def redraw(self) -> None:
        self.plot.clear()
        self.legend.clear()
        self.drawn = {}
        if self.status is None:
            self.plot_status.setText("no trials yet")
            return
        last = 0
        for n, c in enumerate(self.status["contenders"]):
            x, y = best_curve(c["trials_list"], self.higher_is_better)
            if not x:
                continue
            colour = pg.mkColor(PALETTE[n % len(PALETTE)])
            done = [(t["number"], t["value"]) for t in c["trials_list"]
                    if t["state"] == "COMPLETE" and t["value"] is not None]
            if done:  # each completed trial's own value
                self.plot.plot([d[0] for d in done], [d[1] for d in done], pen=None, symbol="o", symbolSize=6,
                               symbolPen=None, symbolBrush=pg.mkBrush(colour.red(), colour.green(), colour.blue(), 90))
            steps_x, steps_y = staircase(x, y)
            self.plot.plot(steps_x, steps_y, pen=pg.mkPen(colour, width=2), connect="finite", name=c["contender"])
            self.drawn[c["contender"]] = {"x": x, "y": y}
            last = max(last, x[-1])
        self.plot.setLabel("left", f"best {self.metric} so far")
        axis = self.plot.getPlotItem().getAxis("bottom")
        if last < 20:  # trial numbers: whole ones
            axis.setTickSpacing(5, 1)
        else:
            axis.setTickSpacing()
        completed = sum(c["completed"] for c in self.status["contenders"])
        self.plot_status.setText(f"{completed} completed trial(s); dots: each trial's value"
                                 if completed else "no completed trial yet")
