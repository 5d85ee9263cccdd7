"""Waiting on conditions, never on fixed sleeps: pause and resume, live evaluation, a predicate with a deadline."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from mosaic.runs import RunDir
from mosaic.testing.worker_homes import WorkerHome, run_events

#: Events that show a run is training (or playing): none may come while it is paused.
PROGRESS_TYPES = ("episode", "metrics", "checkpoint_saved")


def check_pause_resume(run: Path, proc: "subprocess.Popen | None" = None, heartbeats: int = 2,
                       timeout: float = 120.0) -> list[dict[str, Any]]:
    """Pause a training run by signal, see it hold still, resume it and see it train again.

    ``run`` is the folder of a run that is training (its worker's pid is in
    ``analytics.json``); ``proc`` the process that started it (``mosaic run``), so a
    run that dies fails at once. SIGUSR1 must bring a ``paused`` event; ``heartbeats``
    heartbeats after it prove time passed with the worker alive, and no event of
    :data:`PROGRESS_TYPES` may come before ``resumed``; SIGUSR2 must bring ``resumed``
    and then new progress. The run keeps going: the caller ends it. Returns the
    events up to that new progress.
    """
    import signal

    pid = RunDir(Path(run)).read_manifest()["pid"]
    wait_until(lambda: any(e["type"] in PROGRESS_TYPES for e in run_events(run)), timeout,
               "the run to make progress before it is paused", proc=proc)
    os.kill(pid, signal.SIGUSR1)
    paused_at = wait_until(lambda: _index_of(run_events(run), "paused"), timeout, "a paused event", proc=proc)

    def since_paused() -> list[str]:
        return [e["type"] for e in run_events(run)[paused_at + 1:]]

    wait_until(lambda: since_paused().count("heartbeat") >= heartbeats, timeout,
               f"{heartbeats} heartbeats while paused", proc=proc)
    moved = set(since_paused()) & set(PROGRESS_TYPES)
    assert not moved, f"the run made progress while paused: {sorted(moved)}"
    os.kill(pid, signal.SIGUSR2)
    resumed_at = wait_until(lambda: _index_of(run_events(run), "resumed"), timeout, "a resumed event", proc=proc)
    assert not set(e["type"] for e in run_events(run)[paused_at + 1:resumed_at]) & set(PROGRESS_TYPES)
    wait_until(lambda: any(e["type"] in PROGRESS_TYPES for e in run_events(run)[resumed_at + 1:]), timeout,
               "progress after resuming", proc=proc)
    return run_events(run)


def check_live_evaluation(home: WorkerHome, config: Path, run_id: str, snapshot: Path,
                          results_file: str = "results.json", timeout: float = 300.0) -> Path:
    """A long evaluation started with ``mosaic run``: its FastLane frames reach ``mosaic watch``, it pauses
    and resumes (:func:`check_pause_resume`), and Ctrl-C cancels it (exit 3, ``run_cancelled``) leaving
    no ``results_file`` and no shared memory. The config must stream frames and outlast the checks.
    Returns the run folder."""
    import signal
    import sys

    import numpy as np

    from mosaic.fastlane.png import read_png
    from mosaic.fastlane.shm import list_segments

    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", run_id],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MOSAIC_HOME": str(home.root)})
    run = home.root / "trainer" / "runs" / run_id
    try:
        wait_until(lambda: list_segments(run_id), timeout, "the FastLane stream", interval=0.1, proc=proc)
        watched = home.cli("watch", run_id, "--snapshot", str(snapshot), timeout=120)
        assert watched.returncode == 0, watched.stderr
        pixels, _meta = read_png(snapshot)
        assert pixels.ndim == 3 and len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)) > 3
        check_pause_resume(run, proc, heartbeats=2, timeout=timeout)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(120)
    assert code == 3, proc.stderr.read()[-2000:]
    assert run_events(run)[-1]["type"] == "run_cancelled"
    assert not (run / results_file).exists() and not list_segments(run_id)
    return run


def _index_of(events: list[dict[str, Any]], kind: str) -> int | None:
    """Position of the first event of ``kind`` (None when there is none; 0 is never one here)."""
    for position, event in enumerate(events):
        if event["type"] == kind:
            return position
    return None


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02,
               proc: "subprocess.Popen | None" = None) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that.

    Fails at the deadline naming ``what``, or as soon as ``proc`` (a process
    expected to produce it) has ended. Tests wait on conditions, never on fixed sleeps.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
