"""Helpers for the daemon tests: configs, polling, a real daemon subprocess."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil

# The daemon subprocess and its client live in the core's test kit, shared with the workers' tests.
from mosaic.testing import LocalDaemon as Daemon  # noqa: F401
from mosaic.testing import start_daemon, wait_until  # noqa: F401

RANDOM_CONFIG: dict[str, Any] = {
    "worker": "random",
    "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL"},
    "total_timesteps": 100_000, "step_delay_s": 0.005,
    "reporting": {"every_timesteps": 100, "heartbeat_interval_s": 0.5},
}
SHORT_CONFIG: dict[str, Any] = {**RANDOM_CONFIG, "total_timesteps": 300, "step_delay_s": 0.0}


def random_config(**changes: Any) -> dict[str, Any]:
    return {**RANDOM_CONFIG, **changes}


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
