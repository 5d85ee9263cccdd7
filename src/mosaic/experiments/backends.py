"""Where an experiment's cells run: the backend interface, and the local daemon behind it.

A backend takes a cell's run (its run id and config), gets its telemetry into this machine's run store
(``MOSAIC_HOME/trainer/runs/RUN_ID``: config, manifest, ``telemetry.jsonl``, as any run), says how each
run stands and why it ended, and cancels a run. The coordinator knows nothing else about it, so a Ray
cluster or Slurm backend is one more class here, not a change to the experiment logic.

:class:`LocalDaemon` hands cells to the trainer daemon serving ``MOSAIC_HOME`` (starting one when none
runs): its queue, concurrency and CPU limits fill the machine without oversubscribing it, and its runs
outlive the coordinator (a killed coordinator loses nothing; ``resume`` finds the runs where they are).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable

from mosaic.errors import UserError

#: A backend's answer about one run: ``(state, cause)``, state one of queued / running / completed /
#: failed / cancelled; None when the backend does not know the run.
RunStatus = tuple[str, str]


class BackendUnavailable(UserError):
    """The backend cannot be reached now; the experiment's state is kept for ``resume``."""

    exit_code = 1


class Backend(ABC):
    name = "backend"

    @abstractmethod
    def describe(self) -> str:
        """One line for the user: where the cells run."""

    @abstractmethod
    def submit(self, run_id: str, config: dict[str, Any]) -> None:
        """Queue one run; :class:`UserError` if refused, :class:`BackendUnavailable` if unreachable.
        Submitting a run id the backend already has is not an error (the run is already there)."""

    @abstractmethod
    def status(self, run_ids: list[str]) -> dict[str, RunStatus | None]:
        """How each run stands now."""

    @abstractmethod
    def cancel(self, run_id: str, reason: str) -> None:
        """Ask the run to stop (it ends cancelled with ``reason``); a run already ended is left alone."""

    def reconnect(self) -> None:
        """Try to reach the backend again after :class:`BackendUnavailable`."""

    def close(self) -> None:
        pass


_STATES = {"QUEUED": "queued", "STARTING": "queued", "RUNNING": "running", "PAUSED": "running",
           "COMPLETED": "completed", "FAILED": "failed", "CANCELLED": "cancelled"}


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
                      f"log {log_path}); it keeps running after the experiment (`mosaic daemon stop`)")

    def _call(self, fn: Callable[[], Any]) -> Any:
        import grpc

        from mosaic.host.daemon.client import DaemonError

        try:
            return fn()
        except DaemonError as exc:
            if exc.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise BackendUnavailable(str(exc)) from None
            raise

    def submit(self, run_id: str, config: dict[str, Any]) -> None:
        from mosaic.host.daemon.client import DaemonError

        try:
            self._call(lambda: self.client.submit(config, run_id=run_id))
        except BackendUnavailable:
            raise
        except DaemonError as exc:
            if any(f.get("field") == "run_id" and "already exists" in f.get("message", "")
                   for f in exc.field_errors) or "already exists" in str(exc):
                return  # submitted before (by a coordinator that died before journaling it)
            fields = "; ".join(f"{f.get('field')}: {f.get('message')}" for f in exc.field_errors)
            raise UserError(fields or str(exc)) from None

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
                out[run_id] = _from_run_store(self.home, run_id)
                continue
            state = _STATES.get(state_name(info.state), "queued")
            cause = info.failure_reason if state == "failed" else info.state_reason if state == "cancelled" else ""
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


def _from_run_store(home: Path, run_id: str) -> RunStatus | None:
    """A run the daemon does not list, as its folder tells it (terminal states only)."""
    from mosaic.run_status import RunState
    from mosaic.runs import RunStore

    store = RunStore(home)
    if not store.exists(run_id):
        return None
    run = store.get(run_id)
    try:
        state = RunState.from_manifest(run.read_manifest().get("status"))
    except (OSError, ValueError):
        return None
    if state is None or not state.terminal:
        return None
    terminal = run.last_event(f"run_{state.manifest}") or {}
    cause = str(terminal.get("message") or terminal.get("reason") or "")
    return state.manifest, cause


def backend_for(name: str, home: Path, announce: Callable[[str], None] | None = None,
                start: bool = True) -> Backend:
    """The named backend; with ``start`` false, only one already running (:class:`BackendUnavailable` if none)."""
    if name == "local":
        return LocalDaemon(home, announce, start=start)
    raise UserError(f"backend: {name!r} is not one of local")
