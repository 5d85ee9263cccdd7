"""What a daemon is told at start, and where it keeps its own files."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from mosaic.host.daemon import DEFAULT_HOST, DEFAULT_PORT


@dataclass
class DaemonSettings:
    home: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT  # 0 = any free port (tests); the real one goes to daemon.json
    #: Runs allowed at once, and CPUs they may claim together (a worker's
    #: declared estimate, or the cpus given at submit). A run bigger than the
    #: whole budget still starts when nothing else runs.
    max_concurrent_runs: int = 4
    cpu_budget: float = field(default_factory=lambda: float(os.cpu_count() or 1))
    #: A running worker silent (no telemetry line at all) for this long is killed.
    heartbeat_timeout_s: float = 60.0
    #: A worker that has not sent ``run_started`` after this long is killed.
    startup_timeout_s: float = 300.0
    #: Cancel: SIGTERM, then SIGKILL to the group after this long.
    cancel_grace_s: float = 30.0
    pythons: dict[str, str] = field(default_factory=dict)  # worker → interpreter
    require_token: bool = False  # also on loopback

    @property
    def state_dir(self) -> Path:
        return self.home / "trainer" / "daemon"

    @property
    def registry_path(self) -> Path:
        return self.state_dir / "registry.sqlite3"

    @property
    def lock_path(self) -> Path:
        return self.state_dir / "daemon.lock"

    @property
    def endpoint_path(self) -> Path:
        return self.state_dir / "daemon.json"

    @property
    def token_path(self) -> Path:
        return self.state_dir / "token"

    @property
    def log_path(self) -> Path:
        return self.state_dir / "daemon.log"


def state_dir_for(home: Path) -> Path:
    return DaemonSettings(home=home).state_dir
