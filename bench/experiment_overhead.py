"""What a cell costs before it runs: submit to first telemetry event, against ``mosaic run`` of the same cell.

Each pair runs one cell twice, alternating which goes first:

* ``mosaic run CELL.json``: from the moment the command is started to the ``ts`` of the run's first
  telemetry event (``run_started``): CLI start-up, discovery, the worker's check of the config and its
  imports;
* a one-cell experiment through the local daemon (running already, as it is for the cells after the
  first): from the journal's ``submitted`` line to the ``ts`` of the cell run's first event: the daemon's
  check of the config, its queue, the worker's start. The whole command (plan and coordinator start-up
  included) is reported beside it.

The cell is the reference worker's random play (``--worker random``) or Tianshou's DQN on CartPole in its own
environment (``--worker tianshou``). Reported: each side's median, the paired difference
(experiment − run, seconds) with its 95% t-interval, and the ratio.

    python bench/experiment_overhead.py [--pairs 6] [--worker random] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

CELLS = {
    "random": {"worker": "random", "environment": {"family": "classic", "env_id": "connect_four_v3"},
               "total_timesteps": 2000},
    "tianshou": {"worker": "tianshou", "algorithm": "dqn",
                 "environment": {"family": "gymnasium", "env_id": "CartPole-v1"}, "total_timesteps": 1000,
                 "num_envs": 2, "learning_starts": 200, "test_every_timesteps": 0,
                 "checkpoint": {"every_timesteps": 0}},
}


def first_event_ts(run_dir: Path) -> float:
    line = (run_dir / "telemetry.jsonl").read_text().splitlines()[0]
    return float(json.loads(line)["ts"])


def mosaic(home: Path, *args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "mosaic", *args], capture_output=True, text=True,
                          env={**os.environ, "MOSAIC_HOME": str(home)})
    if proc.returncode != 0:
        raise SystemExit(f"mosaic {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")


def via_run(home: Path, folder: Path, cell: dict, tag: str) -> float:
    path = folder / f"{tag}.json"
    path.write_text(json.dumps({**cell, "run_id": tag}))
    start = time.time()
    mosaic(home, "run", str(path))
    return first_event_ts(home / "trainer" / "runs" / tag) - start


def via_experiment(home: Path, folder: Path, cell: dict, tag: str) -> tuple[float, float]:
    worker = cell["worker"]
    base = {k: v for k, v in cell.items() if k not in ("worker", "seed")}
    spec = folder / f"{tag}.json"
    spec.write_text(json.dumps({"name": tag, "base": {worker: base}, "seeds": [cell.get("seed", 0)]}))
    start = time.time()
    mosaic(home, "experiment", "run", str(spec))
    journal = [json.loads(x) for x in (home / "experiments" / tag / "journal.jsonl").read_text().splitlines()]
    submitted = next(e["ts"] for e in journal if e["event"] == "submitted")
    first = first_event_ts(home / "trainer" / "runs" / f"{tag}-c000-a1")
    return first - submitted, first - start


def interval(diffs: list[float]) -> tuple[float, float, float]:
    from mosaic.scoring.interval import t_interval

    if len(diffs) < 2:  # one difference measures no spread
        return statistics.fmean(diffs), -math.inf, math.inf
    iv = t_interval(diffs)
    return iv.point, iv.low, iv.high


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--worker", choices=sorted(CELLS), default="random")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from mosaic.host.daemon.endpoint import find_daemon

    home = Path(tempfile.mkdtemp(prefix="mosaic-bench-overhead-"))
    if args.worker != "random":
        from mosaic.host import environments as worker_envs

        built = worker_envs.build(args.worker, home=Path(__file__).resolve().parents[1] / "var")
        (home / "envs").mkdir(parents=True)
        (home / "envs" / args.worker).symlink_to(built.path, target_is_directory=True)
    daemon = subprocess.Popen([sys.executable, "-m", "mosaic", "daemon", "--port", "0"],
                              env={**os.environ, "MOSAIC_HOME": str(home)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while find_daemon(home) is None:
            if daemon.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the bench's daemon did not start")
            time.sleep(0.1)
        cell = CELLS[args.worker]
        run_s, cell_s, command_s = [], [], []
        for pair in range(args.pairs):
            folder = home / f"pair-{pair}"
            folder.mkdir()
            if pair % 2 == 0:
                run_s.append(via_run(home, folder, cell, f"run-{pair}"))
                c, w = via_experiment(home, folder, cell, f"exp-{pair}")
            else:
                c, w = via_experiment(home, folder, cell, f"exp-{pair}")
                run_s.append(via_run(home, folder, cell, f"run-{pair}"))
            cell_s.append(c)
            command_s.append(w)
            print(f"pair {pair + 1}: mosaic run {run_s[-1]:.2f} s, experiment cell {cell_s[-1]:.2f} s "
                  f"(whole command {command_s[-1]:.2f} s) to the first event", flush=True)
        diff = interval([c - r for c, r in zip(cell_s, run_s)])
        print(f"{args.worker}: median to first event: mosaic run {statistics.median(run_s):.2f} s, experiment cell "
              f"(submit to first event) {statistics.median(cell_s):.2f} s, whole experiment command "
              f"{statistics.median(command_s):.2f} s")
        print(f"cell − run: {diff[0]:+.2f} s, 95% interval [{diff[1]:+.2f}, {diff[2]:+.2f}] over {args.pairs} pairs; "
              f"ratio of medians {statistics.median(cell_s) / statistics.median(run_s):.2f}")
        if args.out:
            args.out.write_text(json.dumps({"bench": "experiment_overhead", "worker": args.worker,
                                            "pairs": [{"run_s": r, "cell_s": c, "command_s": w}
                                                      for r, c, w in zip(run_s, cell_s, command_s)],
                                            "difference_s": list(diff)}, indent=1) + "\n")
    finally:
        daemon.terminate()
        daemon.wait(60)


if __name__ == "__main__":
    main()
