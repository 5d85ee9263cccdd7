"""Helpers for the daemon tests: configs, polling, a real daemon subprocess."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from mosaic.daemon.client import DaemonClient, state_name
from mosaic.daemon.endpoint import read_endpoint_file
from mosaic.testing import wait_until

RANDOM_CONFIG: dict[str, Any] = {
    "worker": "random",
    "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL"},
    "total_timesteps": 100_000, "step_delay_s": 0.005, "heartbeat_interval_s": 0.5,
    "steps_per_iteration": 100,
}
SHORT_CONFIG: dict[str, Any] = {**RANDOM_CONFIG, "total_timesteps": 300, "step_delay_s": 0.0}


def random_config(**changes: Any) -> dict[str, Any]:
    return {**RANDOM_CONFIG, **changes}


@dataclass
class Daemon:
    home: Path
    proc: subprocess.Popen
    args: tuple[str, ...]
    env: dict[str, str]
    log_path: Path
    client: DaemonClient = field(init=False)

    def connect(self, timeout: float = 30) -> None:
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
        return state_name(self.client.get(run_id).state)

    def wait_state(self, run_id: str, states: str | set[str], timeout: float = 30) -> Any:
        wanted = {states} if isinstance(states, str) else states
        info = wait_until(lambda: (i := self.client.get(run_id)) and state_name(i.state) in wanted and i,
                          timeout, f"run {run_id} to reach {sorted(wanted)}")
        return info

    def submit(self, config: dict[str, Any], **kwargs: Any) -> str:
        return self.client.submit(config, **kwargs).run_id

    def events(self, run_id: str) -> list[dict[str, Any]]:
        path = self.home / "trainer" / "runs" / run_id / "telemetry.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()]

    def stop(self, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self.client.close()


def start_daemon(home: Path, *args: str, env: dict[str, str] | None = None) -> Daemon:
    full_env = {**os.environ, "MOSAIC_HOME": str(home), "RAY_AUTH_MODE": "disabled", **(env or {})}
    if "MOSAIC_TOKEN" not in (env or {}):
        full_env.pop("MOSAIC_TOKEN", None)
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / f"daemon-{time.monotonic_ns()}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mosaic", "daemon", "--port", "0", *args],
                                stdout=log, stderr=subprocess.STDOUT, env=full_env)
    daemon = Daemon(home, proc, args, full_env, log_path)
    daemon.connect()
    return daemon


def kill_leftovers(home: Path) -> None:
    """Whatever a failed test left behind: every process that was started for a run in ``home``."""
    for proc in psutil.process_iter(["pid"]):
        try:
            env = proc.environ()
        except (psutil.Error, OSError):
            continue
        if env.get("MOSAIC_HOME") == str(home) or str(env.get("MOSAIC_RUN_DIR", "")).startswith(str(home)):
            if proc.pid != os.getpid():
                try:
                    proc.kill()
                except psutil.Error:
                    pass


def worker_seqs(events: list[dict[str, Any]]) -> list[int]:
    """The worker's own numbering of its events (daemon-made events have none)."""
    return [e.get("worker_seq", e["seq"]) for e in events if e.get("origin") != "daemon"
            and not e.get("raw")]
