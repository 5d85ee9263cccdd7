"""The run watchdog: dead threads, stalls and stuck cancels end a run; progress keeps it alive.

Real threads and, at the end, real worker processes whose main thread is stuck.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from mosaic.workerkit.lifecycle import EXIT_CANCELLED, EXIT_FAILED, ProgressTracker, RunControl, RunWatchdog
from mosaic.workerkit.telemetry import TelemetryEmitter
from mosaic.workerkit.telemetry_schema import TELEMETRY_SCHEMA
from mosaic.testing import wait_until


class Outcome:
    """What the watchdog asked for, recorded instead of ending the test process."""

    def __init__(self) -> None:
        self.failures: list[tuple[str, str]] = []
        self.cancels: list[str] = []

    def fail(self, kind: str, message: str) -> None:
        self.failures.append((kind, message))

    def cancel(self, message: str) -> None:
        self.cancels.append(message)


def watchdog(progress: ProgressTracker, control: RunControl | None = None, **kw) -> tuple[RunWatchdog, Outcome]:
    out = Outcome()
    return RunWatchdog(progress, control or RunControl(), out.fail, out.cancel, period_s=0.05, **kw), out


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_registered_thread_that_dies_fails_the_run_naming_thread_and_cause():
    progress = ProgressTracker()
    release = threading.Event()

    def learner() -> None:
        release.wait(30)
        raise TypeError("unsupported operand in the loss")

    thread = threading.Thread(target=learner, name="learner-thread", daemon=True)
    thread.start()
    progress.watch_thread(thread, "the learner thread")
    dog, out = watchdog(progress)
    with dog:
        time.sleep(0.3)
        assert out.failures == []  # alive: nothing to report
        release.set()
        wait_until(lambda: out.failures, 10, "the watchdog to notice the dead thread")
    kind, message = out.failures[0]
    assert kind == "ThreadDied"
    assert "the learner thread" in message and "learner-thread" in message
    assert "TypeError: unsupported operand in the loss" in message
    assert progress.heartbeat_fields()["stalled"] is True


def test_threads_that_end_after_training_stopped_are_no_failure():
    progress = ProgressTracker()
    progress.start(600, "bound")
    done = threading.Event()
    thread = threading.Thread(target=done.wait, args=(30,), daemon=True)
    thread.start()
    progress.watch_thread(thread, "the learner thread")
    dog, out = watchdog(progress)
    with dog:
        progress.stop()  # training over: shutting the library down ends its threads
        done.set()
        thread.join(10)
        time.sleep(0.5)
    assert out.failures == [] and progress.problem() is None


def test_a_stall_beyond_the_bound_fails_the_run_naming_the_bound():
    progress = ProgressTracker()
    progress.start(0.5, "training.stall_timeout_s")
    progress.tick()
    dog, out = watchdog(progress)
    started = time.monotonic()
    with dog:
        wait_until(lambda: out.failures, 10, "the watchdog to notice the stall")
    assert time.monotonic() - started >= 0.5
    kind, message = out.failures[0]
    assert kind == "StalledRun"
    assert "training.stall_timeout_s" in message and "0.5 s" in message and "1 iterations" in message


def test_progress_resets_the_clock_and_a_pause_stops_it():
    now = [100.0]
    progress = ProgressTracker(clock=lambda: now[0])
    progress.start(10.0, "bound")
    for _ in range(5):  # 5 x 8 s: far beyond the bound in total, never between two ticks
        now[0] += 8.0
        assert progress.problem() is None
        progress.tick()
    assert progress.iterations == 5 and progress.longest_iteration_s == 8.0
    now[0] += 10.5
    assert progress.problem()[0] == "StalledRun"
    progress.tick()
    progress.hold()  # paused: no progress expected
    now[0] += 1000
    assert progress.problem() is None and not progress.heartbeat_fields()["stalled"]
    progress.release()
    now[0] += 9.0
    assert progress.problem() is None
    fields = progress.heartbeat_fields()
    assert fields["iterations"] == 6 and fields["since_progress_s"] == 9.0 and fields["stall_timeout_s"] == 10.0
    progress.stop()  # training over: the bound now covers the way out only
    assert progress.heartbeat_fields()["stall_timeout_s"] is None
    now[0] += 9.0
    assert progress.problem() is None
    now[0] += 1000
    assert progress.problem()[0] == "StalledRun" and "shutting down" in progress.problem()[1]


def test_real_ticks_keep_a_run_alive_until_they_stop():
    progress = ProgressTracker()
    progress.start(2.0, "bound")  # ticks every 20 ms: a loaded machine may hold the ticker back, not for 2 s
    stop = threading.Event()

    def train() -> None:
        while not stop.wait(0.02):
            progress.tick()

    ticker = threading.Thread(target=train, daemon=True)
    ticker.start()
    dog, out = watchdog(progress)
    with dog:
        wait_until(lambda: progress.iterations >= 20, 30, "twenty iterations")
        assert out.failures == []
        stop.set()
        wait_until(lambda: out.failures, 15, "the stall after the ticks stopped")
    assert out.failures[0][0] == "StalledRun"


def test_a_cancel_the_runtime_cannot_honour_ends_the_run_after_the_wait():
    control = RunControl()
    dog, out = watchdog(ProgressTracker(), control, cancel_wait_s=0.3)
    with dog:
        control.request_cancel("received SIGTERM")
        wait_until(lambda: out.cancels, 10, "the stuck cancel to be ended")
    assert "received SIGTERM" in out.cancels[0] and "safe point" in out.cancels[0]
    assert out.failures == []


def test_a_cancel_honoured_at_a_safe_point_is_left_to_the_runtime():
    control = RunControl()
    progress = ProgressTracker()
    progress.start(0.2, "bound")  # the final checkpoint may outlast the bound: not a stall
    dog, out = watchdog(progress, control, cancel_wait_s=0.2)
    with dog:
        control.request_cancel("stop")
        with pytest.raises(Exception):
            control.checkpoint()
        time.sleep(0.8)
    assert out.cancels == [] and out.failures == []


def test_a_cancel_whose_cleanup_never_ends_is_ended_at_the_deadline():
    """Reaching the safe point is not enough: a library's shutdown can wait for ever on a frozen process."""
    control = RunControl()
    dog, out = watchdog(ProgressTracker(), control, cancel_wait_s=0.2, cancel_deadline_s=0.6)
    with dog:
        control.request_cancel("received SIGTERM")
        with pytest.raises(Exception):
            control.checkpoint()  # honoured; the runtime's cleanup then hangs
        wait_until(lambda: out.cancels, 10, "the stuck cleanup to be ended")
    assert "received SIGTERM" in out.cancels[0] and "cleanup" in out.cancels[0]
    assert out.failures == []


def test_a_shutdown_that_outlasts_the_stall_bound_fails_the_run():
    progress = ProgressTracker()
    progress.start(0.3, "training.stall_timeout_s")
    progress.tick(4)
    dog, out = watchdog(progress)
    with dog:
        progress.stop()  # training ended; the final checkpoint or the library's cleanup hangs
        wait_until(lambda: out.failures, 10, "the stalled shutdown")
    kind, message = out.failures[0]
    assert kind == "StalledRun" and "shutting down" in message and "0.3 s" in message
    assert "4 iterations" in message


def test_a_quick_shutdown_after_training_is_no_stall():
    progress = ProgressTracker()
    progress.start(5.0, "bound")  # far above the 0.1 s the shutdown takes, on a loaded machine too
    dog, out = watchdog(progress)
    with dog:
        progress.tick(1)
        progress.stop()
        progress.stop()  # the runtime and the worker's entry point both say so
        time.sleep(0.1)
    assert out.failures == [] and progress.shutdown_stalled() is None


def test_a_terminal_event_is_written_once():
    import io

    stream = io.StringIO()
    emitter = TelemetryEmitter("r1", stream=stream)
    assert emitter.failure("StalledRun", "no progress") is not None
    assert emitter.run_completed({}) is None and emitter.run_cancelled("late") is None
    assert emitter.heartbeat(iterations=3) is None  # nothing follows the end
    assert emitter.terminal == "run_failed"
    assert [json.loads(line)["type"] for line in stream.getvalue().splitlines()] == ["run_failed"]


# -- real worker processes --------------------------------------------------

PROGRAM = textwrap.dedent("""\
    import sys, threading, time
    from mosaic.workerkit.cli import WorkerProgram, worker_main

    class Config:
        def __init__(self, data):
            self.run_id, self.seed, self.mode = data["run_id"], 0, data["mode"]
        def to_dict(self):
            return {"run_id": self.run_id, "seed": 0, "mode": self.mode}
        @classmethod
        def from_dict(cls, data):
            return cls(data)

    class Runtime:
        def __init__(self, config, context):
            self.config, self.ctx = config, context
        def run(self):
            ctx = self.ctx
            ctx.emitter.run_started(worker="stuck", config_digest="0" * 64, versions={}, resources={})
            if self.config.mode == "thread":
                helper = threading.Thread(target=lambda: (time.sleep(0.5), 1 / 0), name="helper", daemon=True)
                helper.start()
                ctx.progress.watch_thread(helper, "the helper thread")
            ctx.progress.start(1.5 if self.config.mode == "stall" else 600, "stall bound")
            for i in range(3):
                ctx.control.checkpoint()
                ctx.progress.tick(i + 1)
            ctx.emitter.log("training is stuck now")
            threading.Event().wait()  # stuck for ever, as inside a library call

    PROGRAM = WorkerProgram(name="stuck", config_from_dict=Config.from_dict, make_runtime=Runtime,
                            default_config=dict, heartbeat_interval_s=lambda config: 0.2)
    sys.exit(worker_main(PROGRAM))
    """)


def run_stuck(tmp_path: Path, mode: str) -> subprocess.Popen:
    script = tmp_path / "stuck_worker.py"
    script.write_text(PROGRAM)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"run_id": f"stuck-{mode}", "mode": mode}))
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    return subprocess.Popen([sys.executable, str(script), "--config", str(config), "--run-dir", str(run_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen, timeout: float) -> tuple[int, list[dict], str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(f"worker still running after {timeout} s: {err[-2000:]}")
    return proc.returncode, [json.loads(line) for line in out.splitlines()], err


@pytest.mark.parametrize("mode, kind, words", [
    ("thread", "ThreadDied", ["the helper thread", "ZeroDivisionError"]),
    ("stall", "StalledRun", ["stall bound", "1.5 s", "3 iterations"]),
])
def test_a_stuck_worker_process_fails_with_the_cause(tmp_path, mode, kind, words):
    code, events, err = finish(run_stuck(tmp_path, mode), timeout=60)
    assert code == EXIT_FAILED, err
    last = events[-1]
    assert last["type"] == "run_failed" and last["error_type"] == kind, last
    assert all(w in last["message"] for w in words), last["message"]
    assert last["traceback"]  # the dead thread's traceback, or where the main thread is stuck
    beats = [e for e in events if e["type"] == "heartbeat"]
    assert beats and all("iterations" in b and "stalled" in b for b in beats)
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(TELEMETRY_SCHEMA)
    for event in events:
        validator.validate(event)


def test_sigterm_ends_a_worker_stuck_inside_training_as_cancelled_within_seconds(tmp_path):
    proc = run_stuck(tmp_path, "cancel")
    lines: list[str] = []
    for line in proc.stdout:  # wait until the main thread is stuck
        lines.append(line)
        if "training is stuck now" in line:
            break
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code, events, err = finish(proc, timeout=30)
    assert time.monotonic() - sent < 20  # CANCEL_WAIT_S is 10 s
    assert code == EXIT_CANCELLED, err
    last = events[-1] if events else json.loads(lines[-1])
    assert last["type"] == "run_cancelled" and "SIGTERM" in last["reason"] and "safe point" in last["reason"]
    assert os.path.isdir(tmp_path / "run")
