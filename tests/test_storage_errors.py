"""A run folder that stops taking writes (a full disk, here a file-size limit: the same OSError) ends the run
with one line naming the folder, exit 1, the worker stopped: no traceback, no orphan."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

from cli_support import write_config
from mosaic.pids import is_running
from mosaic.runs import RunStore


def _small_files() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (96 * 1024, 96 * 1024))


def test_a_run_folder_that_refuses_writes_stops_the_run_with_one_line(tmp_path):
    home = tmp_path / "home"
    config = write_config(tmp_path / "random.json", {
        "worker": "random", "environment": {"family": "classic", "env_id": "tictactoe_v3"},
        "total_timesteps": 200000, "reporting": {"every_timesteps": 1}, "fastlane": {"enabled": False}})
    proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", "full"],
                          capture_output=True, text=True, timeout=300, preexec_fn=_small_files,
                          env={**os.environ, "MOSAIC_HOME": str(home)})
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("mosaic: error: run full: cannot write to ") and "the worker was stopped" in line, line
    run = RunStore(home).resolve("full")
    manifest = json.loads(run.manifest_path.read_text())
    assert manifest["status"] == "failed" and "cannot write" in manifest["failure"]["message"]
    assert not is_running(manifest["pid"])
