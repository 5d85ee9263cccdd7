"""The reference worker streams its env's frames through FastLane when asked to."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from mosaic.fastlane.png import read_png
from mosaic.fastlane.registry import read_registry
from mosaic.fastlane.shm import list_segments
from mosaic.testing import check_worker, fastlane_leaks

PISTONBALL = {"family": "butterfly", "env_id": "pistonball_v6", "api_type": "PARALLEL",
              "env_kwargs": {"n_pistons": 3, "max_cycles": 40}}


@pytest.fixture(autouse=True)
def no_leaked_segments(tmp_path_factory):
    before = set(list_segments())
    yield
    assert not fastlane_leaks(before, tmp_path_factory.getbasetemp()), "the random worker left FastLane segments behind"


def mosaic(*args: str, home, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mosaic", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "MOSAIC_HOME": str(home)})


def test_frames_reach_the_run_folder_and_segments_are_gone_at_the_end(tmp_path):
    report = check_worker("random", {"seed": 1, "environment": PISTONBALL, "total_timesteps": 120,
                                     "reporting": {"every_timesteps": 40}, "fastlane": {"enabled": True, "fps": 0,
                                                                             "max_overhead": 0}},
                          home=tmp_path)
    entry = read_registry(report.run.root)["streams"]["main"]
    assert entry["state"] == "closed" and entry["frames"] >= 120
    assert entry["geometry"] == {"height": 560, "width": 200, "channels": 3, "dtype": "|u1"}
    pixels, meta = read_png(report.run.root / entry["last_frame"])
    assert pixels.shape == (560, 200, 3) and pixels.std() > 10
    assert set(meta["rewards"]) == {"piston_0", "piston_1", "piston_2"} and "returns" in meta
    assert not list_segments(report.run.run_id)


def test_disabled_by_default_and_nothing_published(tmp_path):
    report = check_worker("random", {"seed": 1, "environment": PISTONBALL, "total_timesteps": 40},
                          home=tmp_path, check_raw_stdout=False)
    assert json.loads(report.run.config_path.read_text())["fastlane"]["enabled"] is False
    assert not (report.run.root / "fastlane.json").exists()


def test_watch_a_live_random_run(tmp_path):
    config = tmp_path / "run.json"
    config.write_text(json.dumps({"worker": "random", "environment": PISTONBALL, "total_timesteps": 100_000,
                                  "step_delay_s": 0.002, "fastlane": {"enabled": True}}))
    run = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", "live-1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           env={**os.environ, "MOSAIC_HOME": str(tmp_path)})
    try:
        deadline = time.monotonic() + 60
        while not list_segments("live-1"):
            assert time.monotonic() < deadline and run.poll() is None, "no stream appeared"
            time.sleep(0.05)
        proc = mosaic("watch", "live-1", "--snapshot", str(tmp_path / "live.png"), home=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "stream main, 560x200x3" in proc.stdout
        pixels, _ = read_png(tmp_path / "live.png")
        assert pixels.shape == (560, 200, 3) and len(np.unique(pixels.reshape(-1, 3), axis=0)) > 3
    finally:
        run.send_signal(2)  # Ctrl-C: the run is cancelled cleanly
        assert run.wait(60) == 3
    assert not list_segments("live-1")  # cancelled runs clean up too
