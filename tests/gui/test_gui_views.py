"""Run view pieces fed events shaped as the workers print them (docs/telemetry.md, docs/ray-worker.md)."""

from __future__ import annotations

from mosaic.scoring.curves import ema
from mosaic.clients.gui.run_view import RunView


def metrics(seq, steps, ret, **extra):
    return {"v": 1, "type": "metrics", "run_id": "r", "seq": seq, "ts": 1000.0 + seq, "iteration": seq,
            "timesteps_total": steps, "episode_return_mean": ret, **extra}


def test_smoothing_and_x_axis_change_what_is_drawn(qtbot):
    view = RunView("r", None)
    qtbot.addWidget(view)
    values = [-10.0, -2.0, -8.0, 0.0, -4.0]
    view.add_events([metrics(i + 1, 100 * (i + 1), v, learner={"shared": {"loss": -v}}) for i, v in enumerate(values)])
    view.redraw()
    panel = view.curves_panel
    raw, smooth = panel.items["episode_return_mean"]
    panel.smoothing.setValue(0)
    assert list(smooth.getData()[1]) == values
    panel.smoothing.setValue(90)
    assert list(smooth.getData()[1]) == ema(values, 0.9) and list(raw.getData()[1]) == values
    assert list(smooth.getData()[0]) == [100.0, 200.0, 300.0, 400.0, 500.0]
    panel.x_axis.setCurrentText("wall_time_s")
    assert list(smooth.getData()[0]) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert panel.checked() == ["episode_return_mean"]  # what is drawn first
    panel.set_checked(["episode_return_mean", "learner.shared.loss"])
    assert set(panel.items) == {"episode_return_mean", "learner.shared.loss"}
    assert list(panel.items["learner.shared.loss"][0].getData()[1]) == [-v for v in values]
    panel.set_checked([])
    assert panel.items == {}
    view.close_view()


def test_self_play_pool_snapshots_and_log_levels(qtbot):
    view = RunView("r", None)
    qtbot.addWidget(view)
    view.add_events([
        metrics(1, 100, 0.0, self_play={"pool": ["main_v1", "main_v2"], "pool_size": 2,
                                         "win_rate_vs": {"main_v1": 0.75, "main_v2": None}}),
        {"type": "log", "seq": 2, "level": "info", "message": "added main_v2 (win rate 0.8)",
         "self_play_event": "snapshot_added"},
        {"type": "log", "seq": 3, "level": "debug", "message": "quiet detail"},
        {"type": "log", "seq": 4, "level": "warning", "message": "something odd"},
        {"type": "checkpoint_saved", "seq": 5, "path": "checkpoints/it1", "iteration": 1, "timesteps_total": 100},
        {"type": "episode", "seq": 6, "episode": 0, "length": 9, "returns": {"a": 1.0, "b": -1.0}, "winner": "a",
         "timesteps_total": 9},
    ])
    assert [view.pool.item(r, 0).text() for r in range(view.pool.rowCount())] == ["main_v1", "main_v2"]
    assert view.pool.item(0, 1).text() == "0.75" and view.pool.item(1, 1).text() == "no games yet"
    assert view.snapshots.item(0).text().startswith("snapshot_added: added main_v2")
    assert "checkpoints/it1" in view.checkpoints.item(0).text()
    assert view.episodes.item(0, 3).text() == "a 1.00, b -1.00" and view.episodes.item(0, 4).text() == "a"
    shown = view.log.toPlainText()
    assert "something odd" in shown and "added main_v2" in shown and "quiet detail" not in shown
    view.level.setCurrentText("warning")
    assert view.log.toPlainText() == "[warning] something odd"

    view.level.setCurrentText("debug")
    assert "quiet detail" in view.log.toPlainText()
    view.add_events([{"type": "log", "seq": 4, "level": "error", "message": "replayed"}])  # seen before: skipped
    assert "replayed" not in view.log.toPlainText()
    view.close_view()


def test_frame_canvas_fits_the_frame_and_a_new_frame_repaints_only_the_canvas(qtbot):
    import numpy as np
    from PySide6.QtGui import QColor
    from PySide6.QtWidgets import QVBoxLayout, QWidget

    from mosaic.clients.gui.frames import FramesView

    host = QWidget()
    qtbot.addWidget(host)
    painted = []  # the host's own paint events: a frame should never cause one
    host.paintEvent = lambda event: painted.append(event)
    frames = FramesView("r", None)
    QVBoxLayout(host).addWidget(frames)
    host.resize(420, 520)
    host.show()
    qtbot.waitExposed(host)
    canvas = frames.image
    wide = np.zeros((100, 200, 3), dtype=np.uint8)
    wide[:, :, 0] = 255  # a red frame twice as wide as high
    frames.display(wide, "a stream · episode 3 step 7", {"returns": {"a": 1.5}}, caption_now=True)
    assert "returns this episode: a 1.50" in frames.caption.text()
    shot = canvas.grab().toImage()
    width, height = shot.width(), shot.height()
    assert QColor(shot.pixel(width // 2, height // 2)).red() > 200  # the frame, in the middle
    target = canvas.target()
    assert abs(target.width() - width) <= 1 and abs(target.height() - width // 2) <= 1  # aspect kept
    assert QColor(shot.pixel(width // 2, 2)).red() < 30  # black above it
    qtbot.wait(50)  # paints still pending from showing the window
    painted.clear()
    caption = frames.caption.text()
    for step in range(5):  # frames in quick succession: the caption waits, only the canvas repaints
        frames.display(wide, f"a stream · episode 3 step {8 + step}")
        qtbot.wait(1)
    assert frames.caption.text() == caption and frames.frames_shown == 6
    assert painted == []
    frames.stop()


def test_the_self_play_tab_rates_every_version(qtbot):
    view = RunView("r", None)
    qtbot.addWidget(view)
    ratings = {"anchor": "main_v0", "games": 40, "reps": 100,
               "elo": {"main_v0": 1000.0, "main_v1": 1100.0, "main_v2": 1180.4, "random": 700.0},
               "low": {"main_v0": 1000.0, "main_v1": 1040.0, "main_v2": 1100.0, "random": 600.0},
               "high": {"main_v0": 1000.0, "main_v1": 1160.0, "main_v2": 1260.0, "random": 790.0},
               "training": {"main": "main_v2"}}
    view.add_events([metrics(1, 100, 0.0, self_play={"pool": ["random", "main_v1"], "pool_size": 2,
                                                     "win_rate_vs": {"random": 0.9, "main_v1": 0.6},
                                                     "ratings": ratings})])
    rows = [[view.pool.item(r, c).text() for c in range(3)] for r in range(view.pool.rowCount())]
    assert rows == [["random", "0.90", "700 [600, 790]"], ["main_v1", "0.60", "1100 [1040, 1160]"],
                    ["main_v2 (main, training)", "—", "1180 [1100, 1260]"], ["main_v0", "—", "1000 [1000, 1000]"]]
    assert "main_v0 = 1000" in view.pool.toolTip()


def test_the_runs_table_shows_each_agents_return_in_a_zero_sum_game(qtbot):
    """A connect-four run's summed return is 0 whoever wins: the table shows each player's; a cooperative run's
    shows the sum."""
    import json

    from mosaic.clients.gui.runs_view import COLUMNS, RunsView
    from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb

    view = RunsView()
    qtbot.addWidget(view)
    for run_id, metrics in (("c4", {"episode_return_mean": 0.0,
                                    "agent_episode_returns_mean": {"player_0": 0.25, "player_1": -0.25}}),
                            ("spread", {"episode_return_mean": -40.5,
                                        "agent_episode_returns_mean": {"agent_0": -20.25, "agent_1": -20.25}})):
        view.update_run(pb.RunInfo(run_id=run_id, worker="random", state=pb.COMPLETED,
                                   last_metrics_json=json.dumps({"timesteps_total": 100, **metrics})))
    shown = {view.table.item(row, 0).text(): view.table.item(row, COLUMNS.index("last return")).text()
             for row in range(view.table.rowCount())}
    assert shown == {"c4": "player_0 +0.25, player_1 -0.25", "spread": "-40.50"}
