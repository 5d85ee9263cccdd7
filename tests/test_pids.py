"""Process identity checks used by the daemon (re-attach) and FastLane (stale segments)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from mosaic.pids import is_running, start_ticks


def test_a_live_process_matches_its_own_start_time_only():
    me = os.getpid()
    ticks = start_ticks(me)
    assert ticks > 0
    assert is_running(me) and is_running(me, ticks) and is_running(me, str(ticks))
    assert not is_running(me, ticks + 1)  # same pid, another process's start time: pid reuse


def test_exited_zombie_and_missing_processes_are_not_running():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    ticks = start_ticks(child.pid)
    deadline = time.monotonic() + 10
    while not _is_zombie(child.pid) and time.monotonic() < deadline:  # exited, not yet reaped
        time.sleep(0.01)
    assert _is_zombie(child.pid)
    assert not is_running(child.pid, ticks)
    child.wait()
    assert not is_running(child.pid)
    assert not is_running(None) and not is_running(0) and not is_running(-5)


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] == "Z"
    except OSError:
        return True


def test_descends_from_follows_parents_up():
    from mosaic.pids import descends_from

    me = os.getpid()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert descends_from(me, me) and descends_from(child.pid, me)
        assert not descends_from(me, child.pid) and not descends_from(os.getppid(), me)
    finally:
        child.kill()
        child.wait()
    assert not descends_from(child.pid, me)  # gone
