"""Training speed on a GPU against the CPU, per worker: the same config run with ``resources.gpus`` 0, then 1.

Each run is the worker's own process, started as the host starts it (``python -m <worker>.cli --config
CONFIG --run-dir DIR``), in the Python given by ``--python`` (the worker's environment, or any Python whose
path holds the worker's packages). The only difference between the two runs of a worker is
``resources.gpus``: the worker maps it to its library's own device setting (CleanRL's ``--cuda``, XuanCe's
``device``, Tianshou's torch device, JAX's platform for Jumanji). A request for a GPU on a machine without one is refused by the worker
(exit 2), and the bench says so.

The measure is the run's training throughput from its own telemetry: env steps between the first and the last
``metrics`` event over the time between them. The first report interval (imports, the env's start, CUDA's
initialisation, the first learning steps' allocation) is left out; the wall time of the whole process is
printed beside it.

    python bench/gpu_speedup.py [--workers cleanrl,tianshou,jumanji,xuance] [--python PY] [--devices cpu,cuda]
                                [--threads N] [--json FILE]

``--python`` defaults to each worker's environment under ``var/envs`` (``scripts/bootstrap``); ``--threads``
(default: every CPU) is the torch threads of both runs, so the CPU side uses the whole machine.
The configs are small on purpose (a minute or two per run on a CPU); the table in docs/results.md says which
machine gave which numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

#: One training per worker: what the worker is for, at a budget of a minute or two on a CPU.
CONFIGS: dict[str, dict[str, Any]] = {
    # a convolutional Q-network on Atari frames: the kind of network a GPU is for
    "cleanrl": {"worker": "cleanrl", "algorithm": "dqn_atari", "environment": {"env_id": "PongNoFrameskip-v4"},
                "seed": 1, "total_timesteps": 12000, "batch_size": 32,
                "algo_params": {"learning_starts": 2000, "buffer_size": 12000, "train_frequency": 4,
                                "target_network_frequency": 1000}},  # a metrics event per 100 steps (the script's)
    # two-layer MLPs on CartPole: the kind of network a GPU is not for
    "tianshou": {"worker": "tianshou", "algorithm": "dqn", "environment": {"env_id": "CartPole-v1"}, "seed": 1,
                 "total_timesteps": 20000, "num_envs": 4, "collect_steps": 10, "update_per_step": 0.5,
                 "learning_starts": 1000, "hidden_sizes": [256, 256], "test_every_timesteps": 0,
                 "reporting": {"every_timesteps": 4000}},
    # jumanji.training's A2C on TSP20 (its attention network), the env itself in JAX: 4 epochs of 12,800 steps
    "jumanji": {"worker": "jumanji", "algorithm": "a2c", "environment": {"family": "jumanji", "env_id": "tsp"},
                "seed": 0, "total_timesteps": 4 * 12_800, "n_steps": 20, "num_envs": 32,
                "num_learner_steps_per_epoch": 20, "eval_episodes": 100, "greedy_eval_episodes": 100},
    # MAPPO, a shared actor and a centralised critic (MLPs), three MPE agents
    "xuance": {"worker": "xuance", "algorithm": "mappo", "environment": {"family": "mpe", "env_id": "simple_spread_v3",
               "api_type": "PARALLEL"}, "seed": 1, "total_timesteps": 16000, "num_envs": 8, "batch_size": 800,
               "reporting": {"every_timesteps": 3200}},
}


def measure(worker: str, python: str, device: str, threads: int, folder: Path) -> dict[str, Any]:
    """One run of ``worker``'s config on ``device``: its throughput, wall time and what it reported."""
    config = json.loads(json.dumps(CONFIGS[worker]))
    config["run_id"] = f"{worker}-{device}"
    config["resources"] = {"gpus": 1 if device == "cuda" else 0, "threads": threads}
    run_dir = folder / config["run_id"]
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(config, indent=1))
    started = time.perf_counter()
    proc = subprocess.run([python, "-m", f"{worker}_worker.cli", "--config", str(run_dir / "config.json"),
                           "--run-dir", str(run_dir)], capture_output=True, text=True,
                          env={**os.environ, "MOSAIC_RUN_DIR": str(run_dir)}, timeout=1800)
    wall = time.perf_counter() - started
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    out: dict[str, Any] = {"worker": worker, "device": device, "exit": proc.returncode, "wall_s": round(wall, 2)}
    if proc.returncode != 0:
        failed = [e.get("message") for e in events if e.get("type") == "run_failed"]
        out["error"] = (failed or proc.stderr.strip().splitlines()[-1:] or ["no output"])[0]
        return out
    metrics = [e for e in events if e.get("type") == "metrics"]
    (start,) = [e for e in events if e.get("type") == "run_started"]
    first, last = metrics[0], metrics[-1]
    steps = last["timesteps_total"] - first["timesteps_total"]
    out.update(steps_timed=steps, seconds_timed=round(last["ts"] - first["ts"], 3),
               steps_per_s=round(steps / (last["ts"] - first["ts"]), 1), timesteps_total=last["timesteps_total"],
               device_reported=start.get("resources", {}).get("device") or ("cuda" if start.get("resources", {}).get(
                   "gpus") else "cpu"),
               versions=start.get("versions", {}))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default=",".join(CONFIGS))
    parser.add_argument("--python", help="the Python to run every worker in (default: its environment)")
    parser.add_argument("--devices", default="cpu,cuda")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="mosaic-gpu-bench-") as tmp:
        for worker in args.workers.split(","):
            if worker not in CONFIGS:
                parser.error(f"--workers: {worker!r} has no config here; allowed: {', '.join(CONFIGS)}")
            python = args.python or str(REPO / "var" / "envs" / worker / "bin" / "python")
            for device in args.devices.split(","):
                result = measure(worker, python, device, args.threads, Path(tmp))
                results.append(result)
                print(json.dumps({k: v for k, v in result.items() if k != "versions"}), flush=True)
    by = {(r["worker"], r["device"]): r for r in results}
    print(f"\n{'worker':10} {'cpu steps/s':>12} {'cuda steps/s':>13} {'speed-up':>9}")
    for worker in dict.fromkeys(r["worker"] for r in results):
        cpu, gpu = by.get((worker, "cpu"), {}), by.get((worker, "cuda"), {})
        ratio = (f"{gpu['steps_per_s'] / cpu['steps_per_s']:.2f}" if "steps_per_s" in cpu and "steps_per_s" in gpu
                 else "-")
        print(f"{worker:10} {cpu.get('steps_per_s', '-'):>12} {gpu.get('steps_per_s', '-'):>13} {ratio:>9}")
    if args.json:
        args.json.write_text(json.dumps({"python": sys.version, "threads": args.threads, "results": results},
                                        indent=1))
    return 0 if all(r["exit"] == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
