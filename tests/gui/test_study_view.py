"""The Experiments tab on a tuning study: a real small study of the random worker run by `mosaic experiment run`
through a real daemon, watched by the view as it goes; its trials, summary and best-so-far curve against what
`mosaic experiment status` reads (``study_status``), and cells the journal adds after the view opened."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mosaic.clients.gui.experiments_view import COLUMNS, ExperimentsView
from mosaic.clients.gui.study_panel import SUMMARY_COLUMNS, TRIAL_COLUMNS, VALUE_ROLE, params_text, value_text
from mosaic.experiments.plan import make_plan
from mosaic.experiments.spec import parse_spec
from mosaic.experiments.store import ExperimentStore
from mosaic.experiments.study.describe import study_status
from mosaic.experiments.study.space import JOURNAL_FILE
from mosaic.scoring.expected_best import best_so_far

SPEC = {"name": "gui-study", "seeds": [0, 1, 2, 3, 4], "base": {"random": {
    "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL"},
    "total_timesteps": 200, "reporting": {"every_timesteps": 25}}},
    "tuning": {"space": {"max_episode_steps": {"type": "int", "low": 5, "high": 25}}, "trials": 4,
               "seeds": [10, 11], "sampler": {"name": "random", "seed": 0}}}
TUNING_CELLS = [f"k0t{t:03d}s{s}" for t in range(4) for s in range(2)]
TEST_CELLS = [f"c{i:03d}" for i in range(5)]


class Study:
    """`mosaic experiment run` of :data:`SPEC` in its own home, started once for the module."""

    def __init__(self, home: Path, proc: subprocess.Popen, log: Path) -> None:
        self.home, self.proc, self.log = home, proc, log

    def finished(self) -> None:
        assert self.proc.wait(180) == 0, self.log.read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    from mosaic.host.daemon.endpoint import find_daemon
    from mosaic.testing.waiting import wait_until

    root = tmp_path_factory.mktemp("study")
    home = root / "home"
    home.mkdir()
    spec = root / "study.json"
    spec.write_text(json.dumps(SPEC))
    log = root / "experiment.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mosaic", "experiment", "run", str(spec)],
                                env={**os.environ, "MOSAIC_HOME": str(home)}, stdout=out, stderr=subprocess.STDOUT)
    try:
        yield Study(home, proc, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        endpoint = find_daemon(home)  # the daemon the experiment started: stopped, and gone
        if endpoint is not None:
            os.kill(endpoint.pid, signal.SIGTERM)
            wait_until(lambda: find_daemon(home) is None, 60, "the experiment's daemon to stop")


def column(table, columns: tuple[str, ...], name: str) -> list[str]:
    return [table.item(r, columns.index(name)).text() for r in range(table.rowCount())]


def trial_rows(view: ExperimentsView) -> list[dict]:
    t = view.study_panel.trials
    return [{"contender": t.item(r, 0).text(), "number": int(t.item(r, 1).text()), "state": t.item(r, 2).text(),
             "value": t.item(r, TRIAL_COLUMNS.index("value")).data(VALUE_ROLE),
             "value_text": t.item(r, TRIAL_COLUMNS.index("value")).text(), "params": t.item(r, 4).text()}
            for r in range(t.rowCount())]


def assert_shows(view: ExperimentsView, status: dict) -> None:
    """The panel's summary, trials and best-so-far curve say what ``study_status`` says."""
    (contender,) = status["contenders"]
    summary = view.study_panel.summary
    assert summary.rowCount() == 1
    best = contender["best"]
    assert [summary.item(0, c).text() for c in range(len(SUMMARY_COLUMNS))] == [
        "default", f"{contender['asked']}/4", str(contender["running"]), str(contender["completed"]),
        str(contender["pruned"]), str(contender["failed"]), value_text(best["value"]) if best else "-",
        str(best["trial"]) if best else "-", params_text(best["params"]) if best else ""]
    trials = sorted(contender["trials_list"], key=lambda t: t["number"])
    assert trial_rows(view) == [{"contender": "default", "number": t["number"], "state": t["state"],
                                 "value": t["value"], "value_text": value_text(t["value"]),
                                 "params": params_text(t["params"])} for t in trials]
    values = [t["value"] if t["state"] == "COMPLETE" else math.nan for t in trials]
    expected = best_so_far(values, SPEC.get("score", {}).get("higher_is_better", True))
    curve = view.study_panel.drawn["default"]
    assert curve["x"] == [t["number"] for t in trials]
    np.testing.assert_array_equal(np.asarray(curve["y"], dtype=float), expected)  # NaN where none completed yet


def test_the_view_follows_a_study_as_it_runs_and_shows_its_trials_and_best_so_far(qtbot, study):
    view = ExperimentsView(study.home)
    qtbot.addWidget(view)
    view.resize(1200, 900)
    view.show()
    qtbot.waitExposed(view)
    # the view lists the experiment as soon as its folder is there; the cells come as the driver adds them
    qtbot.waitUntil(lambda: view.exp is not None and view.exp.name == "gui-study", timeout=120_000)
    assert view.study_panel.isVisibleTo(view)
    seen: list[tuple[int, str]] = []

    def ended() -> bool:
        rows = (view.table.rowCount(), view.study_panel.status["phase"] if view.study_panel.status else "")
        if not seen or seen[-1] != rows:
            seen.append(rows)
        return (study.proc.poll() is not None and view.table.rowCount() == 13
                and column(view.table, COLUMNS, "state") == ["completed"] * 13
                and view.study_panel.status is not None
                and view.study_panel.status["contenders"][0]["completed"] == 4)

    qtbot.waitUntil(ended, timeout=180_000)  # the view's own timer reads the journal as it grows
    study.finished()
    # the view had the study before its end (the daemon it starts takes seconds), and its rows were only added
    assert seen[0][0] < 13 and [n for n, _ in seen] == sorted(n for n, _ in seen), seen
    assert column(view.table, COLUMNS, "cell") == TUNING_CELLS + TEST_CELLS
    assert column(view.table, COLUMNS, "seed") == ["10", "11"] * 4 + ["0", "1", "2", "3", "4"]
    assert column(view.table, COLUMNS, "run") == [f"gui-study-{c}-a1" for c in TUNING_CELLS + TEST_CELLS]
    assert view.counts == {"done": 13, "running": 0, "waiting": 0, "failed": 0, "cancelled": 0}

    exp = ExperimentStore(study.home).get("gui-study")
    status = study_status(exp)
    assert status["phase"] == "testing" and view.study_panel.status["phase"] == "testing"
    (contender,) = status["contenders"]
    assert [t["state"] for t in contender["trials_list"]] == ["COMPLETE"] * 4
    assert all(isinstance(t["value"], float) for t in contender["trials_list"])
    assert_shows(view, status)
    best = contender["best"]
    assert view.study_panel.drawn["default"]["y"][-1] == best["value"]  # the curve ends at the best trial's value
    assert view.study_panel.plot.getPlotItem().getAxis("bottom").labelText == "trial"
    legend = [label.text for _sample, label in view.study_panel.legend.items]
    assert legend == ["default"]

    header = view.header.text()
    assert header.startswith("gui-study: a tuning study: 1 contender(s) × 4 trials × 2 tuning seed(s) (random "
                             "search, pruner none), then each contender's best trial on 5 test seed(s); testing, "
                             "13 cells so far")
    assert "configuration(s) ×" not in header
    # the learning curves: every trial's runs apart from the best trial's runs on the test seeds
    qtbot.waitUntil(lambda: {d["configuration"]: d["runs"] for d in view.drawn}
                    == {"default (tuning trials)": 8, "default": 5}, timeout=30_000)
    view.close_view()


def test_cells_and_trials_journaled_after_the_view_opened_appear(qtbot, study, tmp_path):
    """The study's journal replayed in two parts: up to the end of tuning, then the test cells and their runs."""
    study.finished()
    home = tmp_path / "home"
    shutil.copytree(study.home / "experiments", home / "experiments")
    shutil.copytree(study.home / "trainer" / "runs", home / "trainer" / "runs")
    root = home / "experiments" / "gui-study"
    journal = root / "journal.jsonl"
    lines = journal.read_text().splitlines(keepends=True)
    first_test = next(i for i, line in enumerate(lines) if json.loads(line).get("event") == "cell_added"
                      and json.loads(line)["cell"]["cell_id"] == "c000")
    journal.write_text("".join(lines[:first_test]))
    optuna_journal = (root / JOURNAL_FILE).read_bytes()
    # what `mosaic experiment status` says of the study (read from the first home: it writes to Optuna's journal)
    status = study_status(ExperimentStore(study.home).get("gui-study"))

    view = ExperimentsView(home)
    qtbot.addWidget(view)
    view.resize(1200, 900)
    view.show()
    qtbot.waitExposed(view)
    view.select("gui-study")
    assert column(view.table, COLUMNS, "cell") == TUNING_CELLS
    assert view.study_panel.status["phase"] == "tuning"
    assert "; tuning, 8 cells so far" in view.header.text()
    assert_shows(view, status)
    assert [d["configuration"] for d in view.drawn] == ["default (tuning trials)"]

    with journal.open("a") as fh:
        fh.write("".join(lines[first_test:]))
    qtbot.waitUntil(lambda: view.table.rowCount() == 13, timeout=10_000)  # the view's timer sees the journal grow
    assert column(view.table, COLUMNS, "cell") == TUNING_CELLS + TEST_CELLS
    assert column(view.table, COLUMNS, "state") == ["completed"] * 13
    assert view.study_panel.status["phase"] == "testing"
    assert "; testing, 13 cells so far" in view.header.text()
    assert_shows(view, status)
    qtbot.waitUntil(lambda: [d["runs"] for d in view.drawn] == [8, 5], timeout=30_000)
    view.close_view()
    assert (root / JOURNAL_FILE).read_bytes() == optuna_journal  # the view read Optuna's journal, never wrote it


def test_a_study_before_its_first_trial_and_a_grid_without_the_study_panel(qtbot, tmp_path):
    home = tmp_path / "home"
    store = ExperimentStore(home)
    spec = parse_spec(SPEC)
    store.create(make_plan(spec, validate=False), spec.source)
    grid = parse_spec({"name": "grid", "base": {"random": {"environment": {"family": "classic",
                                                                           "env_id": "tictactoe_v3"}}}, "seeds": 2})
    store.create(make_plan(grid, validate=False), grid.source)
    view = ExperimentsView(home)
    qtbot.addWidget(view)
    view.show()
    qtbot.waitExposed(view)
    view.select("gui-study")
    assert view.table.rowCount() == 0 and view.study_panel.isVisibleTo(view)
    assert view.study_panel.title.text() == "study: no trial asked yet"
    assert "no trial yet, 0 cells so far" in view.header.text()
    assert not (view.exp.root / JOURNAL_FILE).exists()  # the view does not make Optuna's journal
    view.select("grid")
    assert not view.study_panel.isVisibleTo(view)
    assert view.header.text().startswith("grid: 2 cells, 1 configuration(s) × 1 env(s) × 2 seed(s), a failed cell "
                                         "retried up to")
    assert column(view.table, COLUMNS, "cell") == ["c000", "c001"]
    view.close_view()
