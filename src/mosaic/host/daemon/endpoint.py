"""How clients find the daemon serving a ``MOSAIC_HOME``: a lock file the daemon
holds while it lives, and ``daemon.json`` with its address.

The lock, not the json, is the truth: a daemon killed with SIGKILL leaves its
json behind, but the kernel drops its lock, so a stale json is never trusted.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic.host.daemon.settings import state_dir_for
from mosaic.errors import UserError
from mosaic.runs import write_json_atomic


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    pid: int
    token_required: bool
    home: str

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


class DaemonLock:
    """An exclusive ``flock`` on ``daemon.lock``: one daemon per MOSAIC_HOME."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, endpoint_path: Path) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            other = read_endpoint_file(endpoint_path)
            where = f" (pid {other.pid}, {other.address})" if other else ""
            raise UserError(f"another daemon already serves this MOSAIC_HOME{where}; "
                            "stop it first (`mosaic daemon stop`)") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def is_locked(path: Path) -> bool:
    """Does a live process hold the daemon lock?"""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops our shared lock if we got it
    return False


def write_endpoint_file(path: Path, endpoint: Endpoint, **extra: Any) -> None:
    write_json_atomic(path, {"host": endpoint.host, "port": endpoint.port, "pid": endpoint.pid,
                             "token_required": endpoint.token_required, "home": endpoint.home,
                             "address": endpoint.address, **extra})


def read_endpoint_file(path: Path) -> Endpoint | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Endpoint(str(data["host"]), int(data["port"]), int(data["pid"]),
                        bool(data.get("token_required")), str(data.get("home", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_daemon(home: Path) -> Endpoint | None:
    """The daemon serving ``home`` right now, or None."""
    state = state_dir_for(home)
    if not is_locked(state / "daemon.lock"):
        return None
    endpoint = read_endpoint_file(state / "daemon.json")
    try:  # the lock holder writes its pid there; a daemon still starting has not yet replaced an old endpoint
        holder = int((state / "daemon.lock").read_text().split()[0])
    except (OSError, ValueError, IndexError):  # locked but its pid not yet written: starting
        return None
    return endpoint if endpoint is not None and endpoint.pid == holder else None


def stop_daemon(home: Path, timeout: float = 90.0, kill_after: bool = False) -> int | None:
    """Ask the daemon serving ``home`` to stop (SIGTERM) and wait until it has let go of the home; its pid,
    or None when none served it. Still there after ``timeout`` seconds: SIGKILL when ``kill_after``, else
    :class:`TimeoutError`."""
    import os
    import signal
    import time

    endpoint = find_daemon(home)
    if endpoint is None:
        return None
    try:
        os.kill(endpoint.pid, signal.SIGTERM)
    except ProcessLookupError:
        return endpoint.pid
    deadline = time.monotonic() + timeout
    while find_daemon(home) is not None:
        if time.monotonic() > deadline:
            if not kill_after:
                raise TimeoutError(f"daemon pid {endpoint.pid} is still stopping after {timeout:g} s")
            try:
                os.kill(endpoint.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            kill_after, deadline = False, time.monotonic() + timeout
        time.sleep(0.1)
    return endpoint.pid
