"""A grid run by an experiment against the same runs one after another: aggregate env steps per second.

An experiment exists to keep a machine full. Eight short single-threaded runs (the reference worker's
random play of connect four, one seed each) are run twice, in one process of this bench:

* one after another: ``mosaic run CELL.json`` for each of the eight cells, each waited for;
* as an experiment: ``mosaic experiment run SPEC`` with the same eight cells, through the local daemon
  (started for the bench's home first, so both sides pay no daemon start-up), whose CPU limit runs as many
  at once as the machine has cores.

Each side's rate is the env steps of its eight runs over its wall time from the first command's start to
the last run's end. Rounds alternate which side goes first; the verdict is the paired ratio
experiment / sequential (``bench/pairs.py``) with its 95% interval.

    python bench/experiment_throughput.py [--rounds 3] [--runs 8] [--timesteps 60000] [--out FILE.json]

Target: at least 1.8 on 2 cores (a perfect 2-core machine gives 2.0).
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

from pairs import save, start_daemon, verdict  # noqa: E402

TARGET = 1.8


def cell_config(seed: int, timesteps: int) -> dict:
    return {"worker": "random", "environment": {"family": "classic", "env_id": "connect_four_v3"},
            "total_timesteps": timesteps, "seed": seed, "reporting": {"every_timesteps": max(1, timesteps // 10)}}


def steps_of(home: Path, run_ids: list[str]) -> int:
    total = 0
    for run_id in run_ids:
        lines = (home / "trainer" / "runs" / run_id / "telemetry.jsonl").read_text().splitlines()
        done = next(json.loads(x) for x in reversed(lines) if '"run_completed"' in x)
        total += int(done["summary"]["timesteps_total"])
    return total


def mosaic(home: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "mosaic", *args], capture_output=True, text=True,
                          env={**os.environ, "MOSAIC_HOME": str(home)})
    if proc.returncode != 0:
        raise SystemExit(f"mosaic {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc


def sequential(home: Path, folder: Path, runs: int, timesteps: int, tag: str) -> float:
    ids = []
    start = time.monotonic()
    for seed in range(runs):
        run_id = f"{tag}-seq-{seed}"
        path = folder / f"{run_id}.json"
        path.write_text(json.dumps({**cell_config(seed, timesteps), "run_id": run_id}))
        mosaic(home, "run", str(path))
        ids.append(run_id)
    return steps_of(home, ids) / (time.monotonic() - start)


def experiment(home: Path, folder: Path, runs: int, timesteps: int, tag: str) -> float:
    spec = folder / f"{tag}.json"
    base = {k: v for k, v in cell_config(0, timesteps).items() if k not in ("worker", "seed")}
    spec.write_text(json.dumps({"name": f"{tag}-exp", "base": {"random": base}, "seeds": list(range(runs))}))
    start = time.monotonic()
    mosaic(home, "experiment", "run", str(spec))
    elapsed = time.monotonic() - start
    return steps_of(home, [f"{tag}-exp-c{i:03d}-a1" for i in range(runs)]) / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--timesteps", type=int, default=60_000, help="env steps per run")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mosaic-bench-experiment-"))
    daemon = start_daemon(home)
    try:
        exp_rates, seq_rates = [], []
        for r in range(args.rounds):
            folder = home / f"round-{r}"
            folder.mkdir()
            order = (experiment, sequential) if r % 2 == 0 else (sequential, experiment)
            rates = {fn.__name__: fn(home, folder, args.runs, args.timesteps, f"r{r}") for fn in order}
            exp_rates.append(rates["experiment"])
            seq_rates.append(rates["sequential"])
            print(f"round {r + 1}: sequential {seq_rates[-1]:.0f} env steps/s, experiment {exp_rates[-1]:.0f} "
                  f"({exp_rates[-1] / seq_rates[-1]:.2f})", flush=True)
        result = verdict(exp_rates, seq_rates, TARGET)
        print(f"{args.runs} runs of {args.timesteps} env steps on {os.cpu_count()} cores, {args.rounds} rounds")
        for line in result.lines(exp_rates, seq_rates):
            print(line.replace("mosaic", "experiment").replace("direct", "sequential"))
        save(args.out, {"bench": "experiment_throughput", "runs": args.runs, "timesteps": args.timesteps,
                        "cores": os.cpu_count(), "sides": {"mosaic": "experiment", "direct": "sequential"}},
             list(range(args.rounds)), exp_rates, seq_rates, result)
    finally:
        daemon.terminate()
        daemon.wait(60)


if __name__ == "__main__":
    main()
