"""Experiments on a Ray cluster (``--backend ray``) against the local daemon, on the same cores.

Three measurements, on a two-node cluster this bench starts on this machine (``ray start``, one CPU
per node, its own temp dirs and ports; stopped by process id at the end) or on ``--address ADDR``:

* **submit to first event**: a one-cell experiment (the reference worker's random play) on the cluster
  and through the local daemon (running already), pairs alternating which goes first: from the journal's
  ``submitted`` line to the ``ts`` of the run's first telemetry event in this machine's run store;
* **telemetry from a remote cell**: lines per second reaching this machine's run store from a cell whose
  "worker" prints ``--lines`` telemetry lines as fast as it can (a purpose-built emitter speaking the
  worker handshake, run by a launcher subclass defined here), from its first line to the last line stored
  here; then the emit-to-store latency (p50 / p99) at 2,000 lines/s. Both through :class:`RayBackend`
  in this process, the path a coordinator takes;
* **a grid of ``--runs`` short runs**: the same grid on the cluster and through the local daemon, as aggregate
  env steps per second (the runs' env steps over the span from the first submit to the last run's end),
  rounds alternating; the verdict is the paired ratio cluster / local (``bench/pairs.py``). The cluster
  has as many CPUs as the daemon's budget (2 by default): the same cores.

    python bench/experiment_cluster.py [--address HOST:PORT] [--pairs 3] [--rounds 2] [--runs 8]
                                       [--timesteps 20000] [--lines 200000] [--out FILE.json]

Everything shares this machine's cores (nodes, daemon, driver, workers): the numbers are a floor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mosaic.experiments.backends.ray import RayCellLauncher  # noqa: E402
from mosaic.testing.ray_nodes import start_node, stop_node  # noqa: E402

ENV = {**os.environ, "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled")}
TARGET = 0.9
CELL = {"environment": {"family": "classic", "env_id": "connect_four_v3"}}

EMITTER = '''
import json, sys, time
config = json.loads(sys.stdin.readline())
print(json.dumps({"config": config}), flush=True)
sys.stdin.readline()  # the run folder: not needed
run_id, count, delay = config["run_id"], int(config["total_timesteps"]), float(config.get("step_delay_s", 0))
head = '{"v":1,"type":"episode","run_id":"%s","seq":' % run_id
def line(i):
    return (f'{head}{i},"ts":{time.time():.6f},"episode":{i},"length":25,'
            f'"returns":{{"agent_0":-4.125,"agent_1":-4.25}},"winner":null,"duration_s":0.0012}}\\n')
ready = "".join(line(i) for i in range(1, count + 1)) if not delay else ""
out = sys.stdout
out.write(json.dumps({"v": 1, "type": "run_started", "run_id": run_id, "seq": 0, "ts": time.time(),
                      "worker": "bench-emitter", "config_digest": "0" * 64, "versions": {}, "resources": {}}) + "\\n")
out.flush()
if ready:
    out.write(ready)
next_at = time.perf_counter()
for i in range(1, count + 1) if delay else ():
    out.write(line(i))
    out.flush()
    next_at += delay
    pause = next_at - time.perf_counter()
    if pause > 0:
        time.sleep(pause)
out.write(json.dumps({"v": 1, "type": "run_completed", "run_id": run_id, "seq": count + 1, "ts": time.time(),
                      "summary": {"timesteps_total": count}}) + "\\n")
out.flush()
'''
EMITTER_DIR = tempfile.mkdtemp(prefix="mosaic-bench-emitter-")
Path(EMITTER_DIR, "mosaic_bench_emitter.py").write_text(EMITTER)


class EmitterLauncher(RayCellLauncher):
    """The launcher with the emitter in place of the worker (defined in ``__main__``: Ray ships it by value)."""

    def __init__(self, run_id, config, home, storage=None, grace_s=10.0):  # noqa: ANN001
        os.environ["PYTHONPATH"] = EMITTER_DIR + os.pathsep + os.environ.get("PYTHONPATH", "")
        super().__init__(run_id, config, home, storage, grace_s)

    def _discover(self):  # noqa: ANN202
        return SimpleNamespace(name="random", metadata=SimpleNamespace(version="bench"), python=sys.executable,
                               cli_module="mosaic_bench_emitter")


# -- a cluster of this machine ---------------------------------------------------------------------------------
# -- helpers -----------------------------------------------------------------------------------------------------------
def mosaic(home: Path, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "mosaic", *args], capture_output=True, text=True,
                          env={**ENV, "MOSAIC_HOME": str(home)})
    if proc.returncode != 0:
        raise SystemExit(f"mosaic {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def journal(home: Path, name: str) -> list[dict]:
    return [json.loads(x) for x in (home / "experiments" / name / "journal.jsonl").read_text().splitlines()]


def backend_args(side: str, address: str) -> list[str]:
    return ["--backend", "ray", "--address", address] if side == "cluster" else ["--backend", "local"]


def first_event(home: Path, side: str, address: str, tag: str) -> float:
    spec = home / f"{tag}.json"
    spec.write_text(json.dumps({"name": tag, "base": {"random": {**CELL, "total_timesteps": 2000}}, "seeds": [0]}))
    mosaic(home, "experiment", "run", str(spec), *backend_args(side, address))
    submitted = next(e["ts"] for e in journal(home, tag) if e["event"] == "submitted")
    line = (home / "trainer" / "runs" / f"{tag}-c000-a1" / "telemetry.jsonl").read_text().splitlines()[0]
    return float(json.loads(line)["ts"]) - submitted


def grid_rate(home: Path, side: str, address: str, tag: str, runs: int, timesteps: int) -> float:
    spec = home / f"{tag}.json"
    spec.write_text(json.dumps({"name": tag, "seeds": list(range(runs)), "base": {"random": {
        **CELL, "total_timesteps": timesteps, "reporting": {"every_timesteps": max(1, timesteps // 10)}}}}))
    mosaic(home, "experiment", "run", str(spec), *backend_args(side, address))
    start = min(e["ts"] for e in journal(home, tag) if e["event"] == "submitted")
    steps, end = 0, start
    for i in range(runs):
        run = home / "trainer" / "runs" / f"{tag}-c{i:03d}-a1"
        lines = (run / "telemetry.jsonl").read_text().splitlines()
        done = next(json.loads(x) for x in reversed(lines) if '"run_completed"' in x)
        steps += int(done["summary"]["timesteps_total"])
        end = max(end, float(done["ts"]))
    return steps / (end - start)


def telemetry(home: Path, address: str, lines: int) -> dict:
    import ray

    from mosaic.experiments.backends.ray import RayBackend

    backend = RayBackend(home, address)
    backend._actor_class = ray.remote(EmitterLauncher)
    try:
        out = {}
        run_id = "telemetry-flat"
        backend.submit(run_id, {"worker": "random", "seed": 0, "total_timesteps": lines, "step_delay_s": 0})
        path = home / "trainer" / "runs" / run_id / "telemetry.jsonl"
        while backend.status([run_id])[run_id][0] not in ("completed", "failed", "cancelled"):
            time.sleep(0.01)
        events = path.read_text().splitlines()
        started = json.loads(events[0])["ts"]
        stored = path.stat().st_mtime
        out["flat_lines"] = len(events)
        out["flat_lines_per_s"] = (len(events) - 2) / (stored - started)
        # paced: when does each line reach the store here?
        run_id, rate, seconds = "telemetry-paced", 2000, 4
        arrivals: list[tuple[int, float]] = []
        path = home / "trainer" / "runs" / run_id / "telemetry.jsonl"
        stop = threading.Event()

        def watch() -> None:
            offset = 0
            while not stop.is_set():
                try:
                    with path.open("rb") as fh:
                        fh.seek(offset)
                        chunk = fh.read()
                except FileNotFoundError:
                    time.sleep(0.002)
                    continue
                now = time.time()
                cut = chunk.rfind(b"\n") + 1
                offset += cut
                for raw in chunk[:cut].splitlines():
                    arrivals.append((json.loads(raw)["ts"], now))
                time.sleep(0.002)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        backend.submit(run_id, {"worker": "random", "seed": 0, "total_timesteps": rate * seconds,
                                "step_delay_s": 1 / rate})
        while backend.status([run_id])[run_id][0] not in ("completed", "failed", "cancelled"):
            time.sleep(0.01)
        time.sleep(0.05)
        stop.set()
        watcher.join()
        latencies = sorted(now - ts for ts, now in arrivals[1:-1])
        out["paced_lines_per_s"] = rate
        out["latency_p50_ms"] = 1000 * latencies[len(latencies) // 2]
        out["latency_p99_ms"] = 1000 * latencies[int(len(latencies) * 0.99)]
        return out
    finally:
        backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", help="an existing cluster (default: start two one-CPU nodes here)")
    parser.add_argument("--pairs", type=int, default=3, help="submit-to-first-event pairs")
    parser.add_argument("--rounds", type=int, default=2, help="grid rounds (one grid per side each)")
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--timesteps", type=int, default=20_000, help="env steps per grid run")
    parser.add_argument("--lines", type=int, default=200_000, help="telemetry lines of the flat-out cell")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from mosaic.host.daemon.endpoint import find_daemon
    from pairs import verdict

    home = Path(tempfile.mkdtemp(prefix="mosaic-bench-cluster-"))
    temp_dirs = []
    daemon = subprocess.Popen([sys.executable, "-m", "mosaic", "daemon", "--port", "0"],
                              env={**ENV, "MOSAIC_HOME": str(home)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        address = args.address
        if not address:
            temp_dirs = [tempfile.mkdtemp(prefix="mray-bh-", dir="/tmp"), tempfile.mkdtemp(prefix="mray-bn-", dir="/tmp")]
            base = 40000 + (os.getpid() % 200) * 100
            started = time.monotonic()
            address = start_node(temp_dirs[0], (base, base + 49))
            start_node(temp_dirs[1], (base + 50, base + 99), head=address)
            print(f"two one-CPU nodes at {address} started in {time.monotonic() - started:.1f} s", flush=True)
        deadline = time.monotonic() + 60
        while find_daemon(home) is None:
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the bench's daemon did not start")
            time.sleep(0.1)
        result: dict = {"bench": "experiment_cluster", "cores": os.cpu_count(), "address": args.address or "local"}
        firsts = {"cluster": [], "local": []}
        for pair in range(args.pairs):
            order = ("cluster", "local") if pair % 2 == 0 else ("local", "cluster")
            for side in order:
                firsts[side].append(first_event(home, side, address, f"first-{side}-{pair}"))
            print(f"pair {pair + 1}: submit to first event: cluster {firsts['cluster'][-1]:.2f} s, "
                  f"local daemon {firsts['local'][-1]:.2f} s", flush=True)
        result["first_event_s"] = firsts
        print(f"submit to first event, median: cluster {statistics.median(firsts['cluster']):.2f} s, local daemon "
              f"{statistics.median(firsts['local']):.2f} s", flush=True)
        result["telemetry"] = t = telemetry(home, address, args.lines)
        print(f"telemetry from a remote cell: {t['flat_lines_per_s']:,.0f} lines/s into this machine's run store "
              f"({t['flat_lines']:,} lines flat out); at {t['paced_lines_per_s']} lines/s emit-to-store latency "
              f"p50 {t['latency_p50_ms']:.0f} ms, p99 {t['latency_p99_ms']:.0f} ms", flush=True)
        rates = {"cluster": [], "local": []}
        for r in range(args.rounds):
            order = ("cluster", "local") if r % 2 == 0 else ("local", "cluster")
            for side in order:
                rates[side].append(grid_rate(home, side, address, f"grid-{side}-{r}", args.runs, args.timesteps))
            print(f"round {r + 1}: {args.runs} runs of {args.timesteps} env steps: cluster {rates['cluster'][-1]:.0f} "
                  f"env steps/s, local {rates['local'][-1]:.0f} ({rates['cluster'][-1] / rates['local'][-1]:.2f})",
                  flush=True)
        found = verdict(rates["cluster"], rates["local"], TARGET)
        for line in found.lines(rates["cluster"], rates["local"]):
            print(line.replace("mosaic", "cluster").replace("direct", "local"))
        result["grid"] = {"runs": args.runs, "timesteps": args.timesteps, "rates": rates, **found.to_dict()}
        if args.out:
            args.out.write_text(json.dumps(result, indent=1) + "\n")
    finally:
        daemon.terminate()
        daemon.wait(60)
        for temp_dir in reversed(temp_dirs):
            stop_node(temp_dir)


if __name__ == "__main__":
    main()
