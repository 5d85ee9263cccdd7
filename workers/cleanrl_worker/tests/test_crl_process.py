"""A live CleanRL run: frames on FastLane, video capture on, paused and resumed, cancelled with Ctrl-C.

pygame's SDL installs a C-level SIGTERM handler that swallows the signal when
no handler is set; the runtime starts the script with
``SDL_NO_SIGNAL_HANDLERS=1`` so a run that captures video still ends on the
first SIGTERM (not on the SIGKILL after the grace period).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import numpy as np

from crl_support import events
from mosaic.fastlane.png import read_png
from mosaic.fastlane.shm import list_segments
from mosaic.testing import check_pause_resume, wait_until

WAIT_S = 600  # for the first frame and video on a busy machine; a condition ends the wait


def test_cancel_a_run_capturing_video_while_watching_it(home, tmp_path):
    config = home.config("live", algorithm="dqn", seed=2, total_timesteps=200_000, capture_video=True,
                         algo_params={"learning_starts": 1000}, fastlane={"enabled": True},
                         reporting={"heartbeat_interval_s": 0.5})
    run_id = "cleanrl-live-1"
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", run_id],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MOSAIC_HOME": str(home.root)})
    run = home.root / "trainer" / "runs" / run_id
    try:
        wait_until(lambda: list_segments(run_id), WAIT_S, "FastLane stream", interval=0.2, proc=proc)
        wait_until(lambda: list((run / "videos").rglob("*.mp4")), WAIT_S, "video file", interval=0.2, proc=proc)
        watched = subprocess.run([sys.executable, "-m", "mosaic", "watch", run_id, "--snapshot",
                                  str(tmp_path / "live.png")], capture_output=True, text=True, timeout=120,
                                 env={**os.environ, "MOSAIC_HOME": str(home.root)})
        assert watched.returncode == 0, watched.stderr
        pixels, _ = read_png(tmp_path / "live.png")
        assert pixels.ndim == 3 and len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)) > 3
        assert events(run, "episode"), "no episode relayed yet"
        # pause stops the script's process group (SIGSTOP), resume continues it (SIGCONT)
        check_pause_resume(run, proc, heartbeats=2, timeout=WAIT_S)
    finally:
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        code = proc.wait(120)
    assert code == 3, proc.stderr.read()[-2000:]
    stopped = [e for e in events(run, "log") if "after SIGTERM" in e["message"] or "killed" in e["message"]]
    assert stopped and stopped[-1]["script_exit"] == -signal.SIGTERM, stopped  # not swallowed by SDL
    assert events(run)[-1]["type"] == "run_cancelled"
    manifest = json.loads((run / "analytics.json").read_text())
    assert manifest["status"] == "cancelled" and manifest["artefacts"]["videos"]
    assert not list_segments(run_id)


def test_conformance(home):
    """The conformance kit: the run, its own stdout, bad input, and every shared flag, in its environment."""
    from mosaic.testing import check_worker

    from crl_support import THREADS, TINY

    report = check_worker("cleanrl", {"algorithm": "ppo", "seed": 3, "resources": {"threads": THREADS}, **TINY["ppo"]},
                          home=home.root,
                          bad_config={"algorithm": "ppo", "algo_params": {"num_envs": "four"}})
    assert report.of_type("metrics")[-1]["timesteps_total"] == TINY["ppo"]["total_timesteps"]
    assert report.of_type("checkpoint_saved")
