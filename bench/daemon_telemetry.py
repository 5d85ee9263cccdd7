"""End-to-end telemetry through the trainer daemon: worker print → subscriber receive.

Starts a real daemon (temporary MOSAIC_HOME, free loopback port) whose
``random`` worker is replaced by ``bench/daemon_emitter.py`` (see there), and
one StreamTelemetry subscriber per run, each on its own gRPC channel in this
process. Every event passes the whole path: the emitter's stdout → the spool
file → the daemon's line splitter, parser and recorder (``telemetry.jsonl``)
→ the hub → gRPC → the subscriber.

* throughput: 1 and 8 concurrent runs printing as fast as they can;
  every run prints ``run_started`` and waits at a barrier until all runs
  and subscribers are ready; events/s = events received / (last receive −
  barrier release).
  Target: >= 50k events/s aggregate.
* latency: 1 and 8 runs at 1k events/s each; latency = receive time − the
  event's ``ts`` (set when it was printed). Target: p99 < 50 ms.

    .venv/bin/python bench/daemon_telemetry.py [--events 200000] [--seconds 5]

Everything shares this machine's cores (emitters, daemon, subscribers), so
the numbers are a floor for a daemon with cores of its own.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from mosaic.host.daemon.client import DaemonClient, state_name
from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb
from mosaic.testing import LocalDaemon, start_daemon

HERE = Path(__file__).resolve().parent
TARGET_EVENTS_PER_S = 50_000
TARGET_P99_MS = 50.0
CONFIG = {"worker": "random", "environment": {"family": "mpe", "env_id": "simple_spread_v3",
                                             "api_type": "PARALLEL"}, "reporting": {"heartbeat_interval_s": 0}}


def start_bench_daemon(home: Path) -> LocalDaemon:
    """A daemon whose `random` worker is the bench's emitter."""
    # BENCH_DAEMON_CMD swaps `-m mosaic daemon` for e.g. a profiling wrapper script.
    command = tuple(os.environ.get("BENCH_DAEMON_CMD", "-m mosaic daemon").split())
    return start_daemon(home, "--max-runs", "16", "--cpu-budget", "64",
                        "--python", f"random={HERE / 'daemon_emitter.py'}", command=command,
                        env={"MOSAIC_BENCH_REAL_PYTHON": sys.executable, "MOSAIC_BENCH_GO": str(home / "go")})


def subscribe(address: str, run_id: str, latencies: list[float] | None, out: dict) -> None:
    """Receive a run's whole stream; record counts, first/last times and (optionally) latencies."""
    received, replayed, first, last = 0, 0, None, None
    with DaemonClient(address) as client:
        stream = client.stub.StreamTelemetry(pb.StreamTelemetryRequest(run=run_id, from_seq=0, follow=True))
        for batch in stream:
            now = time.time()
            if first is None:
                first = now
            last = now
            received += len(batch.events)
            if batch.replay:
                replayed += len(batch.events)
            if latencies is not None:
                for event in batch.events:
                    if event.type == "episode":
                        latencies.append(now - json.loads(event.json)["ts"])
    out.update(received=received, replayed=replayed, first=first, last=last)


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_scenario(client: DaemonClient, daemon_pid: int, go: Path, runs: int, events: int, delay: float,
                 measure_latency: bool) -> dict:
    go.unlink(missing_ok=True)
    run_ids = [client.submit({**CONFIG, "total_timesteps": events, "step_delay_s": delay}).run_id
               for _ in range(runs)]
    results: list[dict] = [{} for _ in run_ids]
    latencies: list[list[float]] = [[] for _ in run_ids]
    threads = [threading.Thread(target=subscribe, args=(client.address, rid,
                                                        latencies[i] if measure_latency else None, results[i]))
               for i, rid in enumerate(run_ids)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    while any(state_name(client.get(rid).state) != "RUNNING" for rid in run_ids):  # all at the barrier
        if time.monotonic() > deadline:
            raise SystemExit("runs did not start")
        time.sleep(0.05)
    time.sleep(0.2)  # let the subscribers drain the run_started events
    started = time.time()
    cpu_before = _cpu_seconds(daemon_pid), time.process_time()
    go.touch()
    for t in threads:
        t.join()
    cpu = _cpu_seconds(daemon_pid) - cpu_before[0], time.process_time() - cpu_before[1]
    for rid in run_ids:
        info = client.get(rid)
        assert state_name(info.state) == "COMPLETED", (rid, state_name(info.state), info.failure_reason)
    total = sum(r["received"] for r in results)
    span = max(r["last"] for r in results) - started
    flat = sorted(x for lat in latencies for x in lat)
    out = {"runs": runs, "events": total, "seconds": span, "events_per_s": total / span,
           "daemon_cpu_s": cpu[0], "subscriber_cpu_s": cpu[1],
           "replayed": sum(r["replayed"] for r in results)}
    if flat:
        out["p50_ms"] = 1000 * statistics.median(flat)
        out["p99_ms"] = 1000 * flat[min(len(flat) - 1, int(0.99 * len(flat)))]
        out["max_ms"] = 1000 * flat[-1]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000, help="events per throughput scenario")
    parser.add_argument("--seconds", type=float, default=5.0, help="length of each latency scenario")
    parser.add_argument("--throughput-runs", type=int, nargs="*", default=[1, 8], metavar="N")
    parser.add_argument("--latency-runs", type=int, nargs="*", default=[1, 8], metavar="N")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mosaic-bench-daemon-"))
    daemon = start_bench_daemon(home)
    proc, client = daemon.proc, daemon.client
    try:
        print(f"daemon telemetry bench ({os.cpu_count()} cores shared by emitters, daemon and subscribers)")
        for runs in args.throughput_runs:
            r = run_scenario(client, proc.pid, home / "go", runs, args.events // runs, 0.0, measure_latency=False)
            print(f"throughput {runs} run(s): {r['events']} events in {r['seconds']:.2f} s = "
                  f"{r['events_per_s']:,.0f} events/s  (target >= {TARGET_EVENTS_PER_S:,}: "
                  f"ratio {r['events_per_s'] / TARGET_EVENTS_PER_S:.2f}); CPU s: daemon {r['daemon_cpu_s']:.1f}, "
                  f"subscribers {r['subscriber_cpu_s']:.1f}; {r['replayed']} events caught up from disk")
        for runs in args.latency_runs:
            r = run_scenario(client, proc.pid, home / "go", runs, int(1000 * args.seconds), 0.001,
                             measure_latency=True)
            print(f"latency at 1k events/s per run, {runs} run(s): p50 {r['p50_ms']:.2f} ms, "
                  f"p99 {r['p99_ms']:.2f} ms, max {r['max_ms']:.2f} ms over {r['events']} events "
                  f"(target p99 < {TARGET_P99_MS:g} ms: ratio {r['p99_ms'] / TARGET_P99_MS:.2f})")
    finally:
        daemon.stop()
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
