"""A Ray run that stops making progress ends loudly, never hangs.

Real worker subprocesses (``python -m ray_worker.cli``) with their own local Ray:

* RLlib's APPO learner thread dies (an exception raised inside it by a
  test-only launcher through CPython's ``PyThreadState_SetAsyncExc``; RLlib's
  code is untouched): the run fails with ``ThreadDied`` naming the thread and
  the exception, within seconds;
* the env runner stops answering (its process is frozen with SIGSTOP): the run
  fails with ``StalledRun`` naming ``rllib.stall_timeout_s`` within that
  bound, and a SIGTERM while ``algo.train()`` is stuck ends it as cancelled
  within seconds.
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

import psutil
import pytest

from ray_support import TINY, merge
from ray_worker.config import RayWorkerConfig
from mosaic.testing import wait_until

# Runs the Ray worker; once RLlib's learner thread has been updating for a
# moment, raises an exception inside it, as a bug in a loss would.
LEARNER_KILLER = textwrap.dedent("""\
    import ctypes, sys, threading, time

    class InjectedLearnerFailure(RuntimeError):
        pass

    def kill_learner(marker):
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            learners = [t for t in threading.enumerate() if t.name == "_LearnerThread" and t.is_alive()]
            if learners:
                time.sleep(3)  # let it train a little first
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(learners[0].ident),
                                                           ctypes.py_object(InjectedLearnerFailure))
                open(marker, "w").write(str(time.time()))
                return
            time.sleep(0.05)

    threading.Thread(target=kill_learner, args=(sys.argv.pop(1),), daemon=True).start()
    from ray_worker.cli import main
    sys.exit(main(sys.argv[1:]))
    """)


class WorkerRun:
    """One worker subprocess in its own session, its telemetry in a file."""

    def __init__(self, tmp_path: Path, override: dict, command: list[str] | None = None) -> None:
        config = merge(TINY, override)
        config["run_id"] = f"stall-{time.monotonic_ns()}"
        config["reporting"] = {"heartbeat_interval_s": 0.5}
        self.config_path = tmp_path / "config.json"
        self.config_path.write_text(json.dumps(config))
        self.run_dir = tmp_path / "run"
        self.run_dir.mkdir()
        self.out_path, self.err_path = tmp_path / "telemetry.jsonl", tmp_path / "stderr.log"
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            self.proc = subprocess.Popen(
                [*(command or [sys.executable, "-m", "ray_worker.cli"]), "--config", str(self.config_path),
                 "--run-dir", str(self.run_dir)],
                stdout=out, stderr=err, start_new_session=True,
                env={**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"})
        self.seen: set[int] = set()

    def events(self) -> list[dict]:
        lines = self.out_path.read_text().splitlines()
        return [json.loads(line) for line in lines if line.strip()]

    def first(self, kind: str) -> dict | None:
        return next((e for e in self.events() if e["type"] == kind), None)

    def descendants(self) -> list[psutil.Process]:
        try:
            found = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return []
        self.seen.update(p.pid for p in found)
        return found

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker still running after {timeout} s; stderr: "
                                 f"{self.err_path.read_text()[-3000:]}") from None

    def cleanup(self) -> None:
        self.descendants()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        for pid in self.seen:  # Ray's processes, stopped ones included
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(30)


@pytest.fixture
def worker_runs():
    runs: list[WorkerRun] = []
    yield runs
    for run in runs:
        run.cleanup()


def test_a_dead_learner_thread_fails_the_run_naming_it_within_seconds(tmp_path, worker_runs):
    script = tmp_path / "learner_killer.py"
    script.write_text(LEARNER_KILLER)
    marker = tmp_path / "injected_at"
    run = WorkerRun(tmp_path, {
        "algorithm": "APPO", "total_timesteps": 1_000_000,
                     "algo_params": {"train_batch_size_per_learner": 50, "rollout_fragment_length": 25,
                                     "min_time_s_per_iteration": 0.2, "fcnet_hiddens": [16, 16]},
        "tensorboard": False, "checkpoint": {"at_end": False}}, [sys.executable, str(script), str(marker)])
    worker_runs.append(run)
    code = run.wait(300)
    assert marker.exists(), run.err_path.read_text()[-3000:]
    failed = run.events()[-1]
    assert code == 1 and failed["type"] == "run_failed", failed
    assert failed["error_type"] == "ThreadDied"
    assert "RLlib's learner thread" in failed["message"] and "_LearnerThread" in failed["message"]
    # the message names the exception that ended the thread: ours, or RLlib's wrapping of it when it
    # landed inside RLlib's own error handling; the traceback holds the whole chain
    assert "died: " in failed["message"] and "without raising" not in failed["message"]
    assert "InjectedLearnerFailure" in failed["traceback"]
    assert failed["ts"] - float(marker.read_text()) < 30
    assert run.first("run_started") is not None


def test_an_appo_run_that_finishes_is_not_mistaken_for_a_dead_learner(tmp_path, worker_runs):
    """Stopping the algorithm ends RLlib's learner thread: after training, that is no failure."""
    run = WorkerRun(tmp_path, {
        "algorithm": "APPO", "total_timesteps": 300,
                     "algo_params": {"train_batch_size_per_learner": 50, "rollout_fragment_length": 25,
                                     "min_time_s_per_iteration": 0, "fcnet_hiddens": [16, 16]},
        "tensorboard": False})
    worker_runs.append(run)
    code = run.wait(300)
    last = run.events()[-1]
    assert code == 0 and last["type"] == "run_completed", (last, run.err_path.read_text()[-3000:])
    assert any(e["type"] == "checkpoint_saved" for e in run.events())


def env_runner_of(run: WorkerRun) -> psutil.Process | None:
    """The (only) remote env runner of a run, once it is up."""
    for proc in run.descendants():
        try:
            if "EnvRunner" in " ".join(proc.cmdline()):
                return proc
        except psutil.Error:
            continue
    return None


HANGING = {"rllib": {"num_env_runners": 1},
           "algorithm": "ppo", "total_timesteps": 1_000_000,
                        "algo_params": {"train_batch_size_per_learner": 100, "minibatch_size": 50,
                                        "num_epochs": 1, "fcnet_hiddens": [16, 16]},
           "tensorboard": False, "checkpoint": {"at_end": False}}
STALL_BOUND = 8.0
#: The runs whose env runner is frozen, by the test that reads each: its config, and whether a SIGTERM follows.
FROZEN = {
    "stall": (merge(HANGING, {"rllib": {"stall_timeout_s": STALL_BOUND}}), False),
    "stuck": (HANGING, True),  # the default stall bound: minutes
    # RLlib gives up sampling after ``sample_timeout_s``: ``train()`` returns, then the cleanup hangs
    "cleanup": (merge(HANGING, {"algo_params": {"sample_timeout_s": 1}}), True),
}


class FrozenRun:
    """A worker whose env runner was frozen with SIGSTOP once an iteration had completed (and then, for a
    cancel test, sent SIGTERM); when each happened, and when the worker ended."""

    def __init__(self, run: WorkerRun, sigterm: bool) -> None:
        self.run, self.sigterm = run, sigterm
        self.frozen_at: float | None = None  # wall clock, as the events' ts
        self.sent: float | None = None  # monotonic
        self.ended: float | None = None  # monotonic
        self._waiter = threading.Thread(target=self._wait, daemon=True)

    def _wait(self) -> None:
        self.run.proc.wait()
        self.ended = time.monotonic()

    def freeze(self, runner: psutil.Process) -> None:
        runner.send_signal(signal.SIGSTOP)
        self.frozen_at = time.time()
        if self.sigterm:
            self.sent = time.monotonic()
            self.run.proc.send_signal(signal.SIGTERM)
        self._waiter.start()

    def wait(self, timeout: float) -> int:
        self._waiter.join(timeout)
        if self._waiter.is_alive():
            raise AssertionError(f"worker still running after {timeout} s; stderr: "
                                 f"{self.run.err_path.read_text()[-3000:]}") from None
        return self.run.proc.returncode


@pytest.fixture(scope="module")
def frozen_runs(tmp_path_factory):
    """The three runs with a frozen env runner, started together: each test then waits for its own to end (the
    stall bound, the cancel's waits) while the others wait for theirs. Each run is frozen as soon as it has
    completed an iteration, as a lone run would be."""
    runs = {name: FrozenRun(WorkerRun(tmp_path_factory.mktemp(name), config), sigterm)
            for name, (config, sigterm) in FROZEN.items()}
    try:
        def freeze_the_ready() -> bool:
            for name, frozen in runs.items():
                if frozen.frozen_at is not None:
                    continue
                run = frozen.run
                assert run.proc.poll() is None, f"{name}: {run.err_path.read_text()[-3000:]}"
                runner = env_runner_of(run) if run.first("metrics") else None
                if runner is not None:
                    frozen.freeze(runner)
            return all(frozen.frozen_at is not None for frozen in runs.values())

        wait_until(freeze_the_ready, 300, "a first iteration of each run, and its env runner", interval=0.1)
        yield runs
    finally:
        for frozen in runs.values():
            frozen.run.cleanup()


def test_an_env_runner_that_never_returns_fails_the_run_within_the_stall_bound(frozen_runs):
    frozen = frozen_runs["stall"]
    run, bound = frozen.run, STALL_BOUND
    code = frozen.wait(120)
    failed = run.events()[-1]
    assert code == 1 and failed["type"] == "run_failed", failed
    assert failed["error_type"] == "StalledRun"
    assert "rllib.stall_timeout_s" in failed["message"] and f"{bound:g} s" in failed["message"]
    # within the bound of the last completed iteration (plus the watchdog's and Python's reaction time)
    assert failed["ts"] - frozen.frozen_at < bound + 10
    beats = [e for e in run.events() if e["type"] == "heartbeat" and "iterations" in e]
    assert beats and beats[-1]["stall_timeout_s"] == bound
    assert any(b["iterations"] >= 1 for b in beats)


def wait_for_the_cancel(frozen: FrozenRun) -> dict:
    run = frozen.run
    code = frozen.wait(60)
    # the watchdog gives a stuck run 10-20 s to reach a safe point, and 25 s in all to end;
    # the launcher's kill would come after 30 s
    assert frozen.ended - frozen.sent < 29
    last = run.events()[-1]
    assert code == 3 and last["type"] == "run_cancelled", last
    assert "SIGTERM" in last["reason"] and "safe point" in last["reason"]
    return last


def test_sigterm_while_training_is_stuck_cancels_the_run_within_seconds(frozen_runs):
    wait_for_the_cancel(frozen_runs["stuck"])


def test_sigterm_when_the_safe_point_is_reached_but_cleanup_hangs_still_ends_the_run(frozen_runs):
    """RLlib gives up sampling after ``sample_timeout_s``, so ``train()`` returns and the cancel is
    honoured at the safe point; then stopping the algorithm waits for ever on the frozen runner."""
    last = wait_for_the_cancel(frozen_runs["cleanup"])
    assert "cleanup" in last["reason"], last


def test_the_stall_bound_is_validated_and_derived_from_the_batch_size():
    from mosaic.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        RayWorkerConfig.from_dict({**merge(TINY, {}), "run_id": "x", "rllib": {"stall_timeout_s": 1}})
    assert "rllib.stall_timeout_s" in str(err.value) and "5" in str(err.value)
    small = RayWorkerConfig.from_dict({**merge(TINY, {}), "run_id": "x"})
    big = RayWorkerConfig.from_dict({**merge(TINY, {"algo_params": {
        "train_batch_size_per_learner": 20_000, "minibatch_size": 500, "num_epochs": 10}}), "run_id": "x"})
    assert small.stall_timeout() == 300.0  # the floor
    assert big.stall_timeout() == pytest.approx(20_000 * (1 / 20 + 10 / 100))
    assert RayWorkerConfig.from_dict({**merge(TINY, {"rllib": {"stall_timeout_s": 7}}),
                                      "run_id": "x"}).stall_timeout() == 7.0
    proc = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--validate", "--config", "-"],
                          input=json.dumps({"rllib": {"stall_timeout_s": 1}}), capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == ["mosaic: error: rllib.stall_timeout_s: 1.0 is below the minimum 5.0"]
