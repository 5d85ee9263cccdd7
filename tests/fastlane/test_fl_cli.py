"""``mosaic watch`` and ``mosaic fastlane gc`` as real subprocesses against real writers."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from fl_helpers import CTX, pattern, start, stop, wait_for
from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
from mosaic.fastlane.png import read_png
from mosaic.fastlane.publisher import Publisher
from mosaic.fastlane.registry import read_registry
from mosaic.fastlane.ring import Geometry
from mosaic.fastlane.shm import list_segments, segment_name
from mosaic.runs import RunStore, new_run_id
from fl_conftest_bridge import run_cli

GEOMETRY = Geometry(40, 60, 3)


def make_run(home: Path, status: str = "running", config: dict | None = None) -> tuple[str, Path]:
    run_id = new_run_id("fl-")
    run = RunStore(home).create(run_id, config or {"worker": "test"}, {"worker": "test", "status": status})
    return run_id, run.root


def publish_forever(run_dir: str, run_id: str, stream: str = "main", stop_event=None, period_s: float = 0.01) -> None:
    """Child: a worker-like stream at ~100 fps until told to stop (or killed)."""
    publisher = Publisher(FastLaneTarget(run_id, run_dir, FastLaneConfig(enabled=True, fps=0)), stream)
    n = 0
    while stop_event is None or not stop_event.is_set():
        publisher.publish(pattern(GEOMETRY, n), n // 10, n % 10, {"n": n, "rewards": {"a": 1.0, "b": -0.5}})
        n += 1
        time.sleep(period_s)
        if stop_event is None and n > 100_000:
            break
    publisher.close()


@pytest.fixture
def live_run(home):
    run_id, run_dir = make_run(home)
    stop_event = CTX.Event()
    writer = start(publish_forever, str(run_dir), run_id, "main", stop_event)
    wait_for(lambda: segment_name(run_id, "main") in list_segments())
    yield run_id, run_dir
    stop_event.set()
    stop(writer)


def test_snapshot_of_a_live_run_writes_the_newest_frame(live_run, home, tmp_path):
    run_id, _ = live_run
    out = tmp_path / "f.png"
    proc = run_cli("watch", run_id, "--snapshot", str(out), home=home, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "stream main, 40x60x3" in proc.stdout and "rewards" in proc.stdout
    pixels, meta = read_png(out)
    assert pixels.shape == (40, 60, 3)
    np.testing.assert_array_equal(pixels, pattern(GEOMETRY, meta["index"]))
    assert meta["stream"] == "main" and meta["rewards"] == {"a": 1.0, "b": -0.5}


def test_stats_print_fps_and_latency(live_run, home):
    run_id, _ = live_run
    proc = run_cli("watch", run_id, "--stats", "--duration", "2.5", home=home, timeout=60)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("main")]
    assert lines, proc.stdout
    fields = lines[-1].split()
    fps = float(fields[fields.index("fps") + 1])
    latency = float(fields[fields.index("latency") + 1])
    assert 10 < fps < 1000 and 0 <= latency < 1000
    assert int(fields[fields.index("torn") + 1]) >= 0 and "episode" in lines[-1]


def test_window_opens_with_a_display(live_run, home):
    run_id, _ = live_run
    proc = run_cli("watch", run_id, "--duration", "1", home=home, timeout=60,
                   env={"SDL_VIDEODRIVER": "dummy", "SDL_AUDIODRIVER": "dummy"})
    assert proc.returncode == 0, proc.stderr


def test_without_a_display_the_window_is_refused_with_a_hint(live_run, home):
    run_id, _ = live_run
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "SDL_VIDEODRIVER")}
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "mosaic", "watch", run_id], capture_output=True, text=True,
                          timeout=60, env={**env, "MOSAIC_HOME": str(home)})
    assert proc.returncode == 2
    assert "--snapshot" in proc.stderr and "no display" in proc.stderr


def test_snapshot_without_frames_fails_clearly(home, tmp_path):
    run_id, _ = make_run(home)
    proc = run_cli("watch", run_id, "--snapshot", str(tmp_path / "x.png"), "--timeout", "0.5", home=home)
    assert proc.returncode == 2
    assert "no FastLane frame" in proc.stderr and "enabled" in proc.stderr
    assert not (tmp_path / "x.png").exists()


def test_watching_a_run_without_fastlane_says_so_at_once(home, tmp_path):
    run_id, _ = make_run(home, config={"worker": "random", "fastlane": {"enabled": False}})
    started = time.monotonic()
    proc = run_cli("watch", run_id, "--snapshot", str(tmp_path / "x.png"), home=home)
    assert proc.returncode == 2 and "without FastLane" in proc.stderr
    assert time.monotonic() - started < 20  # no waiting for frames that cannot come


def test_a_finished_stream_still_gives_its_last_frame(home, tmp_path):
    run_id, run_dir = make_run(home)
    publisher = Publisher(FastLaneTarget(run_id, str(run_dir), FastLaneConfig(enabled=True)), "main")
    for n in range(3):
        publisher.publish(pattern(GEOMETRY, n), 0, n, {"n": n})
    publisher.close()
    assert segment_name(run_id, "main") not in list_segments()
    entry = read_registry(run_dir)["streams"]["main"]
    assert entry["state"] == "closed" and entry["frames"] == 3 and entry["last_frame"] == "fastlane/main.png"
    out = tmp_path / "last.png"
    proc = run_cli("watch", run_id, "--snapshot", str(out), home=home)
    assert proc.returncode == 0, proc.stderr
    assert "has ended" in proc.stdout
    pixels, meta = read_png(out)
    np.testing.assert_array_equal(pixels, pattern(GEOMETRY, 2))
    assert meta["step"] == 2


def test_gc_removes_segments_of_dead_writers_and_finished_runs_only(home):
    dead_id, dead_dir = make_run(home)
    crashed = start(publish_forever, str(dead_dir), dead_id)
    live_id, live_dir = make_run(home)
    live_stop = CTX.Event()
    live = start(publish_forever, str(live_dir), live_id, "main", live_stop)
    done_id, done_dir = make_run(home)
    done_stop = CTX.Event()
    done = start(publish_forever, str(done_dir), done_id, "main", done_stop)
    names = {k: segment_name(k, "main") for k in (dead_id, live_id, done_id)}
    try:
        wait_for(lambda: set(names.values()) <= set(list_segments()))
        os.kill(crashed.pid, signal.SIGKILL)
        crashed.join(10)
        RunStore(home).get(done_id).update_manifest(status="completed")  # writer still up, run over

        dry = run_cli("fastlane", "gc", "--dry-run", home=home)
        assert dry.returncode == 0, dry.stderr
        assert names[dead_id] in dry.stdout and names[done_id] in dry.stdout and names[live_id] not in dry.stdout
        assert names[dead_id] in list_segments()

        listing = run_cli("fastlane", "ls", home=home)
        assert names[live_id] in listing.stdout and "alive" in listing.stdout

        proc = run_cli("fastlane", "gc", home=home)
        assert proc.returncode == 0, proc.stderr
        assert f"removed {names[dead_id]}: writer {crashed.pid} is gone" in proc.stdout
        assert f"removed {names[done_id]}: its run has finished" in proc.stdout
        left = set(list_segments())
        assert names[dead_id] not in left and names[done_id] not in left and names[live_id] in left
        assert (dead_dir / "fastlane" / "main.png").is_file()  # the crashed run's last frame was kept
        assert read_registry(dead_dir)["streams"]["main"]["state"] == "closed"
    finally:
        live_stop.set()
        done_stop.set()
        stop(live)
        stop(done)
    assert not set(names.values()) & set(list_segments())
