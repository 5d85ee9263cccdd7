"""A private multi-node Ray cluster on this machine, for tests and benchmarks of cluster features.

Each node is started with ``ray start`` (``--head``, then ``--address``) with a temp dir and ports of its own
and one CPU, no dashboard, and is stopped by process id: never ``ray stop``, which stops every Ray process on
the machine (other people's clusters included), and never ``ray.cluster_utils.Cluster``, which writes
machine-wide state into Ray's default temp folder. A node's processes are found by its temp dir, which
every one of them names on its command line (or descends from one that does).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Mapping

#: Ray's token auth off (a private test cluster), no usage stats.
ENV = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
#: Test-only: the cluster notices a dead node in about 1.5 s instead of about 15 s.
FAST_HEALTH_CHECKS = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3",
                      "RAY_health_check_timeout_ms": "500", "RAY_health_check_initial_delay_ms": "0"}


def free_ports(n: int, avoid: tuple[int, int] = (0, -1)) -> list[int]:
    """``n`` ports free now, none in ``avoid`` (a node's worker ports: Ray refuses a clash)."""
    sockets = []
    while len([s for s in sockets if not avoid[0] <= s.getsockname()[1] <= avoid[1]]) < n:
        sockets.append(socket.socket())
        sockets[-1].bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets if not avoid[0] <= s.getsockname()[1] <= avoid[1]][:n]
    for s in sockets:
        s.close()
    return ports


def start_node(temp_dir: str, worker_ports: tuple[int, int], head: str | None = None,
               env: Mapping[str, str] | None = None) -> str:
    """Start a node (the head when ``head`` is None) with one CPU; returns the cluster's address. Raises
    RuntimeError with ``ray start``'s output when it fails."""
    avoid = (worker_ports[0] - 50, worker_ports[1] + 50)  # the other node's worker ports too
    ports = free_ports(7, avoid)
    args = [str(Path(sys.executable).with_name("ray")), "start", "--temp-dir", temp_dir, "--num-cpus", "1",
            "--node-ip-address", "127.0.0.1", "--node-manager-port", str(ports[0]),
            "--object-manager-port", str(ports[1]), "--min-worker-port", str(worker_ports[0]),
            "--max-worker-port", str(worker_ports[1]), "--dashboard-agent-listen-port", str(ports[2]),
            "--dashboard-agent-grpc-port", str(ports[3]), "--metrics-export-port", str(ports[4]),
            "--runtime-env-agent-port", str(ports[5]), "--disable-usage-stats"]
    if head is None:
        port, client = free_ports(2, avoid)
        args += ["--head", "--port", str(port), "--include-dashboard=false", "--ray-client-server-port", str(client)]
    else:
        args += ["--address", head]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120, env={**ENV, **(env or {})})
    if proc.returncode != 0:
        raise RuntimeError(f"ray start failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return head or f"127.0.0.1:{port}"


def processes_of(temp_dir: str) -> list[int]:
    """A node's processes: those naming its temp dir, and everything below them (Ray's workers rename
    themselves ``ray::...``)."""
    from mosaic.host.cell_launcher import descendants

    needle = temp_dir.encode()
    named = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                if needle in Path(f"/proc/{entry}/cmdline").read_bytes():
                    named.append(int(entry))
            except OSError:
                continue
    return sorted({p for root in named for p in [root, *descendants(root)]})


def raylet(temp_dir: str) -> tuple[int, str]:
    """(pid, node id) of a node's raylet."""
    for pid in processes_of(temp_dir):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if args and args[0].endswith(b"/raylet"):
            node = next(a for a in args if a.startswith(b"--node_id="))
            return pid, node.split(b"=", 1)[1].decode()
    raise RuntimeError(f"no raylet runs with temp dir {temp_dir}")


def stop_node(temp_dir: str, grace_s: float = 5.0) -> None:
    """SIGTERM the node's processes, SIGKILL what is left after ``grace_s``, until none is. (A head whose other
    node was lost takes more than 5 s to stop on SIGTERM: a test's throwaway cluster need not wait for that.)"""
    from mosaic.pids import is_running

    pids = processes_of(temp_dir)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 10)
        while time.monotonic() < deadline and any(is_running(p) for p in pids):
            time.sleep(0.1)
        pids = [p for p in pids if is_running(p)] + [p for p in processes_of(temp_dir) if p not in pids]
        if not pids:
            return
