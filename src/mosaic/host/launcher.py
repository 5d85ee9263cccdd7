"""Start a worker process for a run and follow it to the end (no daemon needed).

The worker runs as ``python -m <worker>.cli --config <run>/config.json
--run-dir <run>`` in its own process group, so a terminal's Ctrl-C reaches
only MOSAIC, which then asks the whole group to stop (SIGTERM, then SIGKILL
after a grace period). Its stdout is telemetry (stored by
:class:`~mosaic.host.recorder.RunRecorder`); its stderr goes to ``logs/worker.log``.
However the worker ends, its FastLane segments are removed (last frames kept).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from mosaic.host.discovery import DiscoveredWorker
from mosaic.errors import UserError
from mosaic.pids import signal_group
from mosaic.host.recorder import EventCallback, LineSplitter, RunRecorder
from mosaic.run_status import RunState
from mosaic.runs import RunDir, RunStore

VALIDATE_TIMEOUT_S = 120


def worker_command(worker: DiscoveredWorker, python: str | None = None) -> list[str]:
    """``python -m <worker>.cli`` with the worker's own environment's interpreter when it has one."""
    return [python or worker.python or sys.executable, "-m", worker.cli_module]


#: Variables of the launching process that must not reach a worker. ``WANDB_SERVICE`` names the W&B service
#: of a process that used W&B (a notebook, a test process, an RLlib driver): a worker's W&B runs would attach
#: to that service, with its settings, instead of starting their own (an offline run then lost its project).
NOT_INHERITED = ("WANDB_SERVICE",)


def _worker_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in NOT_INHERITED}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def validate_config(worker: DiscoveredWorker, config: Mapping[str, Any],
                    python: str | None = None) -> dict[str, Any]:
    """Ask the worker to check ``config``; returns it normalised or raises :class:`UserError`."""
    cmd = [*worker_command(worker, python), "--validate", "--config", "-"]
    try:
        proc = subprocess.run(cmd, input=json.dumps(dict(config)), capture_output=True, text=True,
                              timeout=VALIDATE_TIMEOUT_S, env=_worker_env())
    except subprocess.TimeoutExpired:
        raise UserError(f"worker {worker.name!r} did not validate the config within "
                        f"{VALIDATE_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        message = lines[-1] if lines else f"exit code {proc.returncode}"
        for prefix in ("mosaic: error: ", f"{worker.name}: error: "):
            message = message[len(prefix):] if message.startswith(prefix) else message
        if proc.returncode == 2:
            raise UserError(message)
        raise UserError(f"worker {worker.name!r} could not check the config: {message}")
    try:
        return json.loads(proc.stdout)
    except ValueError:
        raise UserError(f"worker {worker.name!r} printed an invalid normalised config") from None


def validate_configs(worker: DiscoveredWorker, configs: list[Mapping[str, Any]],
                     python: str | None = None, timeout_s: float | None = None,
                     rounded: list[dict[str, Any] | None] | None = None) -> list[dict[str, Any] | UserError]:
    """Check many configs in one worker process (``--validate-many``): for each, the normalised config or
    the :class:`UserError` naming what is wrong, in order. ``rounded``, if given, is filled with each config's
    rounded budget as its worker says it up front (``{"env_steps", "message"}``; None: taken as it is)."""
    if not configs:
        return []
    cmd = [*worker_command(worker, python), "--validate-many"]
    text = "".join(json.dumps(dict(c)) + "\n" for c in configs)
    limit = timeout_s or VALIDATE_TIMEOUT_S + 5 * len(configs)
    try:
        proc = subprocess.run(cmd, input=text, capture_output=True, text=True, timeout=limit, env=_worker_env())
    except subprocess.TimeoutExpired:
        raise UserError(f"worker {worker.name!r} did not check {len(configs)} configs within {limit:g} s") from None
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(answers) != len(configs):
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise UserError(f"worker {worker.name!r} could not check the configs: "
                        f"{lines[-1] if lines else f'exit code {proc.returncode}'}")
    if rounded is not None:
        rounded[:] = [a.get("rounded_budget") for a in answers]
    return [a["config"] if a.get("ok") else UserError(str(a.get("error"))) for a in answers]


def create_run(store: "RunStore", worker: DiscoveredWorker, config: Mapping[str, Any], *, status: str,
               python: str | None = None, **manifest: Any) -> RunDir:
    """The run folder of a validated config, with its manifest: the one place `mosaic run` and the
    daemon create runs (status, versions, host, the shared fields' summary)."""
    import time

    from mosaic.provenance import host_info, package_versions
    from mosaic.workerkit.run_fields import summarize

    return store.create(str(config["run_id"]), config, {
        "worker": worker.name, "worker_version": worker.metadata.version, "status": status,
        "created_at": time.time(), "host": host_info(), "versions": package_versions(["mosaic-marl"]),
        "python": python or worker.python or sys.executable,
        "run": summarize(config, worker=worker.name).to_dict(), **manifest})


def _hash_seed(run: RunDir) -> dict[str, str]:
    """PYTHONHASHSEED from the run's seed, unless the user set one.

    Python randomises str hashing per process; libraries that iterate over
    sets of agent ids (RLlib does) then batch agents in a different order in
    every process, and the same seed stops giving the same run.
    """
    if "PYTHONHASHSEED" in os.environ:
        return {}
    try:
        seed = run.read_config().get("seed", 0)
    except (OSError, ValueError):
        return {}
    return {"PYTHONHASHSEED": str(seed % 4294967296)} if isinstance(seed, int) else {}


@dataclass
class RunOutcome:
    status: str  # the manifest spelling of a terminal RunState: completed | failed | cancelled
    returncode: int
    terminal: dict[str, Any]


def _stderr_tail(path: Path, limit: int = 2000) -> str:
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_launch(worker: DiscoveredWorker, run: RunDir, python: str | None = None,
               env: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command and environment of a run's worker, the same for ``mosaic run`` and the daemon.

    Started with ``start_new_session=True`` the worker leads its own process
    group, which :func:`mosaic.pids.signal_group` stops as a whole.
    """
    cmd = [*worker_command(worker, python), "--config", str(run.config_path), "--run-dir", str(run.root)]
    return cmd, _worker_env({"MOSAIC_RUN_DIR": str(run.root), **_hash_seed(run), **(env or {})})


class WorkerProcess:
    """One running worker: its process group, stdout proxy and stop logic."""

    def __init__(self, worker: DiscoveredWorker, run: RunDir, *, python: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        cmd, full_env = run_launch(worker, run, python, env)
        run.worker_log_path.parent.mkdir(parents=True, exist_ok=True)
        stderr = run.worker_log_path.open("ab")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=stderr,
                                stdin=subprocess.DEVNULL, start_new_session=True, env=full_env)
        self._adopt(worker, run, proc, stderr, cmd, b"")

    @classmethod
    def adopt(cls, worker: DiscoveredWorker, run: RunDir, proc: subprocess.Popen, stderr: Any,
              cmd: list[str], pending: bytes = b"") -> "WorkerProcess":
        """A worker already started (``start_checked``); ``pending``: telemetry bytes already read."""
        process = cls.__new__(cls)
        process._adopt(worker, run, proc, stderr, cmd, pending)
        return process

    def _adopt(self, worker: DiscoveredWorker, run: RunDir, proc: subprocess.Popen, stderr: Any,
               cmd: list[str], pending: bytes) -> None:
        self.worker, self.run, self.proc, self._stderr, self._pending = worker, run, proc, stderr, pending
        self.cancel_requested = False
        self._kill_timer: threading.Timer | None = None
        run.update_manifest(status=RunState.STARTING.manifest, pid=proc.pid, command=cmd)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal_group(self, sig: int) -> None:
        signal_group(self.proc.pid, sig)

    def cancel(self, grace_s: float = 30.0) -> None:
        """SIGTERM to the group now; SIGKILL if it is still there after ``grace_s``."""
        if self.cancel_requested:
            self.signal_group(signal.SIGKILL)  # second request: stop waiting
            return
        self.cancel_requested = True
        self.signal_group(signal.SIGTERM)
        self._kill_timer = threading.Timer(grace_s, self.signal_group, args=(signal.SIGKILL,))
        self._kill_timer.daemon = True
        self._kill_timer.start()

    def follow(self, on_event: EventCallback | None = None) -> RunOutcome:
        """Store telemetry until the worker exits; returns how it ended."""
        splitter = LineSplitter()
        fd = self.proc.stdout.fileno()
        try:
            recorder = RunRecorder(self.run, on_event=on_event)
        except OSError as exc:
            self._stop_unrecorded(exc)
        with recorder:
            try:
                for line in splitter.feed(self._pending):
                    recorder.feed_line(line)
                while True:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        break
                    for line in splitter.feed(chunk):
                        recorder.feed_line(line)
                for line in splitter.flush():
                    recorder.feed_line(line)
            except OSError as exc:  # the run folder cannot take the telemetry: the run cannot go on unrecorded
                self._stop_unrecorded(exc)
            returncode = self.proc.wait()
            if self._kill_timer:
                self._kill_timer.cancel()
            # Anything left in the group (grandchildren) goes with the worker,
            # and so does the shared memory it can no longer release itself.
            self.signal_group(signal.SIGKILL)
            release_fastlane(self.run)
            self._stderr.close()
            try:
                terminal = recorder.finish(returncode, _stderr_tail(self.run.worker_log_path))
            except OSError as exc:
                self._stop_unrecorded(exc)
        state = RunState.from_terminal_event(terminal.get("type")) or RunState.FAILED
        return RunOutcome(state.manifest, returncode, terminal)


    def _stop_unrecorded(self, exc: OSError) -> None:
        """The run folder refused a write (ENOSPC, EROFS, ...): stop the worker's whole group, release its
        shared memory, say so in the manifest if it still can be written, and raise one line naming the folder."""
        from mosaic.errors import StorageError

        self.signal_group(signal.SIGKILL)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            pass
        release_fastlane(self.run)
        try:
            self._stderr.close()
        except OSError:
            pass
        cause = f"cannot write to {self.run.root}: {exc.strerror or exc}"
        try:
            self.run.update_manifest(status=RunState.FAILED.manifest,
                                     failure={"message": f"{cause}; the worker was stopped"})
        except OSError:
            pass
        raise StorageError(f"run {self.run.root.name}: {cause}; the worker was stopped (free space in "
                           f"{self.run.root.parent} or set MOSAIC_HOME elsewhere)") from None


class HandshakeFailed(UserError):
    """The worker refused the config (exit 2, its one error line is the message)."""


def start_checked(worker: DiscoveredWorker, store: RunStore, data: Mapping[str, Any], *, status: str,
                  on_created: Callable[[RunDir], None] | None = None,
                  timeout_s: float = VALIDATE_TIMEOUT_S) -> "WorkerProcess":
    """Validate and start a run in one worker process (``--handshake``), creating the run only if valid.

    What ``validate_config`` then ``WorkerProcess`` do in two processes, in one: the worker
    checks the config and prints it normalised; only then is the run folder created, and the
    worker is told where it is and goes on to run. A config the worker refuses raises
    :class:`UserError` with its one line, and leaves nothing behind. The worker's hash seed
    comes from the config's ``seed``, so the caller must give one (else use the two steps).
    """
    run_id = str(data["run_id"])
    seed = data.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError("start_checked needs the config's seed (PYTHONHASHSEED comes from it)")
    store.runs_dir.mkdir(parents=True, exist_ok=True)
    log_path = store.runs_dir / f".starting-{run_id}.log"  # the same filesystem: renamed into the run
    stderr = log_path.open("ab")
    cmd = [*worker_command(worker), "--handshake"]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                            start_new_session=True,
                            env=_worker_env({"PYTHONHASHSEED": str(seed % 4294967296)}
                                            if "PYTHONHASHSEED" not in os.environ else {}))
    try:
        proc.stdin.write(json.dumps(dict(data)).encode() + b"\n")
        proc.stdin.flush()
        line, rest = _read_line(proc, timeout_s)
        if line is None:
            code = proc.wait()
            message = _stderr_tail(log_path).strip().splitlines()
            text = message[-1] if message else f"exit code {code}"
            for prefix in ("mosaic: error: ", f"{worker.name}: error: "):
                text = text[len(prefix):] if text.startswith(prefix) else text
            raise UserError(text) if code == 2 else UserError(f"worker {worker.name!r} could not check the "
                                                               f"config: {text}")
        answer = json.loads(line)
        run = create_run(store, worker, answer["config"], status=status)
        run.worker_log_path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(log_path, run.worker_log_path)
        if on_created is not None:
            on_created(run)
        proc.stdin.write(json.dumps({"run_dir": str(run.root)}).encode() + b"\n")
        proc.stdin.close()
    except BaseException:
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        stderr.close()
        log_path.unlink(missing_ok=True)
        raise
    process = WorkerProcess.adopt(worker, run, proc, stderr, cmd, rest)
    return process


def _read_line(proc: subprocess.Popen, timeout_s: float) -> tuple[bytes | None, bytes]:
    """The first line the worker prints (None if it exits first) and what followed it already."""
    import select

    fd, buffer, deadline = proc.stdout.fileno(), b"", time.monotonic() + timeout_s
    while b"\n" not in buffer:
        left = deadline - time.monotonic()
        if left <= 0:
            raise UserError(f"the worker did not check the config within {timeout_s:g} s")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None, b""
        buffer += chunk
    line, _, rest = buffer.partition(b"\n")
    return line, rest


def release_fastlane(run: RunDir) -> list[str]:
    """Unlink the FastLane segments a run left behind (keeping last frames); never raises."""
    try:
        from mosaic.fastlane.publisher import finish_run

        return finish_run(run.root, run.run_id)
    except Exception:  # cleanup must not turn a finished run into a crash
        return []


def run_in_foreground(worker: DiscoveredWorker, run: RunDir | WorkerProcess,
                      on_event: EventCallback | None = None,
                      on_interrupt: Callable[[], None] | None = None,
                      grace_s: float = 30.0) -> RunOutcome:
    """Launch (or take a started) worker and follow it; Ctrl-C / SIGTERM cancel it cleanly."""
    process = run if isinstance(run, WorkerProcess) else WorkerProcess(worker, run)

    def handle(signum: int, _frame: object) -> None:
        if on_interrupt:
            on_interrupt()
        process.cancel(grace_s)

    previous = {s: signal.signal(s, handle) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return process.follow(on_event)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
