"""`mosaic run` removes a dead worker's FastLane segments, keeping its last frame."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from mosaic.fastlane.ring import RingReader
from mosaic.fastlane.shm import SHM_DIR, FastLaneError, list_segments
from mosaic.testing import wait_until


def frames_published(run_id: str) -> bool:
    """The run's segment exists and holds at least one frame (so there is a last frame to keep)."""
    for name in list_segments(run_id):
        try:
            with RingReader(name) as reader:
                return reader.frames_written > 0
        except (FastLaneError, OSError):
            return False
    return False


def test_mosaic_run_removes_the_segments_of_a_worker_killed_by_sigkill(tmp_path):
    home = tmp_path / "home"
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "worker": "random", "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL"},
        "total_timesteps": 1_000_000, "step_delay_s": 0.005, "fastlane": {"enabled": True, "fps": 0,
                                                                          "max_overhead": 0}}))
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "MOSAIC_HOME": str(home)})
    run_id = None
    try:
        def running_run() -> Path | None:
            runs = [p for p in (home / "trainer" / "runs").glob("[!.]*") if (p / "analytics.json").is_file()]
            return runs[0] if runs and frames_published(runs[0].name) else None

        run_dir = wait_until(running_run, 60, "the worker's first FastLane frame")
        run_id = run_dir.name
        pid = json.loads((run_dir / "analytics.json").read_text())["pid"]
        os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
        assert list_segments(run_id) == []
        assert list((run_dir / "fastlane").glob("*.png")), "the last frame is kept in the run folder"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for name in list_segments(run_id) if run_id else []:
            os.unlink(SHM_DIR / name)
