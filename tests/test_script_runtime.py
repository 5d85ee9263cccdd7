"""Running an upstream script as a run: real child processes, real signals, real telemetry."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import psutil
import pytest

from mosaic.workerkit.lifecycle import ProgressTracker, RunCancelled, RunControl
from mosaic.runs import RunDir
from mosaic.workerkit.script_runtime import ScriptFailed, ScriptRuntime
from mosaic.workerkit.telemetry import TelemetryEmitter
from mosaic.workerkit.cli import WorkerContext
from mosaic.testing import wait_until

# An "upstream script": prints a JSON line per step; modes make it misbehave.
SCRIPT = textwrap.dedent("""\
    import json, signal, subprocess, sys, time
    mode, steps, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    if mode == "ignore_term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if mode == "grandchild":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print(json.dumps({"grandchild": child.pid}), flush=True)
    print("starting the experiment", flush=True)
    for i in range(steps):
        print(json.dumps({"step": i, "return": float(i)}), flush=True)
        print(f"stderr line {i}", file=sys.stderr, flush=True)
        time.sleep(delay)
    if mode == "fail":
        print("ValueError: the loss exploded", file=sys.stderr, flush=True)
        sys.exit(3)
    """)


def translate(line: str, stream: str):
    if stream != "stdout":
        return []
    try:
        data = json.loads(line)
    except ValueError:
        return [("log", {"message": line})]
    if "step" not in data:
        return [("log", {"message": line, **data})]
    step = data["step"] + 1
    return [("metrics", {"iteration": step, "timesteps_total": step * 10, "episode_return_mean": data["return"]})]


class Harness:
    def __init__(self, tmp_path: Path, mode: str, steps: int, delay: float, **kwargs) -> None:
        script = tmp_path / "upstream.py"
        script.write_text(SCRIPT)
        self.stream = io.StringIO()
        self.progress = ProgressTracker()
        emitter = TelemetryEmitter("script-run", stream=self.stream)
        self.control = RunControl(emitter, self.progress)
        run_dir = RunDir(tmp_path / "run")
        run_dir.root.mkdir()
        self.ctx = WorkerContext(emitter=emitter, control=self.control, run_dir=run_dir, progress=self.progress)
        self.runtime = ScriptRuntime([sys.executable, str(script), mode, str(steps), str(delay)], self.ctx,
                                     kwargs.pop("translate", translate), **kwargs)
        self.result: dict | None = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            self.result = self.runtime.run()
        except BaseException as exc:  # noqa: BLE001  (the test inspects it)
            self.error = exc

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]

    def metrics(self) -> list[dict]:
        return [e for e in self.events() if e["type"] == "metrics"]

    def group_alive(self) -> list[psutil.Process]:
        pid = self.runtime.proc.pid if self.runtime.proc else None
        found = []
        for proc in psutil.process_iter(["pid"]):
            try:
                if pid is not None and os.getpgid(proc.pid) == pid and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
            except (psutil.Error, ProcessLookupError, OSError):
                continue
        return found


def test_lines_are_relayed_in_order_and_tick_progress(tmp_path):
    h = Harness(tmp_path, "ok", steps=5, delay=0.0)
    summary = h.runtime.run()
    assert [m["iteration"] for m in h.metrics()] == [1, 2, 3, 4, 5]
    assert h.events()[0] == {**h.events()[0], "type": "log", "message": "starting the experiment"}
    assert [e["seq"] for e in h.events()] == list(range(len(h.events())))
    assert h.progress.iterations == 5
    assert summary["returncode"] == 0 and summary["relayed"] == {"log": 1, "metrics": 5}
    kept = (tmp_path / "run" / "logs" / "script.stderr").read_text().splitlines()
    assert kept == [f"stderr line {i}" for i in range(5)]
    assert h.group_alive() == []


def test_a_failing_script_fails_the_run_with_its_stderr(tmp_path):
    h = Harness(tmp_path, "fail", steps=2, delay=0.0)
    with pytest.raises(ScriptFailed) as err:
        h.runtime.run()
    assert "upstream.py exited with code 3" in str(err.value) or "python" in str(err.value)
    assert "exited with code 3" in str(err.value) and "the loss exploded" in str(err.value)
    assert len(h.metrics()) == 2  # what it printed before failing was relayed


@pytest.mark.parametrize("mode", ["ok", "ignore_term"])
def test_cancel_stops_the_whole_group(tmp_path, mode):
    h = Harness(tmp_path, mode, steps=10_000, delay=0.01, grace_s=1.0)
    h.thread.start()
    wait_until(lambda: len(h.metrics()) >= 3, 60, "three relayed metrics")
    h.control.request_cancel("received SIGTERM")
    h.thread.join(30)
    assert not h.thread.is_alive()
    assert isinstance(h.error, RunCancelled)
    assert h.runtime.proc.returncode == (-signal.SIGKILL if mode == "ignore_term" else -signal.SIGTERM)
    assert h.group_alive() == []


def test_pause_stops_the_script_and_resume_continues_it(tmp_path):
    h = Harness(tmp_path, "ok", steps=10_000, delay=0.01)
    h.thread.start()
    wait_until(lambda: len(h.metrics()) >= 3, 60, "three relayed metrics")
    h.control.request_pause()
    child = psutil.Process(h.runtime.proc.pid)
    wait_until(lambda: child.status() == psutil.STATUS_STOPPED, 30, "the script to be stopped")
    wait_until(lambda: any(e["type"] == "paused" for e in h.events()), 30, "the paused event")
    frozen = len(h.metrics())
    assert child.status() == psutil.STATUS_STOPPED and len(h.metrics()) == frozen  # stopped: no output
    assert h.progress.heartbeat_fields()["stalled"] is False
    h.control.request_resume()
    wait_until(lambda: len(h.metrics()) > frozen + 3, 60, "metrics after resume")
    assert any(e["type"] == "resumed" for e in h.events())
    assert child.status() != psutil.STATUS_STOPPED
    h.control.request_cancel("done")
    h.thread.join(30)
    assert isinstance(h.error, RunCancelled) and h.group_alive() == []


def test_a_translator_that_raises_stops_the_script_and_names_the_line(tmp_path):
    def picky(line: str, stream: str):
        if '"step": 2' in line:
            raise KeyError("step")
        return translate(line, stream)

    h = Harness(tmp_path, "ok", steps=10_000, delay=0.01, translate=picky)
    with pytest.raises(ScriptFailed) as err:
        h.runtime.run()
    assert "could not translate the script's stdout line" in str(err.value) and '"step": 2' in str(err.value)
    assert h.group_alive() == []


def test_grandchildren_go_with_the_script(tmp_path):
    h = Harness(tmp_path, "grandchild", steps=3, delay=0.0)
    h.runtime.run()
    grandchild = next(e["grandchild"] for e in h.events() if "grandchild" in e)
    wait_until(lambda: not psutil.pid_exists(grandchild)
               or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE, 10, "the grandchild to be gone")


PROGRAM = textwrap.dedent("""\
    import sys
    from dataclasses import dataclass
    from mosaic import configkit
    from mosaic.workerkit.script_runtime import ScriptRuntime
    from mosaic.workerkit.cli import WorkerProgram, worker_main

    UPSTREAM = sys.argv.pop(1)  # the script to run; the rest is the shared worker command line

    @dataclass
    class Config:
        run_id: str = configkit.option(help="run id")
        seed: int = configkit.option(0)
        def to_dict(self):
            return configkit.to_dict(self)
        @classmethod
        def from_dict(cls, data):
            return configkit.from_dict(cls, data)

    def translate(line, stream):
        if stream == "stdout" and line.startswith("{"):
            import json
            step = json.loads(line)["step"] + 1
            return [("metrics", {"iteration": step, "timesteps_total": step})]
        return []

    def runtime(config, context):
        context.emitter.emit("run_started", worker="script", config_digest="x", versions={},
                             resources={}, seed=config.seed)
        return ScriptRuntime([sys.executable, UPSTREAM, "ok", "100000", "0.01"], context, translate,
                             grace_s=5)

    PROGRAM = WorkerProgram(name="script", config_from_dict=Config.from_dict, make_runtime=runtime,
                            default_config=lambda: {"seed": 0}, heartbeat_interval_s=lambda c: 0.5)
    sys.exit(worker_main(PROGRAM))
    """)


def test_sigterm_to_a_script_worker_cancels_it_and_leaves_nothing(tmp_path):
    (tmp_path / "upstream.py").write_text(SCRIPT)
    (tmp_path / "worker.py").write_text(PROGRAM)
    (tmp_path / "config.json").write_text(json.dumps({"run_id": "script-e2e"}))
    (tmp_path / "run").mkdir()
    out = tmp_path / "telemetry.jsonl"
    with out.open("w") as stdout, (tmp_path / "stderr.log").open("w") as stderr:
        proc = subprocess.Popen([sys.executable, str(tmp_path / "worker.py"), str(tmp_path / "upstream.py"),
                                 "--config", str(tmp_path / "config.json"), "--run-dir", str(tmp_path / "run")],
                                stdout=stdout, stderr=stderr, start_new_session=True)

    def events():
        return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]

    try:
        wait_until(lambda: sum(e["type"] == "metrics" for e in events()) >= 3, 60, "relayed metrics")
        children = psutil.Process(proc.pid).children(recursive=True)
        assert children
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 3, (tmp_path / "stderr.log").read_text()[-2000:]
        assert events()[-1]["type"] == "run_cancelled" and "SIGTERM" in events()[-1]["reason"]
        for child in children:
            wait_until(lambda c=child: not c.is_running() or c.status() == psutil.STATUS_ZOMBIE, 10,
                       "the script to be gone")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(10)


OBSERVED = textwrap.dedent("""\
    import json, os, sys
    out = os.fdopen(int(os.environ["OBSERVER_FD"]), "w", buffering=1)
    for i in range(3):
        print(f"global_step={i}, a print of the script", flush=True)
        out.write(json.dumps({"step": i, "return": float(i)}) + "\\n")
    """)


def test_an_observer_pipe_keeps_telemetry_apart_from_the_scripts_prints(tmp_path):
    """With telemetry_fd_env the child gets a pipe of its own; its stdout is kept, not mixed in."""
    script = tmp_path / "observed.py"
    script.write_text(OBSERVED)
    seen: list[tuple[str, str]] = []

    def relay(line: str, stream: str):
        seen.append((stream, line))
        return translate(line, "stdout") if stream == "telemetry" else []

    h = Harness(tmp_path, "ok", steps=0, delay=0.0)
    h.runtime = ScriptRuntime([sys.executable, str(script)], h.ctx, relay, telemetry_fd_env="OBSERVER_FD",
                              keep_stdout=True)
    summary = h.runtime.run()
    assert summary["relayed"] == {"metrics": 3}
    assert [m["episode_return_mean"] for m in h.metrics()] == [0.0, 1.0, 2.0]
    assert [line for stream, line in seen if stream == "telemetry"] == [
        json.dumps({"step": i, "return": float(i)}) for i in range(3)]
    assert [line for stream, line in seen if stream == "stdout"]  # relayed too (and ignored by relay)
    kept = (tmp_path / "run" / "logs" / "script.stdout").read_text().splitlines()
    assert kept == [f"global_step={i}, a print of the script" for i in range(3)]
    assert "OBSERVER_FD" not in os.environ and h.group_alive() == []


def test_stdout_nobody_translates_goes_straight_to_its_log(tmp_path):
    """relay_stdout=False: the child writes stdout into logs/script.stdout itself; the translator never sees it."""
    script = tmp_path / "observed.py"
    script.write_text(OBSERVED)
    seen: list[str] = []

    def relay(line: str, stream: str):
        seen.append(stream)
        return translate(line, "stdout") if stream == "telemetry" else []

    h = Harness(tmp_path, "ok", steps=0, delay=0.0)
    h.runtime = ScriptRuntime([sys.executable, str(script)], h.ctx, relay, telemetry_fd_env="OBSERVER_FD",
                              keep_stdout=True, relay_stdout=False)
    assert h.runtime.run()["relayed"] == {"metrics": 3}
    assert set(seen) == {"telemetry"}
    kept = (tmp_path / "run" / "logs" / "script.stdout").read_text().splitlines()
    assert kept == [f"global_step={i}, a print of the script" for i in range(3)]
    assert h.group_alive() == []
