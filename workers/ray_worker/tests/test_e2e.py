"""The Ray worker as a real subprocess: conformance, signals, joining a cluster by address.

Worker processes join this module's Ray session through ``rllib.address``
instead of starting their own, which keeps the module fast and exercises the
"join an existing cluster" path.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ray_support import TINY, merge
from mosaic.testing import check_worker


@pytest.fixture(scope="module")
def address(ray_session) -> str:
    return ray_session.get_runtime_context().gcs_address


def test_conformance(address, tmp_path):
    config = merge(TINY, {"rllib": {"address": address}})
    report = check_worker("ray", config, home=tmp_path)
    started = report.of_type("run_started")[0]
    assert started["algorithm"] == "ppo" and started["versions"]["ray"].startswith("2.60")
    assert started["resources"]["torch_threads"] == 1  # resources.threads' default (1), applied
    assert report.of_type("checkpoint_saved")
    manifest = report.run.read_manifest()
    assert manifest["versions"]["torch"].startswith("2.13") and manifest["algorithm"] == "ppo"


def wait_for(path: Path, needle: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if path.exists() and needle in path.read_text():
            return
        time.sleep(0.1)
    raise AssertionError(f"{needle} never appeared in {path}")


def test_pause_resume_and_cancel_checkpoint(address, tmp_path):
    home = tmp_path / "home"
    config = tmp_path / "long.json"
    config.write_text(json.dumps(merge(TINY, {
        "worker": "ray", "rllib": {"address": address}, "reporting": {"heartbeat_interval_s": 0.5},
        "total_timesteps": 10_000_000})))
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "MOSAIC_HOME": str(home)})
    try:
        runs = home / "trainer" / "runs"
        deadline = time.time() + 60
        def complete_runs() -> list[Path]:  # not the ".<id>.<random>" staging folder
            return [p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")] if runs.exists() else []

        while not complete_runs():
            assert time.time() < deadline
            time.sleep(0.1)
        run = complete_runs()[0]
        telemetry = run / "telemetry.jsonl"
        wait_for(telemetry, '"type":"metrics"')
        pid = json.loads((run / "analytics.json").read_text())["pid"]
        os.kill(pid, signal.SIGUSR1)
        wait_for(telemetry, '"type":"paused"')
        def after_pause() -> list[str]:
            types = [json.loads(line)["type"] for line in telemetry.read_text().splitlines()]
            return types[types.index("paused") + 1:]

        # heartbeats go on while paused (time passes, the worker lives); no iteration is trained
        deadline = time.time() + 60
        while after_pause().count("heartbeat") < 3:
            assert time.time() < deadline, "no heartbeats while paused"
            time.sleep(0.1)
        assert "metrics" not in after_pause(), "trained while paused"
        os.kill(pid, signal.SIGUSR2)
        wait_for(telemetry, '"type":"resumed"')
        cancel_at = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=60)
        assert time.monotonic() - cancel_at < 30
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3
    events = [e for e in map(json.loads, telemetry.read_text().splitlines()) if e["type"] != "heartbeat"]
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "run_cancelled"
    assert kinds[-2] == "checkpoint_saved"  # checkpointed after finishing the iteration
    assert Path(events[-2]["path"], "mosaic_state.json").exists()


def test_same_seed_same_episodes_across_processes(address, tmp_path):
    """`mosaic run` twice with one seed: identical first-iteration episodes (PYTHONHASHSEED is pinned)."""
    def episodes(where: str) -> list:
        config = tmp_path / f"{where}.json"
        config.write_text(json.dumps(merge(TINY, {"worker": "ray", "seed": 5, "rllib": {"address": address},
                                                  "total_timesteps": 200})))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
        proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(config)], capture_output=True,
                              text=True, timeout=300, env={**env, "MOSAIC_HOME": str(tmp_path / where)})
        assert proc.returncode == 0, proc.stderr[-2000:]
        (run,) = (tmp_path / where / "trainer" / "runs").iterdir()
        events = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
        return [e["returns"] for e in events if e["type"] == "episode"]

    first, second = episodes("a"), episodes("b")
    assert first and first == second
