"""One cell of an experiment on a cluster node: what ``mosaic run`` does there, watched from elsewhere.

:class:`CellLauncher` runs on the node that reserved the cell's CPUs (a cluster backend wraps it in
whatever keeps it alive there, a Ray actor for instance; it knows nothing of the cluster or of
experiments). It discovers the worker with ``MOSAIC_HOME`` set to ``home`` on that node (building the
worker's environment there if it is missing), has the worker check the config and start in one process
(``--handshake``, as ``mosaic run`` does), creates the run folder in a run store of its own (``storage``,
a path every node sees, else ``home/cluster`` on the node; the folder is ``STORE/trainer/runs/RUN_ID``, so
``MOSAIC_HOME=STORE mosaic watch RUN`` works there), stores the worker's telemetry in it and keeps it in
memory for :meth:`events`, a long poll the driver calls to copy it into its own run store.

Nothing the worker starts outlives the launcher, however the launcher ends. The worker runs below a
small **guard** process (``python -m mosaic.host.cell_launcher guard ...``) that leads the run's process
group, adopts every orphan of the worker's tree (``PR_SET_CHILD_SUBREAPER``; a script a worker starts in
a session of its own is still below it) and kills the whole tree when the worker ends or when the
launcher's thread that started it dies (``PR_SET_PDEATHSIG``); the worker itself dies with the guard
(``PR_SET_PDEATHSIG`` again). A cancel is SIGTERM to the group, SIGKILL after a grace period.

A layer on :mod:`mosaic.host.hosting`, which starts the guard and the worker below it and follows the
worker's output; the guard, the in-memory copy of the telemetry and the artefacts are this module's own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from mosaic.run_status import JobState
from mosaic.runs import RUN_FILES, TELEMETRY_FILE

#: Files of a run folder that travel as telemetry (or are the driver's own), not as artefacts.
NOT_ARTEFACTS = RUN_FILES
#: Variables that tie a process to the Ray worker hosting the launcher; a worker must not inherit them
#: (a Ray worker's own private Ray would take them for its own).
HOST_ONLY_ENV = ("RAY_JOB_ID", "RAY_RAYLET_PID", "RAY_ADDRESS", "RAY_CLIENT_MODE", "RAY_LD_PRELOAD_ON_WORKERS",
                 "RAY_JOB_CONFIG_JSON_ENV_VAR", "RAY_NODE_ID", "RAY_WORKER_MODE")
PR_SET_PDEATHSIG, PR_SET_CHILD_SUBREAPER = 1, 36
MAX_LINES_PER_CALL = 50_000


def _prctl(option: int, value: int) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}, {value}) failed")


def _die_with_parent(sig: int) -> Any:
    """A ``preexec_fn``: the child gets ``sig`` when the thread that started it ends."""
    def preexec() -> None:
        _prctl(PR_SET_PDEATHSIG, int(sig))
    return preexec


def _guard_preexec(niceness: int | None) -> Any:
    """The guard's ``preexec_fn``: it dies with the launcher's thread (SIGHUP, which it handles), and it runs
    at ``niceness`` when that is below the launcher's own and the process may lower it (best effort)."""
    def preexec() -> None:
        _prctl(PR_SET_PDEATHSIG, int(signal.SIGHUP))
        if niceness is not None and niceness < os.getpriority(os.PRIO_PROCESS, 0):
            try:
                os.setpriority(os.PRIO_PROCESS, 0, niceness)
            except OSError:
                pass  # not root and no CAP_SYS_NICE: the host's niceness stays
    return preexec


def host_niceness() -> int | None:
    """The niceness of the process hosting this one (a Ray worker's raylet: Ray runs its workers at 15)."""
    try:
        return os.getpriority(os.PRIO_PROCESS, os.getppid())
    except OSError:
        return None


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (children first), read from ``/proc``."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 1 and fields[0] != "Z":
            children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(root: int, include_root: bool = True) -> None:
    """SIGKILL ``root``'s process group, ``root`` and every process below it."""
    pids = descendants(root)
    for target in ([root] if include_root else []) + pids:
        try:
            os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    if include_root:
        try:
            os.killpg(root, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def clean_environ(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment less what ties it to its host (:data:`HOST_ONLY_ENV`), plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in HOST_ONLY_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


class CellLauncher:
    """One run on this node, from discovery to its last telemetry line; thread-safe."""

    def __init__(self, run_id: str, config: Mapping[str, Any], home: str | os.PathLike[str],
                 storage: str | os.PathLike[str] | None = None, *, node: Mapping[str, Any] | None = None,
                 grace_s: float = 10.0, build_missing: bool = True, niceness: int | None = None) -> None:
        self.run_id = str(run_id)
        #: the worker's niceness, if lower than the launcher's (a Ray worker runs at 15; its cell should not)
        self.niceness = niceness
        self.config = {**dict(config), "run_id": self.run_id}
        self.home = Path(home).absolute()
        self.shared = storage is not None
        #: the run store this node's run folders make (a MOSAIC_HOME of its own: `mosaic watch` works there)
        self.store_home = Path(storage).absolute() if storage is not None else self.home / "cluster"
        self.node = dict(node or {})
        self.grace_s = grace_s
        self.build_missing = build_missing
        self._cond = threading.Condition()
        self._lines: list[str] = []  # stored telemetry lines from seq self._base on
        self._base = 0
        self._state, self._cause = JobState.QUEUED, ""
        self._ended = False
        self._run_root: Path | None = None
        self._guard: subprocess.Popen[bytes] | None = None
        self._worker_pid: int | None = None
        self._cancel_reason: str | None = None
        self._signalled = False  # the cancel's SIGTERM was sent
        self._kill_timer: threading.Timer | None = None
        self._released = False
        self._manifest: dict[str, Any] = {}
        self._times = {"created_at": time.time()}
        self._tar: Path | None = None
        self._frames_lock = threading.Lock()
        self._streams: Any = None  # the run's FastLane streams on this node, opened by the first frame() call
        self._newest: dict[str, dict[str, Any]] = {}  # per stream: the newest frame handed out, as a PNG
        self._thread = threading.Thread(target=self._main, name=f"cell-{self.run_id}", daemon=True)
        self._thread.start()

    # -- what the driver calls -------------------------------------------------------------------------
    def events(self, from_seq: int = 0, max_wait_s: float = 1.0, max_lines: int = MAX_LINES_PER_CALL) -> dict:
        """Telemetry lines from ``from_seq`` on, as soon as there are some (or the run ended, or the wait
        ended); asking from ``from_seq`` says every line before it was received, so they leave memory.
        ``total``: lines stored so far; ``state``: as :meth:`state`."""
        deadline = time.monotonic() + max(0.0, max_wait_s)
        with self._cond:
            while self._base + len(self._lines) <= from_seq and not self._ended:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if from_seq > self._base:  # acknowledged: forget them
                drop = min(from_seq - self._base, len(self._lines))
                del self._lines[:drop]
                self._base += drop
            if from_seq >= self._base:
                lines = self._lines[from_seq - self._base:from_seq - self._base + max_lines]
            else:
                lines = self._lines_from_file(from_seq, max_lines)
            total = self._base + len(self._lines)
            return {"lines": lines, "next": from_seq + len(lines), "total": total, "state": self._state_locked()}

    def state(self) -> dict[str, Any]:
        """queued / running / completed / failed / cancelled, why, where (node, pids, run folder)."""
        with self._cond:
            return self._state_locked()

    def cancel(self, reason: str = "cancelled by request", force: bool = False) -> dict[str, Any]:
        """Stop the run: SIGTERM to its process group, SIGKILL after the grace period (or now, ``force``).
        Asking again is not an escalation (two clients may both cancel); the run ends ``cancelled``."""
        with self._cond:
            if self._ended:
                return self._state_locked()
            self._cancel_reason = self._cancel_reason or reason or "cancelled by request"
            guard = self._guard
            first = guard is not None and not self._signalled  # else the start signals it
            self._signalled = self._signalled or guard is not None
        if guard is not None and force:
            self._signal_group(guard.pid, signal.SIGKILL)
        elif first:
            self._stop_group(guard.pid)
        return self.state()

    def _stop_group(self, pgid: int) -> None:
        """SIGTERM to the run's process group now, SIGKILL after the grace period."""
        self._signal_group(pgid, signal.SIGTERM)
        self._kill_timer = threading.Timer(self.grace_s, self._signal_group, args=(pgid, signal.SIGKILL))
        self._kill_timer.daemon = True
        self._kill_timer.start()

    def artefacts(self, offset: int = 0, size: int | None = None) -> bytes:
        """The run folder's files other than telemetry, manifest and config, as an uncompressed tar:
        ``size`` bytes from ``offset`` (the tar is made once, at the first call after the run ended)."""
        with self._cond:
            if not self._ended:
                raise RuntimeError("artefacts: the run has not ended yet")
            if self._tar is None:
                self._tar = self._make_tar()
            tar = self._tar
        with tar.open("rb") as fh:
            fh.seek(offset)
            return fh.read() if size is None else fh.read(size)

    def frame(self, stream: str | None = None) -> dict[str, Any] | None:
        """The run's newest FastLane frame on this node, as a PNG, for a viewer on the driver (frames stay on
        their node until one asks): ``{"stream", "index", "episode", "step", "png"}``, or None before the
        first frame. ``stream`` names one stream; default: the first that has a frame."""
        from mosaic.fastlane.png import encode_png
        from mosaic.fastlane.viewer import RunStreams
        from mosaic.runs import RunDir

        with self._frames_lock:
            if self._run_root is None or self._released:
                return None
            if self._streams is None:
                self._streams = RunStreams(RunDir(self._run_root), stream)
            self._streams.refresh()
            for name in sorted(self._streams.followers):
                frame = self._streams.followers[name].poll()
                if frame is not None:
                    meta = {"run_id": self.run_id, "stream": name, "index": frame.index, "episode": frame.episode,
                            "step": frame.step, **frame.meta}
                    self._newest[name] = {"stream": name, "index": frame.index, "episode": frame.episode,
                                          "step": frame.step, "png": encode_png(frame.pixels, meta)}
            wanted = [n for n in sorted(self._newest) if stream is None or n == stream]
            return dict(self._newest[wanted[0]]) if wanted else None

    def release(self) -> None:
        """Kill whatever is left of the run and drop what is kept for the driver; the host may go."""
        with self._cond:
            self._released = True
            guard = self._guard
        if guard is not None and guard.poll() is None:
            kill_tree(guard.pid)
        if self._kill_timer is not None:
            self._kill_timer.cancel()
        if self._tar is not None:
            self._tar.unlink(missing_ok=True)
        with self._cond:
            self._lines.clear()
        with self._frames_lock:
            if self._streams is not None:
                self._streams.close()
                self._streams = None
            self._newest.clear()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the run has ended (True) or ``timeout`` passed."""
        with self._cond:
            return self._cond.wait_for(lambda: self._ended, timeout)

    # -- the run ---------------------------------------------------------------------------------------
    def _state_locked(self) -> dict[str, Any]:
        return {"state": self._state, "cause": self._cause, "node": self.node, "run_dir":
                str(self._run_root) if self._run_root else None, "shared": self.shared,
                "guard_pid": self._guard.pid if self._guard else None, "pid": self._worker_pid,
                "manifest": self._manifest, "cancel_reason": self._cancel_reason, **self._times}

    def _main(self) -> None:
        from mosaic.errors import UserError

        try:
            os.environ["MOSAIC_HOME"] = str(self.home)  # discovery and envs read it (this process is the cell's)
            worker = self._discover()
            if self._cancel_reason is not None:
                raise _Cancelled()
            self._start(worker)
            self._follow(worker)
        except _Cancelled:
            self._end_without_run(JobState.CANCELLED, "run_cancelled", {"reason": self._cancel_reason})
        except UserError as exc:
            if self._cancel_reason is not None:
                self._end_without_run(JobState.CANCELLED, "run_cancelled", {"reason": self._cancel_reason})
            else:
                self._end_without_run(JobState.FAILED, "run_failed",
                                      {"error_type": "LaunchRefused", "message": str(exc)})
        except BaseException as exc:  # the driver must hear of anything
            self._end_without_run(JobState.FAILED, "run_failed", {"error_type": "LaunchFailed",
                                                         "message": f"{type(exc).__name__}: {exc}"})

    def _discover(self) -> Any:
        from mosaic.errors import UserError
        from mosaic.host.discovery import discover_workers

        name = str(self.config.get("worker") or "")
        if not name:
            raise UserError("worker: the cell's config names no worker")
        found = discover_workers(only=name)
        if name not in found.names() and self.build_missing:
            from mosaic.host import environments

            source = environments.scan().get(name)
            if source is not None and source.declared and \
                    environments.status(source, self.home, check=False).status == "missing":
                environments.build(name, home=self.home)  # first use on this node
                found = discover_workers(only=name)
        if name not in found.names():
            found = discover_workers()
        return found.get(name)

    def _start(self, worker: Any) -> None:
        """The worker checks the config and starts in one process (``--handshake``), as ``mosaic run``
        does; the run folder is created only once it accepted the config."""
        from mosaic.host.hosting import (handshake_config, handshake_run_dir, hash_seed, run_command, run_hash_seed,
                                         start)
        from mosaic.host.launcher import create_run, worker_command
        from mosaic.run_status import RunState
        from mosaic.runs import RunStore

        store = RunStore(self.store_home)
        store.runs_dir.mkdir(parents=True, exist_ok=True)
        seed = self.config.get("seed")
        handshake = isinstance(seed, int) and not isinstance(seed, bool)
        log_path = store.runs_dir / f".starting-{self.run_id}.log"
        if handshake:
            cmd = [*worker_command(worker), "--handshake"]
            env = clean_environ(hash_seed(seed))
        else:  # the worker's default seed decides the hash seed: check first, then start
            from mosaic.host.launcher import validate_config

            config = validate_config(worker, self.config)
            run = create_run(store, worker, config, status=RunState.CREATED.manifest, submitted_via="cluster",
                             node=self.node)
            self._run_root = run.root
            cmd = run_command(worker, run)[0]
            env = clean_environ({"MOSAIC_RUN_DIR": str(run.root), **run_hash_seed(run)})
            log_path = run.worker_log_path
            log_path.parent.mkdir(parents=True, exist_ok=True)
        guard_cmd = [sys.executable, "-m", "mosaic.host.cell_launcher", "guard", str(os.getpid()),
                     str(store.runs_dir / self.run_id), self.run_id, "--", *cmd]
        stderr = log_path.open("ab")
        with self._cond:
            if self._cancel_reason is not None:
                stderr.close()
                raise _Cancelled()
            self._guard = proc = start(guard_cmd, env=env, stdin=subprocess.PIPE if handshake else subprocess.DEVNULL,
                                       stderr=stderr, preexec_fn=_guard_preexec(self.niceness))
        self._stderr = stderr
        self._pending = b""
        if handshake:
            try:
                answer, self._pending = handshake_config(proc, self.config, worker.name, log_path, 120.0)
                run = create_run(store, worker, answer["config"], status=RunState.CREATED.manifest,
                                 submitted_via="cluster", node=self.node)
                run.worker_log_path.parent.mkdir(parents=True, exist_ok=True)
                os.replace(log_path, run.worker_log_path)
                self._run_root = run.root
                handshake_run_dir(proc, run)
            except BaseException:
                if proc.poll() is None:
                    kill_tree(proc.pid)
                proc.wait()
                stderr.close()
                log_path.unlink(missing_ok=True)
                raise
        self._worker_pid = self._find_worker_pid(proc.pid)
        from mosaic.runs import ManifestFields, RunDir

        RunDir(self._run_root).update_manifest(**ManifestFields.starting(self._worker_pid, cmd, guard_pid=proc.pid,
                                                                         node=self.node))
        with self._cond:
            self._state = JobState.RUNNING
            self._times["started_at"] = time.time()
            self._cond.notify_all()
        with self._cond:  # a cancel asked before the guard existed is carried out now
            late = self._cancel_reason is not None and not self._signalled
            self._signalled = self._signalled or late
        if late:
            self._stop_group(proc.pid)

    @staticmethod
    def _find_worker_pid(guard: int, timeout_s: float = 5.0) -> int | None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            below = descendants(guard)
            if below:
                return below[0]
            time.sleep(0.01)
        return None

    def _follow(self, worker: Any) -> None:
        """Store the worker's telemetry (node folder and memory) until it exits; then how it ended."""
        from mosaic.host.daemon.fastjson import parse_event_line
        from mosaic.host.hosting import follow_output, release_fastlane, stderr_tail
        from mosaic.host.recorder import RunRecorder
        from mosaic.run_status import RunState
        from mosaic.runs import RunDir

        proc = self._guard
        assert proc is not None and proc.stdout is not None and self._run_root is not None
        run = RunDir(self._run_root)
        with RunRecorder(run, parse=parse_event_line) as recorder:
            follow_output(proc.stdout.fileno(), self._pending, lambda lines: self._absorb(recorder, lines))
            returncode = proc.wait()
            if self._kill_timer is not None:
                self._kill_timer.cancel()
            self._signal_group(proc.pid, signal.SIGKILL)  # the guard did, unless it was killed itself
            release_fastlane(run)
            self._stderr.close()
            before = recorder.seq
            if self._cancel_reason is not None and recorder.terminal is None:
                recorder.record({"type": "run_cancelled", "reason": self._cancel_reason, "origin": "launcher"})
            terminal = recorder.finish(returncode, stderr_tail(run.worker_log_path))
            if recorder.seq > before:
                self._append([recorder.last_line])
        state = RunState.from_terminal_event(terminal.get("type")) or RunState.FAILED
        cause = self._cancel_reason if state is RunState.CANCELLED and self._cancel_reason else \
            str(terminal.get("message") or terminal.get("reason") or "")
        manifest = run.update_manifest(cancel_reason=self._cancel_reason) if self._cancel_reason else \
            run.read_manifest()
        with self._cond:
            self._manifest = {k: manifest.get(k) for k in ("worker_version", "host", "versions", "python",
                                                           "command", "exit_code", "exit_signal", "pid")}
            self._times["ended_at"] = time.time()
            self._state, self._cause, self._ended = JobState.from_run(state), cause, True
            self._cond.notify_all()

    def _absorb(self, recorder: Any, lines: Any) -> None:
        stored = recorder.feed_lines(lines)
        if stored:
            self._append([text for _event, text in stored])

    def _append(self, texts: list[str]) -> None:
        with self._cond:
            if not self._released:
                self._lines.extend(texts)
            else:
                self._base += len(texts)
            self._cond.notify_all()

    def _end_without_run(self, state: JobState, kind: str, fields: dict[str, Any]) -> None:
        """The run ended before (or while) its worker started: one terminal line says how."""
        from mosaic.workerkit.telemetry import SCHEMA_VERSION, encode_event

        with self._cond:
            seq = self._base + len(self._lines)
            event = {"v": SCHEMA_VERSION, "type": kind, "run_id": self.run_id, "seq": seq, "ts": time.time(),
                     "origin": "launcher", **{k: v for k, v in fields.items() if v is not None}}
            self._lines.append(encode_event(event))
            self._state = state
            self._cause = str(fields.get("message") or fields.get("reason") or "")
            self._times["ended_at"] = time.time()
            self._ended = True
            self._cond.notify_all()
        if self._guard is not None and self._guard.poll() is None:
            kill_tree(self._guard.pid)

    def _lines_from_file(self, from_seq: int, max_lines: int) -> list[str]:
        """Lines a driver asks for again after they left memory: from the run folder on this node."""
        if self._run_root is None:
            return []
        out = []
        with (self._run_root / TELEMETRY_FILE).open("r", encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i >= from_seq + max_lines or i >= self._base:
                    break
                if i >= from_seq:
                    out.append(line.rstrip("\n"))
        return out

    def _make_tar(self) -> Path:
        fd, name = tempfile.mkstemp(prefix=f"mosaic-artefacts-{self.run_id}.", suffix=".tar")
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w") as tar:
            root = self._run_root
            if root is not None and root.is_dir():
                for entry in sorted(root.iterdir()):
                    if entry.name not in NOT_ARTEFACTS and not entry.name.startswith(".starting-"):
                        tar.add(str(entry), arcname=entry.name)
        return Path(name)

    @staticmethod
    def _signal_group(pgid: int, sig: int) -> None:
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


class _Cancelled(Exception):
    pass


# -- the guard ---------------------------------------------------------------------------------------------
def guard_main(argv: list[str]) -> int:
    """``guard PARENT_PID RUN_DIR RUN_ID -- CMD...``: run CMD below this process and let nothing of it
    outlive either (see the module's docstring)."""
    parent, run_dir, run_id = int(argv[0]), argv[1], argv[2]
    cmd = argv[argv.index("--") + 1:]
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    me = os.getpid()
    worker: dict[str, int] = {}

    def parent_died(*_args: object) -> None:
        kill_tree(me, include_root=False)
        try:
            from mosaic.fastlane.publisher import finish_run

            finish_run(run_dir, run_id)
        except Exception:
            pass
        os._exit(128 + signal.SIGHUP)

    signal.signal(signal.SIGHUP, parent_died)
    if os.getppid() != parent:  # the launcher died before the preexec took effect
        parent_died()
    for sig in (signal.SIGTERM, signal.SIGINT):  # the group's signals reach the worker directly
        signal.signal(sig, lambda *_a: None)
    for sig in (signal.SIGUSR1, signal.SIGUSR2):  # pause and resume, sent to the recorded pid
        signal.signal(sig, lambda s, _f: worker and os.kill(worker["pid"], s))
    from mosaic.host.hosting import start

    # the worker stays in the guard's group and session (a cancel reaches both); stdio are the guard's
    proc = start(cmd, env=os.environ, stdin=None, stdout=None, new_session=False,
                 preexec_fn=_die_with_parent(signal.SIGKILL))
    worker["pid"] = proc.pid
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            return 1
        if pid == proc.pid:
            break
    proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not wait for it again
    kill_tree(me, include_root=False)  # what the worker left (adopted orphans included)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                time.sleep(0.01)
        except ChildProcessError:
            break
    code = proc.returncode
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(me, -code)
    return code


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "guard":
        sys.exit(guard_main(sys.argv[2:]))
    print("usage: python -m mosaic.host.cell_launcher guard PARENT_PID RUN_DIR RUN_ID -- CMD...", file=sys.stderr)
    sys.exit(2)
