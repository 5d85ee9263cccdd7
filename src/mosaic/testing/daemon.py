"""A real daemon for tests: started as a subprocess on a free port, stopped however the test ends."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from mosaic.testing.waiting import wait_until
from mosaic.testing.worker_homes import run_events


@dataclass
class LocalDaemon:
    """A real ``mosaic daemon`` subprocess serving ``home`` on a free loopback port, and a client of it.

    Made by :func:`start_daemon`; :meth:`stop` ends it with SIGTERM, as a user's Ctrl-C would.
    """

    home: Path
    proc: subprocess.Popen
    args: tuple[str, ...]
    env: dict[str, str]
    log_path: Path
    client: Any = None

    def connect(self, timeout: float = 60) -> None:
        from mosaic.host.daemon.client import DaemonClient
        from mosaic.host.daemon.endpoint import read_endpoint_file

        endpoint_file = self.home / "trainer" / "daemon" / "daemon.json"

        def ready() -> Any:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}: {self.log()}")
            endpoint = read_endpoint_file(endpoint_file)
            return endpoint if endpoint and endpoint.pid == self.proc.pid else None

        endpoint = wait_until(ready, timeout, "the daemon to listen")
        self.client = DaemonClient(endpoint.address, self.env.get("MOSAIC_TOKEN"))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def state(self, run_id: str) -> str:
        from mosaic.host.daemon.client import state_name

        return state_name(self.client.get(run_id).state)

    def wait_state(self, run_id: str, states: str | set[str], timeout: float = 30) -> Any:
        """The run's ``RunInfo`` once its state is one of ``states``; fails at once if the daemon dies."""
        from mosaic.host.daemon.client import state_name

        wanted = {states} if isinstance(states, str) else states
        return wait_until(lambda: (i := self.client.get(run_id)) and state_name(i.state) in wanted and i,
                          timeout, f"run {run_id} to reach {sorted(wanted)}", interval=0.05, proc=self.proc)

    def submit(self, config: Mapping[str, Any], **kwargs: Any) -> str:
        return self.client.submit(dict(config), **kwargs).run_id

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return run_events(self.home / "trainer" / "runs" / run_id)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, then wait; killed if it has not ended after ``timeout`` s."""
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        finally:
            if self.client is not None:
                self.client.close()


def start_daemon(home: str | Path, *args: str, env: Mapping[str, str] | None = None,
                 timeout: float = 60, command: tuple[str, ...] = ("-m", "mosaic", "daemon")) -> LocalDaemon:
    """Start ``mosaic daemon --port 0 ARGS`` for ``home`` and connect to it.

    The daemon's output goes to a log file in ``home``. It runs without a token unless ``env`` gives
    ``MOSAIC_TOKEN``, and with Ray's token auth off (its runs start private local clusters).
    ``command`` (after the interpreter) may swap ``-m mosaic daemon`` for a wrapper, e.g. a profiler's.
    """
    import sys

    home = Path(home)
    full_env = {**os.environ, "MOSAIC_HOME": str(home), "RAY_AUTH_MODE": "disabled", **(env or {})}
    if "MOSAIC_TOKEN" not in (env or {}):
        full_env.pop("MOSAIC_TOKEN", None)
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / f"daemon-{time.monotonic_ns()}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, *command, "--port", "0", *args],
                                stdout=log, stderr=subprocess.STDOUT, env=full_env)
    daemon = LocalDaemon(home, proc, args, full_env, log_path)
    try:
        daemon.connect(timeout)
    except BaseException:
        daemon.stop()
        raise
    return daemon


def run_under_daemon(home: str | Path, config: Mapping[str, Any], timeout: float = 600.0,
                     env: Mapping[str, str] | None = None) -> tuple[Any, list[dict[str, Any]]]:
    """Start a real daemon for ``home``, validate and submit ``config`` through it, wait for the run's end.

    Returns the daemon's last ``RunInfo`` of the run and the run's telemetry events;
    the daemon is stopped (SIGTERM) before returning, whatever happened.
    """
    daemon = start_daemon(home, env=env)
    try:
        ok, _normalised, error = daemon.client.validate_config(dict(config))
        assert ok, f"the daemon refused the config: {error}"
        run_id = daemon.submit(config)
        info = daemon.wait_state(run_id, {"COMPLETED", "FAILED", "CANCELLED"}, timeout)
        return info, daemon.events(run_id)
    finally:
        daemon.stop()


def stop_home_daemon(home: str | Path, timeout: float = 60.0) -> None:
    """Stop the trainer daemon serving ``home`` (one a command started for it, such as `mosaic experiment run`), if
    any, and wait until it is gone."""
    import os
    import signal

    from mosaic.host.daemon.endpoint import find_daemon
    from mosaic.testing.waiting import wait_until

    endpoint = find_daemon(Path(home))
    if endpoint is not None:
        os.kill(endpoint.pid, signal.SIGTERM)
        wait_until(lambda: find_daemon(Path(home)) is None, timeout, f"the daemon of {home} to stop")
