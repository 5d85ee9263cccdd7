"""Nothing a worker starts outlives its run, whichever way the run is hosted.

``mosaic run`` (:func:`mosaic.host.launcher.run_in_foreground`) and the cluster's cell launcher
(:class:`mosaic.host.cell_launcher.CellLauncher`, without Ray: it knows nothing of the cluster) host the
reference worker behind a wrapper interpreter that first leaves a child the worker does not wait for; the
daemon's path, across a restart, is tests/daemon/test_dm_no_orphans.py. Each host runs in a process of its
own, as it does for real, and the test ends it as a user or a cluster would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from mosaic.testing import wait_until

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="process groups and prctl: Linux")

CONFIG = {"worker": "random", "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL"},
          "total_timesteps": 1_000_000, "step_delay_s": 0.01, "seed": 7,
          "reporting": {"every_timesteps": 100, "heartbeat_interval_s": 0.5}}

# The worker's interpreter: it leaves a child that ignores SIGTERM, SIGINT and SIGHUP (in the worker's process
# group, or with NEW_SESSION=1 in a session of its own, out of reach of a group's signals), records the
# child's pid, then becomes the real worker.
WRAPPER = textwrap.dedent(f"""\
    #!{sys.executable}
    import os, subprocess, sys
    child = subprocess.Popen([{sys.executable!r}, "-c", "import signal, time\\n"
                              "for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):\\n"
                              "    signal.signal(s, signal.SIG_IGN)\\n"
                              "time.sleep(600)"], start_new_session=os.environ.get("NEW_SESSION") == "1",
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)  # not the telemetry pipe
    with open(os.environ["CHILD_PIDS"], "a") as fh:
        fh.write(f"{{os.getpid()}} {{child.pid}}\\n")
    os.execv({sys.executable!r}, [{sys.executable!r}, *sys.argv[1:]])
    """)

# `mosaic run` as clients/cli/runs.py does it (one process checks the config and runs it, Ctrl-C cancels),
# with the wrapper as the worker's interpreter.
MOSAIC_RUN = textwrap.dedent("""\
    import dataclasses, json, sys
    from mosaic.host.discovery import discover_workers
    from mosaic.host.launcher import run_in_foreground, start_checked
    from mosaic.runs import RunStore
    worker = dataclasses.replace(discover_workers(only="random").get("random"), python=sys.argv[1])
    started = start_checked(worker, RunStore(), json.loads(sys.argv[2]), status="created")
    outcome = run_in_foreground(worker, started, grace_s=float(sys.argv[3]))
    sys.exit({"completed": 0, "cancelled": 3}.get(outcome.status, 1))
    """)

# A cell as a cluster node runs it (the Ray actor is only what keeps this process alive there).
CELL = textwrap.dedent("""\
    import dataclasses, json, sys, threading
    from mosaic.host.cell_launcher import CellLauncher

    class Cell(CellLauncher):
        def _discover(self):
            return dataclasses.replace(super()._discover(), python=sys.argv[1])

    cell = Cell(json.loads(sys.argv[2])["run_id"], json.loads(sys.argv[2]), sys.argv[3], grace_s=5)
    threading.Event().wait()  # until killed
    """)


def _wrapper(tmp_path: Path) -> Path:
    path = tmp_path / "python-wrapper"
    path.write_text(WRAPPER)
    path.chmod(0o755)
    return path


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _host(code: str, *args: str, home: Path, pids: Path, new_session: bool = False) -> subprocess.Popen:
    env = {**os.environ, "MOSAIC_HOME": str(home), "CHILD_PIDS": str(pids), "NEW_SESSION": "1" if new_session else "0"}
    return subprocess.Popen([sys.executable, "-c", code, *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _worker_and_child(pids: Path, host: subprocess.Popen) -> tuple[int, int]:
    line = wait_until(lambda: pids.is_file() and pids.read_text().strip(), 120, "the worker to start its child",
                      proc=host)
    worker, child = map(int, line.split()[:2])
    assert _alive(worker) and _alive(child)
    return worker, child


def _manifest(home: Path, run_id: str) -> dict:
    path = home / "trainer" / "runs" / run_id / "analytics.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def test_mosaic_run_interrupted_leaves_nothing_of_its_worker(tmp_path):
    """Ctrl-C: the worker stops at its safe point; its child, deaf to SIGTERM, goes with its group."""
    home, pids = tmp_path / "home", tmp_path / "pids"
    config = {**CONFIG, "run_id": "orphans-run"}
    host = _host(MOSAIC_RUN, str(_wrapper(tmp_path)), json.dumps(config), "10", home=home, pids=pids)
    try:
        worker, child = _worker_and_child(pids, host)
        assert os.getpgid(child) == worker  # the worker leads its group; the child is in it
        wait_until(lambda: _manifest(home, "orphans-run").get("status") == "running", 60, "the run to run",
                   proc=host)
        host.send_signal(signal.SIGINT)
        _, err = host.communicate(timeout=60)
        assert host.returncode == 3, err[-2000:]  # cancelled
        assert _manifest(home, "orphans-run")["status"] == "cancelled"
        wait_until(lambda: not _alive(worker) and not _alive(child), 10, "the worker and its child to go")
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        for line in pids.read_text().split("\n") if pids.is_file() else []:
            for pid in map(int, line.split()):
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("new_session", [False, True], ids=["child-in-group", "child-in-own-session"])
def test_a_killed_cell_launcher_leaves_nothing_of_its_worker(tmp_path, new_session):
    """SIGKILL of the process hosting a cell (a Ray worker on a node): its guard kills the worker's whole tree,
    a child in a session of its own included (the guard adopted it)."""
    home, pids = tmp_path / "home", tmp_path / "pids"
    config = {**CONFIG, "run_id": "orphans-cell"}
    host = _host(CELL, str(_wrapper(tmp_path)), json.dumps(config), str(home), home=home, pids=pids,
                 new_session=new_session)
    try:
        worker, child = _worker_and_child(pids, host)
        manifest = wait_until(lambda: (m := _manifest(home / "cluster", "orphans-cell")).get("guard_pid") and m,
                              60, "the cell's manifest", proc=host)
        guard = manifest["guard_pid"]
        assert psutil.Process(worker).ppid() == guard
        assert (os.getsid(child) == child) is new_session
        host.kill()
        host.wait(30)
        wait_until(lambda: not any(map(_alive, (guard, worker, child))), 20,
                   "the guard, the worker and its child to go")
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        for line in pids.read_text().split("\n") if pids.is_file() else []:
            for pid in map(int, line.split()):
                if _alive(pid):
                    os.kill(pid, signal.SIGKILL)
