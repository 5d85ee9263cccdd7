"""Is a recorded process still the one running? Shared by the daemon and FastLane.

A pid alone is not enough: pids are reused, and a zombie still has one. The
start time (clock ticks since boot, field 22 of ``/proc/PID/stat``) identifies
a process for its whole life, so records keep it next to the pid.
"""

from __future__ import annotations

import os
from pathlib import Path


def _stat_fields(pid: int) -> list[str]:
    """Fields of ``/proc/PID/stat`` after the command name (empty if unreadable)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return stat.rsplit(")", 1)[-1].split()


def start_ticks(pid: int) -> int:
    """When ``pid`` started, in clock ticks since boot; 0 if unknown."""
    fields = _stat_fields(pid)
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return 0


def is_running(pid: int | None, started: int | str | None = None) -> bool:
    """Does ``pid`` exist, not as a zombie, and (when both are known) with this start time?"""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists; another user's
    fields = _stat_fields(pid)
    if fields and fields[0] == "Z":
        return False
    if not started or str(started) == "0":  # start time unknown: the pid is all we have
        return True
    now = start_ticks(pid)
    return not now or str(now) == str(started)


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a whole process group (a worker leads its own); False if it is gone."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def descends_from(pid: int, ancestor: int) -> bool:
    """Whether process ``pid`` is ``ancestor`` or one of its descendants (False once it is gone)."""
    seen = 0
    while pid > 1 and seen < 256:
        if pid == ancestor:
            return True
        fields = _stat_fields(pid)
        if len(fields) < 2:
            return False
        pid, seen = int(fields[1]), seen + 1  # ppid
    return pid == ancestor
