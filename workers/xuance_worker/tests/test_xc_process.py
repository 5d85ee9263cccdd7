"""A XuanCe run as a process: the conformance kit; frames watched live, paused and resumed, then Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from xc_support import TINY
from mosaic.fastlane.png import read_png
from mosaic.fastlane.shm import list_segments
from mosaic.testing import check_pause_resume, check_worker, run_events, wait_until


@pytest.mark.slow
def test_conformance(home):
    """The run, its own stdout, bad input and every shared flag, in the worker's environment."""
    report = check_worker("xuance", {"algorithm": "mappo", "seed": 3, "reporting": {"every_timesteps": 400},
                                     **TINY["mappo"]}, home=home.root,
                          bad_config={"algorithm": "mappo", "algo_params": {"clip_range": "wide"}})
    assert report.of_type("metrics")[-1]["timesteps_total"] == TINY["mappo"]["total_timesteps"]
    assert report.of_type("checkpoint_saved")


@pytest.mark.slow
def test_a_watched_run_streams_env_0_pauses_and_ctrl_c_cancels_it_with_a_checkpoint(home, tmp_path):
    config = home.config("long", algorithm="qmix", total_timesteps=2_000_000, num_envs=2,
                         reporting={"every_timesteps": 200, "heartbeat_interval_s": 0.5},
                         algo_params={"start_training": 100, "buffer_size": 5000}, fastlane={"enabled": True})
    run_id = "xuance-cancel-1"
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", run_id],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MOSAIC_HOME": str(home.root)})
    run = home.root / "trainer" / "runs" / run_id
    try:
        wait_until(lambda: (run / "telemetry.jsonl").exists() and run_events(run, "metrics"), 600,
                   "the first metrics", interval=0.2, proc=proc)
        (stream,) = wait_until(lambda: list_segments(run_id), 600, "the FastLane stream", proc=proc)
        assert stream.endswith(".main")
        watched = home.cli("watch", run_id, "--snapshot", str(tmp_path / "live.png"), timeout=120)
        assert watched.returncode == 0, watched.stderr
        pixels, _ = read_png(tmp_path / "live.png")
        assert pixels.ndim == 3 and len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)) > 3
        check_pause_resume(run, proc, heartbeats=2, timeout=600)  # held at the step callback
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(120)
    assert code == 3, proc.stderr.read()[-2000:]
    events = run_events(run)
    assert events[-1]["type"] == "run_cancelled"
    (saved,) = [e for e in events if e["type"] == "checkpoint_saved"]
    assert 0 < saved["timesteps_total"] < 2_000_000
    state = json.loads((run / "checkpoints" / os.path.basename(saved["path"]) / "mosaic_state.json").read_text())
    assert state["timesteps_total"] == saved["timesteps_total"] and state["algorithm"] == "qmix"
    assert json.loads((run / "analytics.json").read_text())["status"] == "cancelled"
    assert not list_segments(run_id)


def test_a_run_never_imports_wandb_which_xuance_imports_for_a_logger_mosaic_does_not_use(home):
    """XuanCe's agent base classes import W&B at their top (most of a second of every process's start); the
    worker defers it (mosaic.workerkit.deferred) to a first use, and XuanCe's W&B logger would still find it."""
    lines = home.probe("from xuance_worker.runtime import quiet_xuance; quiet_xuance()\n"
                       "from mosaic.workerkit.deferred import is_deferred\n"
                       "import xuance.torch.agents, xuance.torch.agents.base.agent as agent\n"
                       "print(is_deferred('wandb'))\n"
                       "print(agent.wandb.Settings.__module__, is_deferred('wandb'))\n")
    assert lines[:2] == ["True", "wandb.sdk.wandb_settings False"], lines
