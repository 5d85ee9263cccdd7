"""One worker process group as the daemon sees it: spawned now, or re-attached.

A worker's stdout goes to a spool file (``logs/worker.stdout``) rather than a
pipe, and the daemon tails that file. A pipe would die with the daemon (the
worker's next print gets EPIPE and its telemetry is lost); a file survives a
daemon restart, so a new daemon can re-attach to a still-running worker and
carry on exactly where the old one stopped reading.

A layer on :mod:`mosaic.host.hosting`, which starts the worker command; the spool, the re-attach and the
event loop are the daemon's own.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Mapping, Sequence

from mosaic.host.hosting import start_async
from mosaic.host.recorder import LineSplitter
from mosaic.pids import is_running, signal_group
from mosaic.runs import RunDir

READ_CHUNK = 1 << 18
#: Bytes read per call before yielding to the event loop (fairness between runs,
#: and time for the streams to send what was read).
READ_BUDGET = 256 << 10


def spool_path(run: RunDir) -> Path:
    return run.worker_log_path.with_name("worker.stdout")


def signal_pid(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


class WorkerHandle:
    """The worker's pid and process group; ``exited`` completes when it is gone."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.pgid = pid  # started with start_new_session: the worker leads its group
        self.exited: asyncio.Future[int | None] = asyncio.get_running_loop().create_future()

    def signal_group(self, sig: int) -> bool:
        return signal_group(self.pgid, sig)

    def signal(self, sig: int) -> bool:
        """The worker process alone (pause/resume must not reach its children)."""
        return signal_pid(self.pid, sig)


class SpawnedWorker(WorkerHandle):
    """A worker this daemon started: its exit code is known."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        super().__init__(proc.pid)
        self.proc = proc
        self._waiter = asyncio.ensure_future(self._wait())

    async def _wait(self) -> None:
        code = await self.proc.wait()
        if not self.exited.done():
            self.exited.set_result(code)


class AttachedWorker(WorkerHandle):
    """A worker started by an earlier daemon: not our child, so exit is polled
    and the exit code is unknown (None)."""

    def __init__(self, pid: int, start_token: str, poll_s: float = 0.1) -> None:
        super().__init__(pid)
        self.start_token = start_token
        self._poller = asyncio.ensure_future(self._poll(poll_s))

    async def _poll(self, poll_s: float) -> None:
        while is_running(self.pid, self.start_token):
            await asyncio.sleep(poll_s)
        if not self.exited.done():
            self.exited.set_result(None)


async def spawn_worker(cmd: Sequence[str], run: RunDir, env: Mapping[str, str]) -> SpawnedWorker:
    """Start ``cmd`` in its own session: stdout → spool file, stderr → logs/worker.log."""
    spool = spool_path(run)
    spool.parent.mkdir(parents=True, exist_ok=True)
    with spool.open("ab") as out, run.worker_log_path.open("ab") as err:
        proc = await start_async(cmd, env=env, stdout=out, stderr=err)
    return SpawnedWorker(proc)


class SpoolReader:
    """Reads complete, bounded lines appended to a worker's spool file.

    ``skip_lines`` drops lines an earlier daemon already stored (re-attach):
    splitting is deterministic, so the same lines come out in the same order.
    """

    def __init__(self, path: Path, skip_lines: int = 0) -> None:
        path.touch(exist_ok=True)
        self._fh = path.open("rb", buffering=0)
        self._splitter = LineSplitter()
        self._skip = skip_lines
        self.saturated = False

    def _take(self, lines: list[bytes]) -> list[bytes]:
        if self._skip:
            dropped = min(self._skip, len(lines))
            self._skip -= dropped
            return lines[dropped:]
        return lines

    def read_available(self) -> list[bytes]:
        """Lines completed since the last call (up to about READ_BUDGET bytes).

        ``saturated`` tells afterwards whether the budget ran out (more is waiting).
        """
        lines: list[bytes] = []
        budget = READ_BUDGET
        self.saturated = False
        while True:
            chunk = self._fh.read(READ_CHUNK)
            if not chunk:
                break
            budget -= len(chunk)
            lines.extend(self._splitter.feed(chunk))
            if budget <= 0:
                self.saturated = True
                break
        return self._take(lines)

    def read_rest(self) -> list[bytes]:
        """Everything left, including a final line without a newline (the worker is gone)."""
        lines: list[bytes] = []
        while True:
            chunk = self._fh.read(READ_CHUNK)
            if not chunk:
                break
            lines.extend(self._splitter.feed(chunk))
        lines.extend(self._splitter.flush())
        return self._take(lines)

    def close(self) -> None:
        self._fh.close()


def kill_group_now(handle: WorkerHandle | None) -> None:
    """Whatever is left of the group after the worker exited goes too."""
    if handle is not None:
        handle.signal_group(signal.SIGKILL)
