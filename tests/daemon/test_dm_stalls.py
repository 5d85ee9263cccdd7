"""Runs that stop moving, and workers that die hard: the daemon ends the run and leaves nothing behind.

* a worker killed with SIGKILL while it publishes FastLane frames leaves no
  segment in /dev/shm once its run is recorded as failed (its last frame is kept);
* heartbeats that say a run is stuck (``stalled``, or progress older than the
  run's own stall bound) make the watchdog fail it, naming the cause.
"""

from __future__ import annotations

import os
import signal
import sys
import textwrap
from pathlib import Path

import pytest

from dm_helpers import random_config, wait_until
from mosaic.fastlane.ring import RingReader
from mosaic.fastlane.shm import SHM_DIR, FastLaneError, list_segments

# Started as the `random` worker's interpreter: for seeds 7070/7071 it is a worker
# that stays alive (heartbeats every 0.2 s) but whose heartbeats say it is stuck;
# any other seed runs the real worker.
STUCK_WRAPPER = textwrap.dedent(f"""\
    #!{sys.executable}
    import json, os, sys, time
    args = sys.argv[1:]
    config = json.load(open(args[args.index("--config") + 1])) if "--config" in args and "--run-dir" in args else {{}}
    seed = config.get("seed")
    if seed in (7070, 7071):
        seq = 0
        def emit(kind, **fields):
            global seq
            print(json.dumps({{"v": 1, "type": kind, "run_id": config["run_id"], "seq": seq, "ts": time.time(),
                              **fields}}), flush=True)
            seq += 1
        emit("run_started", worker="random", config_digest="0" * 64, versions={{}}, resources={{}})
        started = time.time()
        while True:
            if seed == 7070:  # the worker knows it is stuck (say, its own watchdog cannot end it)
                emit("heartbeat", iterations=2, last_progress_ts=started, since_progress_s=time.time() - started,
                     stall_timeout_s=60.0, stalled=True,
                     stall_reason="ThreadDied: the learner thread (thread 'learner') died")
            else:  # alive, but its last progress is far older than its own bound
                emit("heartbeat", iterations=2, last_progress_ts=started - 100, stall_timeout_s=5.0,
                     since_progress_s=time.time() - started + 100, stalled=False)
            time.sleep(0.2)
    os.execv({sys.executable!r}, [{sys.executable!r}, *args])
    """)


def frames_published(run_id: str) -> bool:
    """The run's segment exists and holds at least one frame (so there is a last frame to keep)."""
    for name in list_segments(run_id):
        try:
            with RingReader(name) as reader:
                return reader.frames_written > 0
        except (FastLaneError, OSError):
            return False
    return False


def test_a_worker_killed_while_publishing_frames_leaves_no_segment(daemon_factory):
    d = daemon_factory("--heartbeat-timeout", "30")
    run_id = d.submit(random_config(fastlane={"enabled": True, "fps": 0, "max_overhead": 0}))
    try:
        info = d.wait_state(run_id, "RUNNING")
        wait_until(lambda: frames_published(run_id), 60, "the worker's first FastLane frame")
        os.kill(info.pid, signal.SIGKILL)  # no chance to unlink anything itself
        info = d.wait_state(run_id, "FAILED", timeout=30)
        assert info.exit_signal == "SIGKILL"
        assert list_segments(run_id) == []
    finally:  # a failing test must not leak 8 MB of shared memory
        for name in list_segments(run_id):
            os.unlink(SHM_DIR / name)
    run_dir = d.home / "trainer" / "runs" / run_id
    assert list((run_dir / "fastlane").glob("*.png")), "the last frame is kept in the run folder"


@pytest.mark.parametrize("seed, words", [
    (7070, ["worker reports it is stuck", "ThreadDied", "learner thread"]),
    (7071, ["no training progress for", "stall bound is 5 s", "2 iterations", "heartbeats go on"]),
])
def test_heartbeats_that_say_the_run_is_stuck_make_the_watchdog_fail_it(daemon_factory, tmp_path, seed, words):
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text(STUCK_WRAPPER)
    wrapper.chmod(0o755)
    d = daemon_factory("--python", f"random={wrapper}", "--heartbeat-timeout", "30")
    run_id = d.submit(random_config(seed=seed))
    info = d.wait_state(run_id, "FAILED", timeout=30)
    assert all(w in info.failure_reason for w in words), info.failure_reason
    failed = [e for e in d.events(run_id) if e["type"] == "run_failed"]
    assert len(failed) == 1 and failed[0]["error_type"] == "StalledRun" and failed[0]["origin"] == "daemon"
    beats = [e for e in d.events(run_id) if e["type"] == "heartbeat"]
    assert beats, "the worker was alive: heartbeats kept coming"
    wait_until(lambda: not _alive(info.pid), 10, "the stuck worker to be killed")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/status").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text()
