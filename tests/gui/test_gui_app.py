"""The GUI against a real daemon and real runs: catalog, form → run, errors, controls, curves, frames, compare.

One daemon serves the module's MOSAIC_HOME; the window starts it itself, as
`mosaic gui` does when no daemon serves the home.
"""

from __future__ import annotations

import asyncio
import csv
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mosaic.clients.gui.drive import close_window, event_loop, fill, inside, run, share_of_colour, stop_daemon, submit, wait
from mosaic.host.discovery import discover_workers
from mosaic.clients.gui.main_window import MainWindow
from mosaic.clients.gui.run_view import PALETTE

TERMINAL = {"COMPLETED", "FAILED", "CANCELLED"}


@pytest.fixture(scope="module")
def loop(qapp):
    loop = event_loop(qapp)
    yield loop
    asyncio.set_event_loop(None)
    loop.close()  # now, while the QApplication it is bound to exists: at exit its __del__ could not close it


@pytest.fixture(scope="module")
def gui(loop, tmp_path_factory):
    home = tmp_path_factory.mktemp("gui-home")
    old = os.environ.get("MOSAIC_HOME")
    os.environ["MOSAIC_HOME"] = str(home)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    window = MainWindow(home)
    window.resize(1200, 800)
    window.show()
    try:
        run(loop, window.start())
        yield window
    finally:
        close_window(loop, window, home)
        if old is None:
            os.environ.pop("MOSAIC_HOME", None)
        else:
            os.environ["MOSAIC_HOME"] = old


@pytest.fixture(autouse=True)
def no_background_errors(gui):
    """A call the window made in the background (a task) must not have failed unseen."""
    yield
    tracebacks = list(gui.tracebacks)
    gui.errors.clear()
    gui.tracebacks.clear()
    assert tracebacks == []


def state(gui, run_id):
    return gui.runs.state_of(run_id)


def fill_random(gui, **values):
    return fill(gui, "random", **values)


def in_loop(test):
    """Run an ``async def`` test with the window's loop running (mosaic.clients.gui.drive.inside)."""

    @functools.wraps(test)
    def sync(*args, **kwargs):
        return inside(kwargs["loop"], lambda: test(*args, **kwargs))

    return sync


def test_the_catalog_lists_the_installed_workers(gui):
    """As discovery sees them in this home: workers needing an environment of their own are broken here."""
    found = discover_workers()
    shown = [gui.catalog.table.item(r, 0).text() for r in range(gui.catalog.table.rowCount())]
    assert shown == [w.name for w in found.workers] + [f"{b.name} (broken)" for b in found.broken]
    assert {"random", "ray"} <= {w.name for w in found.workers}
    for worker in found.workers:
        row = shown.index(worker.name)
        assert gui.catalog.table.item(row, 1).text() == worker.metadata.upstream_library
        assert gui.catalog.table.item(row, 3).text() == ", ".join(worker.capabilities.algorithms)
    assert "ppo" in gui.catalog.table.item(shown.index("ray"), 3).text()
    for broken in found.broken:
        reason = gui.catalog.table.item(shown.index(f"{broken.name} (broken)"), 1).text()
        assert reason == broken.reason and reason
    assert "started a daemon" in gui.daemon_label.text()


@in_loop
async def test_a_filled_form_starts_a_run_that_completes(gui, loop):
    form = await fill_random(gui, **{"environment.family": "mpe", "environment.env_id": "simple_spread_v3",
                                     "environment.api_type": "PARALLEL", "total_timesteps": 400,
                                     "reporting.every_timesteps": 100, "seed": 3})
    assert form.fields["environment.env_id"].value() == "simple_spread_v3"
    assert "total_timesteps" in form.changed_paths()
    shot = gui.new_run.grab()
    assert shot.width() > 100 and share_of_colour(shot.toImage(), "#000000", 60) > 0.001  # the form's text drawn
    new = await submit(gui)
    assert isinstance(new, set), gui.new_run.error.text()
    (run_id,) = new
    await wait(lambda: state(gui, run_id) in TERMINAL, "the run to end")
    assert state(gui, run_id) == "COMPLETED"
    config = json.loads((Path(gui.runs.runs[run_id].run_dir) / "config.json").read_text())
    assert config["total_timesteps"] == 400 and config["environment"]["env_id"] == "simple_spread_v3"
    await wait(lambda: gui.runs.table.cellWidget(gui.runs.row_of(run_id), 5).value() == 1000, "a full progress bar")


@in_loop
async def test_a_bad_value_shows_its_field_named_error_and_submits_nothing(gui, loop):
    form = await fill_random(gui, **{"environment.family": "mpe", "environment.env_id": "simple_sprod_v3"})
    before = set(gui.runs.runs)
    listed = len(await gui.client.list())
    result = await submit(gui)
    assert isinstance(result, str) and "environment.env_id" in result
    assert "simple_sprod_v3" in form.errors().get("environment.env_id", "") or \
        "simple_sprod_v3" in gui.new_run.error.text()
    assert form.fields["environment.env_id"].error.isVisibleTo(form)
    assert set(gui.runs.runs) == before and len(await gui.client.list()) == listed


@in_loop
async def test_advanced_json_edits_the_same_config(gui, loop):
    form = await fill_random(gui)
    data = json.loads(gui.new_run.json.toPlainText())
    assert data["worker"] == "random" and data == gui.new_run.config()
    data["seed"] = 11
    gui.new_run.json.setPlainText(json.dumps(data))
    assert gui.new_run.apply_json() and form.value()["seed"] == 11
    data["seed"] = -1  # the schema's minimum is 0: refused before it reaches the form
    gui.new_run.json.setPlainText(json.dumps(data))
    assert not gui.new_run.apply_json()
    assert gui.new_run.json_error.text().startswith("seed:") and form.value()["seed"] == 11


@in_loop
async def test_pause_resume_and_cancel_from_the_buttons(gui, loop):
    await fill_random(gui, **{"environment.family": "mpe", "environment.env_id": "simple_spread_v3",
                              "environment.api_type": "PARALLEL", "total_timesteps": 10_000_000,
                              "reporting.every_timesteps": 200, "step_delay_s": 0.002})
    (run_id,) = await submit(gui)
    await wait(lambda: state(gui, run_id) == "RUNNING", "RUNNING")
    gui.runs.select(run_id)
    for verb, expected in (("pause", "PAUSED"), ("resume", "RUNNING"), ("cancel", "CANCELLED")):
        await wait(lambda v=verb: gui.runs.buttons[v].isEnabled(), f"the {verb} button")
        gui.runs.buttons[verb].click()
        await wait(lambda e=expected: state(gui, run_id) == e, expected)


async def _curve_and_frames(gui, run_id):
    view = gui.open_run(run_id)
    await wait(lambda: view.curves_panel.points("episode_return_mean") >= 2, "two points on the curve")
    first = view.curves_panel.points("episode_return_mean")
    await wait(lambda: view.curves_panel.points("episode_return_mean") > first + 1, "the curve to grow")
    view.tabs.setCurrentWidget(view.curves_panel)
    shot = view.curves_panel.plot.grab().toImage()
    assert share_of_colour(shot, PALETTE[0], 30) > 0.0005  # the curve is drawn in its colour

    view.tabs.setCurrentWidget(view.frames)
    await wait(lambda: view.frames.frames_shown >= 3, "live frames")
    frame = view.frames.image.grab().toImage()
    assert share_of_colour(frame, "#000000", 10) < 0.95  # not a blank picture
    assert "episode" in view.frames.caption.text() and "piston_0" in view.frames.caption.text()


@in_loop
async def test_the_run_view_curve_gains_points_while_the_run_trains_and_frames_appear(gui, loop):
    await fill_random(gui, **{"environment.family": "butterfly", "environment.env_id": "pistonball_v6",
                              "environment.api_type": "PARALLEL",
                              "environment.env_kwargs": {"n_pistons": 3, "max_cycles": 30},
                              "total_timesteps": 100_000, "reporting.every_timesteps": 30, "step_delay_s": 0.01,
                              "fastlane.enabled": True, "fastlane.fps": 30})
    (run_id,) = await submit(gui)
    try:
        await _curve_and_frames(gui, run_id)
    finally:  # after a failed check too: a half-hour run would hold the daemon's slot for the tests after this one
        await gui.client.control("cancel", run_id, wait_s=60)
    await wait(lambda: state(gui, run_id) in TERMINAL, "the cancel")


@in_loop
async def test_compare_overlays_two_runs_and_groups_them(gui, loop, tmp_path):
    ids = []
    for seed in (1, 2):
        await fill_random(gui, **{"environment.family": "mpe", "environment.env_id": "simple_spread_v3",
                                  "environment.api_type": "PARALLEL", "total_timesteps": 500,
                                  "reporting.every_timesteps": 100, "seed": seed})
        new = await submit(gui)
        assert len(new) == 1, (new, {r: gui.runs.state_of(r) for r in new})
        ids.append(new.pop())
    await wait(lambda: all(state(gui, r) == "COMPLETED" for r in ids), "both runs")
    gui.tabs.setCurrentWidget(gui.compare)
    gui.compare.check(ids)
    await wait(lambda: all(r in gui.compare.history for r in ids), "both histories")
    assert [d["label"].split()[0] for d in gui.compare.drawn] == ids
    assert all(len(d["x"]) == 5 for d in gui.compare.drawn)
    gui.compare.group_by.setText("environment.env_id")
    gui.compare.redraw()
    (band,) = gui.compare.drawn
    assert band["label"].endswith("(n=2)") and all(lo <= m <= hi for lo, m, hi in
                                                   zip(band["low"], band["y"], band["high"]))
    assert gui.compare.export_png(tmp_path / "c.png") and (tmp_path / "c.png").stat().st_size > 1000
    gui.compare.export_csv(tmp_path / "c.csv")
    rows = list(csv.reader((tmp_path / "c.csv").open()))
    assert rows[0][0] == "series" and len(rows) == 1 + len(band["x"])
    gui.compare.group_by.setText("")
    gui.compare.redraw()


@in_loop
async def test_fork_loads_a_runs_config_and_offers_its_checkpoints(gui, loop):
    completed = [r for r, info in gui.runs.runs.items() if gui.runs.state_of(r) == "COMPLETED"]
    assert completed
    gui.runs.select(completed[0])
    gui.runs.buttons["fork"].click()
    await wait(lambda: gui.new_run.checkpoint.count() > 1, "the checkpoints offered")
    gui.new_run.checkpoint.setCurrentIndex(gui.new_run.checkpoint.count() - 1)
    config = gui.new_run.config()
    restore = config["checkpoint"]["restore_from"]
    assert restore and restore.startswith(gui.runs.runs[completed[0]].run_dir + "/checkpoints/")
    (run_id,) = await submit(gui)
    await wait(lambda: state(gui, run_id) in TERMINAL, "the forked run")
    assert state(gui, run_id) == "COMPLETED"



@in_loop
async def test_a_tiny_ray_run_from_the_form(gui, loop):
    form = await fill(gui, "ray", **{"rllib.num_env_runners": 0, "algorithm": "ppo",
                                     "total_timesteps": 400,
                                     "environment.family": "mpe", "environment.env_id": "simple_spread_v3",
                                     "environment.api_type": "PARALLEL",
                                     "environment.env_kwargs": {"N": 2, "max_cycles": 25}})
    params = form._dynamic_forms["algo_params"]  # PPO's own parameters, from the worker's schema
    assert {"train_batch_size_per_learner", "minibatch_size", "num_epochs"} <= set(params.fields)
    params.set_value({"train_batch_size_per_learner": 200, "minibatch_size": 100, "num_epochs": 1})
    (run_id,) = await submit(gui)
    view = gui.open_run(run_id)
    await wait(lambda: state(gui, run_id) in TERMINAL, "the Ray run")
    assert state(gui, run_id) == "COMPLETED", gui.runs.runs[run_id].failure_reason
    await wait(lambda: view.curves_panel.points("episode_return_mean") >= 2, "the Ray run's curve")
    assert any(k.startswith("learner.") for k in view.curves.keys())
    await wait(lambda: view.checkpoints.count() >= 1 and view.episodes.rowCount() >= 1, "checkpoints, episodes")

    # `mosaic eval` (no Ray): its results show in the run view's Evaluations tab
    played = subprocess.run([sys.executable, "-m", "mosaic", "eval", run_id, "--episodes", "2"],
                            capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert played.returncode == 0, played.stderr[-2000:]
    view.show_evaluations()
    text = view.evaluations.toPlainText()
    assert "2 episodes" in text and "mean" in text and "agent_0" in text


@in_loop
async def test_save_and_load_a_config_file(gui, loop, tmp_path):
    form = await fill_random(gui, seed=5, total_timesteps=1234)
    gui.new_run.save_to(tmp_path / "mine.json")
    saved = json.loads((tmp_path / "mine.json").read_text())
    assert saved["worker"] == "random" and saved["seed"] == 5 and saved["total_timesteps"] == 1234
    form.set_value({})
    assert form.value()["seed"] == 0
    gui.new_run.load_from(tmp_path / "mine.json")
    assert gui.new_run.config() == saved
    (tmp_path / "ray.json").write_text(json.dumps({"worker": "ray", "seed": 9, "algorithm": "dqn"}))
    gui.new_run.load_from(tmp_path / "ray.json")  # another worker: its form comes first, then the values
    await wait(lambda: gui.new_run.document["worker"] == "ray" and gui.new_run.config()["seed"] == 9, "the ray form")
    assert gui.new_run.config()["algorithm"] == "dqn"
    (tmp_path / "other.json").write_text(json.dumps({"worker": "no_such_worker"}))
    gui.new_run.load_from(tmp_path / "other.json")
    assert gui.new_run.error.text().startswith("worker: 'no_such_worker' is not installed here (installed: ")
    (tmp_path / "bad.json").write_text("[1, 2")
    gui.new_run.load_from(tmp_path / "bad.json")
    assert "cannot load" in gui.new_run.error.text() and gui.new_run.config()["seed"] == 9


@in_loop
async def test_a_run_submitted_from_the_cli_appears_in_the_table(gui, loop, tmp_path):
    config = tmp_path / "cli.json"
    config.write_text(json.dumps({"worker": "random", "seed": 4, "total_timesteps": 200,
                                  "reporting": {"every_timesteps": 100}}))
    proc = subprocess.run([sys.executable, "-m", "mosaic", "submit", str(config)], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    await wait(lambda: gui.runs.row_of(run_id) is not None, "the CLI's run in the table")
    await wait(lambda: state(gui, run_id) == "COMPLETED", "the CLI's run to complete")


@in_loop
async def test_a_restarted_daemon_is_found_again(gui, loop):
    """The daemon goes away and comes back on another port: the window follows it without a restart."""
    before = gui.reconnects
    stop_daemon(gui.home)
    await wait(lambda: gui.connection_lost and "unreachable" in gui.daemon_label.text(), "the loss noticed")
    subprocess.Popen([sys.executable, "-m", "mosaic", "daemon", "--port", "0"], env=dict(os.environ),
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    await wait(lambda: gui.reconnects > before, "the reconnect")
    assert gui.daemon_label.text().startswith("reconnected to the daemon at ")
    await fill_random(gui, **{"total_timesteps": 200, "reporting.every_timesteps": 100})
    (run_id,) = await submit(gui)
    await wait(lambda: state(gui, run_id) == "COMPLETED", "a run on the new daemon")
