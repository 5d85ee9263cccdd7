""":class:`LocalDaemon`: cells as runs of the trainer daemon serving ``MOSAIC_HOME``.

It starts a daemon, detached, when none runs. The daemon's queue, concurrency and CPU limits fill the machine
without oversubscribing it, and its runs outlive the coordinator (a killed coordinator loses nothing;
``resume`` finds the runs where they are).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from mosaic.errors import UserError
from mosaic.experiments.backends.base import Backend, BackendUnavailable, RunStatus, status_from_run_store
from mosaic.run_status import JobState


class LocalDaemon(Backend):
    """Cells as runs of the trainer daemon serving ``home`` (started detached when none runs)."""

    name = "local"

    def __init__(self, home: Path, announce: Callable[[str], None] | None = None,
                 start_timeout_s: float = 90.0, start: bool = True) -> None:
        self.home = Path(home)
        self.announce = announce or (lambda _line: None)
        self.start_timeout_s = start_timeout_s
        self.start = start
        self.client: Any = None
        self.started_pid: int | None = None
        self.reconnect()

    def describe(self) -> str:
        return f"the local daemon at {self.client.address} (MOSAIC_HOME={self.home})"

    def reconnect(self) -> None:
        from mosaic.host.daemon.client import DaemonClient

        if self.client is not None:
            self.client.close()
            self.client = None
        client = DaemonClient.for_home(self.home)
        if client is None and self.start:
            self._start_daemon()
            client = DaemonClient.for_home(self.home)
        if client is None:
            raise BackendUnavailable(f"no daemon serves MOSAIC_HOME={self.home}")
        self.client = client

    def _start_daemon(self) -> None:
        from mosaic.host.daemon.endpoint import find_daemon

        log_path = self.home / "trainer" / "daemon" / "started-by-experiment.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "MOSAIC_HOME": str(self.home)}
        with log_path.open("ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "mosaic", "daemon", "--port", "0"], stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while find_daemon(self.home) is None:
            if proc.poll() is not None:
                tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
                raise BackendUnavailable(f"the daemon started for the experiment exited with {proc.returncode}: "
                                         + " | ".join(tail))
            if time.monotonic() > deadline:
                proc.terminate()
                raise BackendUnavailable(f"the daemon started for the experiment did not listen within "
                                         f"{self.start_timeout_s:g} s (log: {log_path})")
            time.sleep(0.1)
        self.started_pid = proc.pid
        self.announce(f"no daemon was running: started one for MOSAIC_HOME={self.home} (pid {proc.pid}, "
                      f"log {log_path}); it keeps running afterwards (`mosaic daemon stop`)")

    def _call(self, fn: Callable[[], Any]) -> Any:
        import grpc

        from mosaic.host.daemon.client import DaemonError

        if self.client is None:  # a reconnect that failed: connect now, or say the backend is unavailable
            self.reconnect()
        try:
            return fn()
        except DaemonError as exc:
            if exc.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise BackendUnavailable(str(exc)) from None
            raise

    def submit(self, run_id: str, config: dict[str, Any]) -> None:
        error = self.submit_many([(run_id, config)])[0]
        if error is not None:
            raise error

    def submit_many(self, runs: list[tuple[str, dict[str, Any]]]) -> list[UserError | None]:
        """One call to the daemon, in which each worker checks all of its configs in one process."""
        import grpc

        from mosaic.host.daemon.client import DaemonError

        if not runs:
            return []
        try:
            answers = self._call(lambda: self.client.submit_many(runs))
        except DaemonError as exc:
            if exc.code != grpc.StatusCode.UNIMPLEMENTED:
                return [_refusal(exc)] * len(runs)
            answers = []  # a daemon from before SubmitRuns: one call a run
            for run_id, config in runs:
                try:
                    answers.append(self._call(lambda: self.client.submit(config, run_id=run_id)))
                except BackendUnavailable:
                    raise
                except DaemonError as one:
                    answers.append(one)
        from mosaic.runs import RunStore

        store, out = RunStore(self.home), []
        for (run_id, _), answer in zip(runs, answers):
            refusal = _refusal(answer) if isinstance(answer, UserError) else None
            if isinstance(answer, UserError) and refusal is None and not store.exists(run_id):
                # the daemon knows the id, but the run's folder is gone: not a run this experiment submitted
                refusal = UserError(f"run_id: the daemon still lists a run named {run_id!r} whose folder is gone "
                                    f"from {store.runs_dir} (deleted by hand?); this attempt is skipped")
            out.append(refusal)
        return out

    def status(self, run_ids: list[str]) -> dict[str, RunStatus | None]:
        from mosaic.host.daemon.client import state_name

        wanted = set(run_ids)
        if not wanted:
            return {}
        known = {info.run_id: info for info in self._call(lambda: self.client.list()) if info.run_id in wanted}
        out: dict[str, RunStatus | None] = {}
        for run_id in run_ids:
            info = known.get(run_id)
            if info is None:
                out[run_id] = status_from_run_store(self.home, run_id)
                continue
            state = JobState.from_run(state_name(info.state))  # STARTING counts as queued, PAUSED as running
            cause = (info.failure_reason if state == JobState.FAILED else
                     info.state_reason if state == JobState.CANCELLED else "")
            out[run_id] = (state, cause)
        return out

    def cancel(self, run_id: str, reason: str) -> None:
        from mosaic.host.daemon.client import DaemonError

        try:
            self._call(lambda: self.client.cancel(run_id, reason=reason))
        except BackendUnavailable:
            raise
        except DaemonError:
            pass  # already ended, or unknown to the daemon

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None


def _refusal(exc: Any) -> UserError | None:
    """The daemon's refusal of one run as the coordinator's :class:`UserError`; None for a run id the daemon
    already has (submitted before, by a coordinator that died before journaling it)."""
    if any(f.get("field") == "run_id" and "already exists" in f.get("message", "")
           for f in exc.field_errors) or "already exists" in str(exc):
        return None
    fields = "; ".join(f"{f.get('field')}: {f.get('message')}" for f in exc.field_errors)
    return UserError(fields or str(exc))
