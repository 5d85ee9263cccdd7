"""The Experiments tab: an experiment folder made by the real store with real run folders, then a real grid
of the random worker run by `mosaic experiment run` through a real daemon, watched by the main window."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from PySide6.QtCore import Qt

from mosaic.clients.gui import experiments_view
from mosaic.clients.gui.drive import event_loop, inside, run, wait
from mosaic.clients.gui.experiments_view import COLUMNS, ExperimentsView
from mosaic.experiments.plan import make_plan
from mosaic.experiments.spec import parse_spec
from mosaic.experiments.store import ExperimentStore
from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb
from mosaic.runs import RunStore
from mosaic.scoring import stats

BASE = {"environment": {"family": "classic", "env_id": "tictactoe_v3"}, "total_timesteps": 100}


# -- an experiment folder made by the store, with run folders -----------------------------------------
def metrics(seq: int, steps: float, value: float) -> dict:
    return {"v": 1, "type": "metrics", "seq": seq, "ts": 1000.0 + seq, "iteration": seq, "timesteps_total": steps,
            "episode_return_mean": value, "learner": {"loss": 1.0}}


def lines(events: list[dict]) -> str:
    return "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events)


def curve_events(points: list[tuple[float, float]]) -> list[dict]:
    """Metrics events with an episode and a log line between them, as a worker writes them."""
    out: list[dict] = [{"v": 1, "type": "run_started", "seq": 0, "ts": 1000.0, "worker": "random"}]
    for x, y in points:
        seq = len(out)
        out.append({"v": 1, "type": "episode", "seq": seq, "ts": 1000.0 + seq, "episode": seq, "length": 9,
                    "returns": {"a": 1.0, "b": -1.0}, "timesteps_total": x})
        out.append({"v": 1, "type": "log", "seq": seq + 1, "level": "info", "message": "a log line"})
        out.append(metrics(seq + 2, x, y))
    return out


CURVES = {  # cell -> (env steps, metric) its run logged
    "c000": [(20, 1.0), (40, 2.0), (60, 4.0), (80, 5.0), (100, 7.0)],
    "c001": [(25, 0.0), (50, 3.0), (50, 2.5), (75, 3.0), (100, 8.0)],  # 50 logged again (resumed): the later wins
    "c002": [(20, -1.0), (40, 1.0), (60, 1.5), (80, 2.0), (100, 2.5)],
    "c003": [(20, 3.0), (40, 6.0), (60, 9.0)],  # still running
    "c005": [(20, 50.0), (40, 60.0)],  # failed attempts: not in the curves
    "c008": [(10, 1.0), (20, 2.0), (30, 3.0)],
    "c009": [(10, 3.0), (20, 2.0), (30, 5.0)],
}


@pytest.fixture
def grid(tmp_path):
    """16 cells: 2 configurations × 2 envs × 4 seeds, in every state the journal can give a cell."""
    home = tmp_path / "home"
    spec = parse_spec({"name": "grid", "base": {"random": BASE}, "retries": 1, "seeds": 4,
                       "axes": {"environment.env_id": ["tictactoe_v3", "connect_four_v3"], "step_delay_s": [0.0, 0.01]}})
    exp = ExperimentStore(home).create(make_plan(spec, validate=False), spec.source)
    runs = RunStore(home)

    def attempt(cell: str, n: int, *ended: str, cause: str = "", points=None) -> str:
        run_id = f"grid-{cell}-a{n}"
        exp.log("submitted", cell=cell, run_id=run_id, attempt=n)
        if ended == ("running",):
            exp.log("running", cell=cell, run_id=run_id, state="running")
        elif ended:
            exp.log("ended", cell=cell, run_id=run_id, state=ended[0], cause=cause)
        if points is not None:
            run = runs.create(run_id, exp.plan.cell(cell).config, {"worker": "random"})
            run.telemetry_path.write_text(lines(curve_events(points)))
        return run_id

    for cell in ("c000", "c001", "c002", "c008", "c009"):
        attempt(cell, 1, "completed", points=CURVES[cell])
    attempt("c003", 1, "running", points=CURVES["c003"])
    attempt("c004", 1, "failed", cause="worker exited with 1")
    attempt("c004", 2)  # the retry, queued
    attempt("c005", 1, "failed", cause="boom", points=CURVES["c005"])
    attempt("c005", 2, "failed", cause="boom again", points=CURVES["c005"])
    attempt("c006", 1, "cancelled", cause="experiment cancelled")
    return home, exp


def column(view: ExperimentsView, name: str) -> list[str]:
    return [view.table.item(r, COLUMNS.index(name)).text() for r in range(view.table.rowCount())]


def independent(cells: list[str], points=None) -> tuple[list[float], np.ndarray]:
    """The cells' curves on the env steps all of them cover, interpolated with numpy: (x, values (runs, x))."""
    curves = []
    for cell in cells:
        by_x = dict(points[cell] if points else CURVES[cell])  # a repeated x: its later value
        curves.append((sorted(by_x), [by_x[x] for x in sorted(by_x)]))
    lo, hi = max(xs[0] for xs, _ in curves), min(xs[-1] for xs, _ in curves)
    grid = sorted({x for xs, _ in curves for x in xs if lo <= x <= hi})
    return grid, np.array([np.interp(grid, xs, ys) for xs, ys in curves])


def double_click(view: ExperimentsView, at) -> None:
    """A user's double-click: press and release, then Qt's double-click event (QTest's alone is not one)."""
    from PySide6.QtTest import QTest

    QTest.mouseClick(view.table.viewport(), Qt.MouseButton.LeftButton, pos=at)
    QTest.mouseDClick(view.table.viewport(), Qt.MouseButton.LeftButton, pos=at)


def by_configuration(view: ExperimentsView) -> dict[str, dict]:
    return {d["configuration"]: d for d in view.drawn}


def test_the_grid_its_counts_and_curves_from_the_store(qtbot, grid):
    home, exp = grid
    ExperimentStore(home).create(make_plan(parse_spec({"name": "another", "base": {"random": BASE}, "seeds": 1}),
                                           validate=False), {})
    staged = home / "experiments" / ".staged.123.456"  # an experiment being created: not listed yet
    staged.mkdir()
    (staged / "plan.json").write_text((exp.root / "plan.json").read_text())
    view = ExperimentsView(home)
    qtbot.addWidget(view)
    view.resize(1100, 800)
    view.show()
    qtbot.waitExposed(view)
    assert [view.list.item(i).text() for i in range(view.list.count())] == ["another", "grid"]
    view.select("grid")
    assert view.exp.name == "grid"
    assert column(view, "cell") == [f"c{i:03d}" for i in range(16)]
    assert column(view, "env")[:8] == ["tictactoe_v3"] * 8 and column(view, "env")[8:] == ["connect_four_v3"] * 8
    assert column(view, "configuration")[:4] == ["step_delay_s=0.0"] * 4
    assert column(view, "seed")[:4] == ["0", "1", "2", "3"]
    assert column(view, "state")[:8] == ["completed", "completed", "completed", "running", "queued (retry 1 of 1)",
                                         "failed", "cancelled", "pending"]
    assert column(view, "attempts")[:8] == ["1", "1", "1", "1", "2", "2", "1", "0"]
    assert column(view, "run")[3:8] == ["grid-c003-a1", "grid-c004-a2", "grid-c005-a2", "grid-c006-a1", "-"]
    assert column(view, "last cause")[4:7] == ["worker exited with 1", "boom again", "experiment cancelled"]
    assert view.counts == {"done": 5, "running": 1, "waiting": 8, "failed": 1, "cancelled": 1}
    assert view.counts_label.text().startswith("5/16 done · 1 running · 8 waiting · 1 failed · 1 cancelled")

    # curves: each configuration's IQM over its running and completed runs, with the bootstrap band
    assert view.env.isVisibleTo(view) and view.env.currentText() == "tictactoe_v3"
    drawn = by_configuration(view)
    assert list(drawn) == ["step_delay_s=0.0"]  # the other configuration's runs failed or have not started
    x, values = independent(["c000", "c001", "c002", "c003"])
    assert x == [25, 40, 50, 60]
    middle = np.sort(values, axis=0)[1:3]  # the IQM of 4 runs: the mean of the middle two
    band = drawn["step_delay_s=0.0"]
    assert band["x"] == x and band["runs"] == 4 and band["statistic"] == "IQM"
    assert np.allclose(band["y"], middle.mean(axis=0), rtol=0, atol=1e-12)
    _point, low, high = stats.curve_intervals(values[:, None, :], stats.iqm, 2000, 0.95,
                                              stats.derived_seed("curve:tictactoe_v3:step_delay_s=0.0", 0))
    assert np.allclose(band["low"], low, atol=1e-12) and np.allclose(band["high"], high, atol=1e-12)
    assert all(lo <= y <= hi for lo, y, hi in zip(band["low"], band["y"], band["high"]))
    assert view.plot.getPlotItem().getAxis("left").labelText == "IQM of episode_return_mean"
    view.env.setCurrentText("connect_four_v3")
    x, values = independent(["c008", "c009"])
    band = by_configuration(view)["step_delay_s=0.0"]
    assert band["x"] == x == [10, 20, 30] and band["runs"] == 2
    assert np.allclose(band["y"], values.mean(axis=0), atol=1e-12)  # IQM of 2 runs: their mean
    view.env.setCurrentText("tictactoe_v3")

    # the running cell's run writes more (its last line torn for a moment): read on from where the view stopped
    telemetry = RunStore(home).get("grid-c003-a1").telemetry_path
    more = lines([metrics(100, 80, 12.0), metrics(101, 100, 15.0)])
    offset = view.tails["grid-c003-a1"].offset
    with telemetry.open("a") as fh:
        fh.write(more[:30])
    view.refresh()
    assert view.tails["grid-c003-a1"].offset == offset  # half a line is left for later
    with telemetry.open("a") as fh:
        fh.write(more[30:])
    view.refresh()
    longer = {**CURVES, "c003": CURVES["c003"] + [(80, 12.0), (100, 15.0)]}
    x, values = independent(["c000", "c001", "c002", "c003"], longer)
    band = by_configuration(view)["step_delay_s=0.0"]
    assert band["x"] == x == [25, 40, 50, 60, 75, 80, 100]
    assert np.allclose(band["y"], np.sort(values, axis=0)[1:3].mean(axis=0), atol=1e-12)

    # the daemon's run states make cells live at once; the journal, read again when it grew, wins for ended ones
    view.update_run(pb.RunInfo(run_id="grid-c003-a1", state=pb.RunState.Value("COMPLETED")))
    view.update_run(pb.RunInfo(run_id="grid-c004-a2", state=pb.RunState.Value("RUNNING")))
    assert column(view, "state")[3:5] == ["completed", "running (retry 1 of 1)"]
    assert view.counts == {"done": 6, "running": 1, "waiting": 7, "failed": 1, "cancelled": 1}
    exp.log("ended", cell="c004", run_id="grid-c004-a2", state="failed", cause="out of memory")
    exp.log("submitted", cell="c007", run_id="grid-c007-a1", attempt=1)
    view.refresh()
    assert column(view, "state")[4:8] == ["failed", "failed", "cancelled", "queued"]
    assert column(view, "last cause")[4] == "out of memory" and column(view, "run")[7] == "grid-c007-a1"
    assert view.counts == {"done": 6, "running": 0, "waiting": 7, "failed": 2, "cancelled": 1}

    # double-click on a cell with a run asks for that run's view; on a cell without one, nothing
    opened: list[str] = []
    view.open_run.connect(opened.append)
    for row in (1, 10):
        view.table.scrollToItem(view.table.item(row, 0))
        rect = view.table.visualItemRect(view.table.item(row, COLUMNS.index("state")))
        double_click(view, rect.center())
    assert opened == ["grid-c001-a1"]
    view.close_view()


def test_a_long_backlog_is_read_in_slices_and_an_overlong_line_is_skipped(qtbot, grid, monkeypatch):
    home, _exp = grid
    monkeypatch.setattr(experiments_view, "READ_BUDGET", 400)
    monkeypatch.setattr(experiments_view, "READ_LIMIT", 400)
    telemetry = RunStore(home).get("grid-c002-a1").telemetry_path
    huge = {**metrics(90, 110, 99.0), "padding": "x" * 1000}  # longer than a whole read: dropped
    with telemetry.open("a") as fh:
        fh.write(lines([huge, metrics(91, 120, 3.0)]))
    view = ExperimentsView(home)
    qtbot.addWidget(view)
    view.select("grid")
    assert sum(t.offset for t in view.tails.values()) <= 400  # one slice, then the event loop gets a turn
    sizes = {run_id: t.path.stat().st_size for run_id, t in view.tails.items()}
    qtbot.waitUntil(lambda: {r: t.offset for r, t in view.tails.items()} == sizes, timeout=20_000)
    assert view.tails["grid-c002-a1"].xs == [20, 40, 60, 80, 100, 120]
    x, values = independent(["c000", "c001", "c002", "c003"])
    band = by_configuration(view)["step_delay_s=0.0"]
    assert band["x"] == x and np.allclose(band["y"], np.sort(values, axis=0)[1:3].mean(axis=0), atol=1e-12)
    view.close_view()


# -- live: `mosaic experiment run` through a real daemon, the window watching ----------------------------
def test_a_live_experiment_goes_to_completed_in_the_window(qapp, tmp_path):
    from mosaic.clients.gui.main_window import MainWindow
    from mosaic.clients.gui.run_view import RunView
    from mosaic.host.daemon.endpoint import find_daemon
    from mosaic.testing.waiting import wait_until

    home = tmp_path / "home"
    home.mkdir()
    metric = "agent_episode_returns_mean.player_1"
    spec = tmp_path / "live.json"
    spec.write_text(json.dumps({"name": "live", "seeds": 2, "score": {"metric": metric}, "base": {"random": {
        "environment": {"family": "classic", "env_id": "tictactoe_v3"}, "total_timesteps": 200,
        "step_delay_s": 0.06, "reporting": {"every_timesteps": 20}}}}))  # 12 s: the window, started on a
    # loaded machine, still sees the runs before they complete
    env = {**os.environ, "MOSAIC_HOME": str(home)}
    log = tmp_path / "experiment.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mosaic", "experiment", "run", str(spec)], env=env,
                                stdout=out, stderr=subprocess.STDOUT)
    loop = event_loop(qapp)
    window = None
    try:
        endpoint = wait_until(lambda: find_daemon(home), 120, "the daemon the experiment starts", proc=proc)
        window = MainWindow(home)
        window.resize(1200, 800)
        window.show()
        run(loop, window.start())
        assert f"daemon pid {endpoint.pid}" in window.daemon_label.text()  # the experiment's daemon

        async def scenario():
            view = window.experiments
            window.tabs.setCurrentWidget(view)
            assert window.tabs.tabText(window.tabs.indexOf(view)) == "Experiments"
            assert window.tabs.indexOf(view) == window.tabs.indexOf(window.compare) + 1
            assert window.tabs.tabBar().tabButton(window.tabs.indexOf(view),
                                                  window.tabs.tabBar().ButtonPosition.RightSide) is None
            await wait(lambda: view.exp is not None and view.exp.name == "live", "the experiment listed")
            seen: list[tuple[str, ...]] = []

            def all_completed() -> bool:
                states = tuple(column(view, "state"))
                if not seen or seen[-1] != states:
                    seen.append(states)
                return states == ("completed", "completed")

            await wait(all_completed, "both cells completed in the view", timeout=120)
            assert any(s in ("pending", "queued", "running") for states in seen for s in states), seen
            assert view.counts == {"done": 2, "running": 0, "waiting": 0, "failed": 0, "cancelled": 0}
            assert column(view, "run") == ["live-c000-a1", "live-c001-a1"]
            # the curves, read from the run folders once both runs ended, equal their own computation
            await wait(lambda: all(t.finished for t in view.tails.values()) and len(view.tails) == 2
                       and view.drawn and view.drawn[0]["runs"] == 2, "both runs' curves read to the end")
            runs = RunStore(home)
            curves = []
            for run_id in ("live-c000-a1", "live-c001-a1"):
                events = [json.loads(line) for line in runs.get(run_id).telemetry_path.read_text().splitlines()]
                points = [e for e in events if e["type"] == "metrics"]
                curves.append(([p["timesteps_total"] for p in points],
                               [p["agent_episode_returns_mean"]["player_1"] for p in points]))
            lo, hi = max(xs[0] for xs, _ in curves), min(xs[-1] for xs, _ in curves)
            x = sorted({v for xs, _ in curves for v in xs if lo <= v <= hi})
            values = np.array([np.interp(x, xs, ys) for xs, ys in curves])
            (band,) = view.drawn
            assert band["configuration"] == "default" and band["x"] == x
            assert np.allclose(band["y"], values.mean(axis=0), atol=1e-12)
            assert view.plot.getPlotItem().getAxis("left").labelText == f"IQM of {metric}"
            assert not view.env.isVisibleTo(view)  # one env: no env to choose
            # a double-click on a cell opens its run's view, as the runs table does
            double_click(view, view.table.visualItemRect(view.table.item(1, 0)).center())
            opened = window.tabs.currentWidget()
            assert isinstance(opened, RunView) and opened.run_id == "live-c001-a1"
            await wait(lambda: opened.curves.points, "the run view's curves")

        inside(loop, scenario)
        assert proc.wait(120) == 0, log.read_text(errors="replace")[-2000:]
        assert window.tracebacks == []
    finally:
        if window is not None:
            try:
                run(loop, window.stop())
            finally:
                window.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        endpoint = find_daemon(home)  # the daemon the experiment started: stopped, and gone
        if endpoint is not None:
            os.kill(endpoint.pid, signal.SIGTERM)
            wait_until(lambda: find_daemon(home) is None, 60, "the experiment's daemon to stop")
        asyncio.set_event_loop(None)
        loop.close()  # now, while the QApplication it is bound to still exists
