"""Start a worker process for a run and follow it to the end (no daemon needed).

The worker runs as ``python -m <worker>.cli --config <run>/config.json
--run-dir <run>`` in its own process group, so a terminal's Ctrl-C reaches
only MOSAIC, which then asks the whole group to stop (SIGTERM, then SIGKILL
after a grace period). Its stdout is telemetry (stored by
:class:`~mosaic.host.recorder.RunRecorder`); its stderr goes to ``logs/worker.log``.
However the worker ends, its FastLane segments are removed (last frames kept).

A layer on :mod:`mosaic.host.hosting` (which starts and follows the worker command): what is its own here is
the pipe read to its end by the calling thread and the SIGTERM-then-SIGKILL timer of a cancel.
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
from typing import Any, Callable, Iterable, Mapping

from mosaic.host.discovery import DiscoveredWorker
from mosaic.errors import UserError
from mosaic.pids import signal_group
from mosaic.host.hosting import (follow_output, handshake_config, handshake_run_dir, hash_seed,
                                 read_until, refusal, release_fastlane, run_command, run_to_end, start,
                                 stderr_tail, worker_command, worker_env)
from mosaic.host.recorder import EventCallback, RunRecorder
from mosaic.run_status import RunState
from mosaic.runs import ManifestFields, RunDir, RunStore

VALIDATE_TIMEOUT_S = 120


def validate_config(worker: DiscoveredWorker, config: Mapping[str, Any],
                    python: str | None = None) -> dict[str, Any]:
    """Ask the worker to check ``config``; returns it normalised or raises :class:`UserError`."""
    cmd = [*worker_command(worker, python), "--validate", "--config", "-"]
    try:
        proc = run_to_end(cmd, json.dumps(dict(config)), VALIDATE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise UserError(f"worker {worker.name!r} did not validate the config within "
                        f"{VALIDATE_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise refusal(proc.stderr, worker.name, proc.returncode)
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
        proc = run_to_end(cmd, text, limit)
    except subprocess.TimeoutExpired:
        raise UserError(f"worker {worker.name!r} did not check {len(configs)} configs within {limit:g} s") from None
    answers = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(answers) != len(configs):
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise UserError(f"worker {worker.name!r} could not check the configs: "
                        f"{lines[-1] if lines else f'exit code {proc.returncode}'}")
    return _checked(answers, rounded)


def _checked(answers: list[dict[str, Any]], rounded: list[dict[str, Any] | None] | None
             ) -> list[dict[str, Any] | UserError]:
    if rounded is not None:
        rounded[:] = [a.get("rounded_budget") for a in answers]
    return [a["config"] if a.get("ok") else UserError(str(a.get("error"))) for a in answers]


#: How long :class:`ConfigChecker` keeps a worker's checking process after its last use.
CHECKER_KEEP_S = 60.0


class ConfigChecker:
    """:func:`validate_configs` with each worker's ``--validate-many`` process kept between calls.

    A study submits its trials one or two at a time while others train: a fresh interpreter per submission (its
    start and the worker's imports, about 0.3 s of a core here) is taken from the trials running beside it. The
    daemon keeps one checking process per worker and interpreter instead, fed a line per config; it is closed
    after :data:`CHECKER_KEEP_S` unused (:meth:`close_idle`), when it fails or overruns, and by :meth:`close`.
    It also ends by itself when its stdin closes, so it cannot outlive the daemon. Callers may be threads: a
    process serves one call at a time (a second caller meanwhile starts one of its own; one of them is kept).
    """

    def __init__(self, keep_s: float = CHECKER_KEEP_S) -> None:
        self.keep_s = keep_s
        self._idle: dict[tuple[str, str], _CheckingProcess] = {}
        self._lock = threading.Lock()

    def check(self, worker: DiscoveredWorker, configs: list[Mapping[str, Any]], python: str | None = None,
              timeout_s: float | None = None,
              rounded: list[dict[str, Any] | None] | None = None) -> list[dict[str, Any] | UserError]:
        """What :func:`validate_configs` answers, from the kept process (started first when there is none)."""
        if not configs:
            return []
        key = (worker.name, python or worker.python or sys.executable)
        with self._lock:
            held = self._idle.pop(key, None)
        limit = timeout_s or VALIDATE_TIMEOUT_S + 5 * len(configs)
        while True:
            kept = held is not None and held.proc.poll() is None
            if not kept:
                if held is not None:
                    held.close()
                held = _CheckingProcess(worker, key[1])
            try:
                answers = held.ask(configs, limit)
                break
            except _Ended:  # a kept one may have died while it waited (killed for memory): once with a new one
                held.close()
                if not kept:
                    raise
                held = None
            except BaseException:
                held.close()
                raise
        with self._lock:
            if key in self._idle or self.keep_s <= 0:
                spare: _CheckingProcess | None = held
            else:
                held.used_at = time.monotonic()
                self._idle[key], spare = held, None
        if spare is not None:
            spare.close()
        return _checked(answers, rounded)

    def close_idle(self, now: float | None = None) -> int:
        """Close the processes unused for :attr:`keep_s`; how many."""
        now = time.monotonic() if now is None else now
        with self._lock:
            stale = [k for k, held in self._idle.items() if now - held.used_at >= self.keep_s]
            closing = [self._idle.pop(k) for k in stale]
        for held in closing:
            held.close()
        return len(closing)

    def close(self) -> None:
        """Close every kept process (the daemon's shutdown)."""
        with self._lock:
            closing, self._idle = list(self._idle.values()), {}
        for held in closing:
            held.close()

    def pids(self) -> list[int]:
        """The kept processes' ids (tests)."""
        with self._lock:
            return [held.proc.pid for held in self._idle.values()]


class _Ended(UserError):
    """The checking process ended before it answered every config."""


class _CheckingProcess:
    """One ``--validate-many`` process: configs in on stdin, a JSON answer a line on stdout, stderr to a file."""

    def __init__(self, worker: DiscoveredWorker, python: str) -> None:
        import tempfile

        self.worker = worker.name
        self.used_at = time.monotonic()
        self._stderr = tempfile.TemporaryFile()
        self.proc = start([*worker_command(worker, python), "--validate-many"], env=worker_env(),
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr)
        self._buffer = b""

    def ask(self, configs: list[Mapping[str, Any]], limit_s: float) -> list[dict[str, Any]]:
        text = "".join(json.dumps(dict(c)) + "\n" for c in configs).encode()
        # written by a thread: a long batch's answers fill the stdout pipe while its lines are still going in
        writer = threading.Thread(target=self._write, args=(text,), daemon=True)
        writer.start()

        def answered(read: bytes) -> bool:  # an answer a line: every config's answer is in
            return sum(line.startswith(b"{") for line in read.split(b"\n")[:-1]) >= len(configs)

        try:
            read, open_ = read_until(self.proc.stdout.fileno(), self._buffer, answered,  # type: ignore[union-attr]
                                     time.monotonic() + limit_s)
        except TimeoutError:
            raise UserError(f"worker {self.worker!r} did not check {len(configs)} configs within {limit_s:g} s") \
                from None
        if not open_:
            raise _Ended(f"worker {self.worker!r} could not check the configs: {self._last_error()}")
        *lines, self._buffer = read.split(b"\n")
        answers = [json.loads(line) for line in lines if line.startswith(b"{")]
        writer.join()
        return answers

    def _write(self, text: bytes) -> None:
        try:
            self.proc.stdin.write(text)  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
        except (BrokenPipeError, ValueError, OSError):
            pass  # it died: the reader sees its stdout close

    def _last_error(self) -> str:
        try:
            code = self.proc.wait(5)
        except subprocess.TimeoutExpired:
            code = None
        self._stderr.seek(0)
        lines = [ln for ln in self._stderr.read().decode("utf-8", "replace").strip().splitlines() if ln.strip()]
        return lines[-1] if lines else f"exit code {code}"

    def close(self) -> None:
        """Close its stdin (it ends by itself); a group kill if it has not within a few seconds."""
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        for fh in (self.proc.stdout, self._stderr):
            try:
                fh.close()  # type: ignore[union-attr]
            except OSError:
                pass


def create_run(store: "RunStore", worker: DiscoveredWorker, config: Mapping[str, Any], *, status: str,
               python: str | None = None, **manifest: Any) -> RunDir:
    """The run folder of a validated config, with its manifest: the one place `mosaic run` and the
    daemon create runs (status, versions, host, the shared fields' summary)."""
    from mosaic.provenance import host_info, package_versions
    from mosaic.workerkit.run_fields import summarize

    return store.create(str(config["run_id"]), config, ManifestFields.created(
        worker.name, status, summarize(config, worker=worker.name).to_dict(),
        worker_version=worker.metadata.version, host=host_info(), versions=package_versions(["mosaic-marl"]),
        python=python or worker.python or sys.executable, **manifest))


@dataclass
class RunOutcome:
    status: str  # the manifest spelling of a terminal RunState: completed | failed | cancelled
    returncode: int
    terminal: dict[str, Any]


def run_launch(worker: DiscoveredWorker, run: RunDir, python: str | None = None,
               env: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command and environment of a run's worker, the same for ``mosaic run`` and the daemon.

    Started with ``start_new_session=True`` the worker leads its own process
    group, which :func:`mosaic.pids.signal_group` stops as a whole.
    """
    return run_command(worker, run, python, env)


class WorkerProcess:
    """One running worker: its process group, stdout proxy and stop logic."""

    def __init__(self, worker: DiscoveredWorker, run: RunDir, *, python: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        cmd, full_env = run_launch(worker, run, python, env)
        run.worker_log_path.parent.mkdir(parents=True, exist_ok=True)
        stderr = run.worker_log_path.open("ab")
        proc = start(cmd, env=full_env, stderr=stderr)
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
        run.update_manifest(**ManifestFields.starting(proc.pid, cmd))

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
        try:
            recorder = RunRecorder(self.run, on_event=on_event)
        except OSError as exc:
            self._stop_unrecorded(exc)

        def feed(lines: Iterable[bytes]) -> None:
            for line in lines:
                recorder.feed_line(line)

        with recorder:
            try:
                follow_output(self.proc.stdout.fileno(), self._pending, feed)
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
                terminal = recorder.finish(returncode, stderr_tail(self.run.worker_log_path))
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
            self.run.update_manifest(**ManifestFields.status(RunState.FAILED,
                                                             failure={"message": f"{cause}; the worker was stopped"}))
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
    proc = start(cmd, env=worker_env(hash_seed(seed)), stdin=subprocess.PIPE, stderr=stderr)
    try:
        answer, rest = handshake_config(proc, data, worker.name, log_path, timeout_s)
        run = create_run(store, worker, answer["config"], status=status)
        run.worker_log_path.parent.mkdir(parents=True, exist_ok=True)
        os.replace(log_path, run.worker_log_path)
        if on_created is not None:
            on_created(run)
        handshake_run_dir(proc, run)
    except BaseException:
        signal_group(proc.pid, signal.SIGKILL)
        proc.wait()
        stderr.close()
        log_path.unlink(missing_ok=True)
        raise
    process = WorkerProcess.adopt(worker, run, proc, stderr, cmd, rest)
    return process


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
