"""Env steps per second of a CleanRL script through MOSAIC against the same script run directly.

Both sides run the unmodified script in the cleanrl worker's environment with
the same command line (the one MOSAIC builds from the config: ``run_started``
shows it):

* direct: ``python -m cleanrl.<script> ARGS`` in a fresh folder, as a CleanRL
  user runs it;
* mosaic: ``mosaic run CONFIG`` (its defaults otherwise: the observers in the
  script, telemetry, checkpoint at the end, manifest).

Same settings includes the process: MOSAIC starts every worker with ``PYTHONHASHSEED``
set from the run's seed (for repeatable runs), so the direct side gets the same value.
Without it, the direct side ran with a fresh hash seed each time (a fresh memory layout of
every dict and set) while MOSAIC's ran with one fixed layout, which is not a like-for-like
comparison. Pair i uses seed i + 1 on both sides, so no single layout decides the result.

Throughput is the script's own measure, ``global_step / elapsed`` as its last
``SPS:`` line prints it (both sides print it; MOSAIC keeps the script's stdout in
``logs/script.stdout``). Pairs alternate (mosaic, direct, mosaic, ...) so drift
hits both alike; the ratio is the median MOSAIC rate over the median direct rate.

This machine's rate for the same deterministic run varies by 10-20% from one
process to the next, on either side, so one pair decides nothing: the bench runs
many pairs and gives a 95% bootstrap interval of the ratio (pairs resampled). The
target is decided only when that interval lies wholly on one side of it.

    python bench/cleanrl_throughput.py [--algorithm ppo] [--timesteps 20000] [--pairs 10] [--threads 1]

Target: mosaic / direct >= 0.97. Needs the worker's environment (`mosaic envs build cleanrl`).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SPS = re.compile(r"^SPS: (\d+)", re.MULTILINE)
TARGET = 0.97


def last_sps(text: str) -> int:
    found = SPS.findall(text)
    if not found:
        raise SystemExit(f"no SPS line in:\n{text[-2000:]}")
    return int(found[-1])


def ratio_interval(mosaic: list[int], direct: list[int], draws: int = 5000) -> tuple[float, float]:
    """95% bootstrap interval of median(mosaic) / median(direct), pairs resampled together."""
    rng = random.Random(0)
    pairs = list(zip(mosaic, direct))
    ratios = []
    for _ in range(draws):
        sample = [rng.choice(pairs) for _ in pairs]
        ratios.append(statistics.median(m for m, _ in sample) / statistics.median(d for _, d in sample))
    ratios.sort()
    return ratios[int(0.025 * draws)], ratios[int(0.975 * draws) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="ppo")
    parser.add_argument("--timesteps", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads on both sides (torch_num_threads / OMP_NUM_THREADS); 0 = torch's default")
    args = parser.parse_args()

    from mosaic import worker_envs
    from mosaic.testing import WorkerHome

    # a fresh home whose envs/cleanrl is the checkout's environment (built first: a no-op when up to date)
    bench_home = WorkerHome.create(Path(tempfile.mkdtemp(prefix="mosaic-bench-cleanrl-")), "cleanrl",
                                   worker_envs.build("cleanrl").path)
    home, python = bench_home.root, bench_home.python
    config = home / "bench.json"
    threads = {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)} if args.threads else {}
    base = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    environ = {**base, "MOSAIC_HOME": str(home)}
    direct_rates, mosaic_rates, command = [], [], None
    for pair in range(args.pairs):
        seed = pair + 1
        config.write_text(json.dumps({"worker": "cleanrl", "algorithm": args.algorithm, "seed": seed,
                                      "total_timesteps": args.timesteps,
                                      **({"torch_num_threads": args.threads} if args.threads else {})}))
        proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(config)], capture_output=True,
                              text=True, env=environ)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        run = max((home / "trainer" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
        started = json.loads((run / "telemetry.jsonl").read_text().splitlines()[0])
        command = started["command"]
        mosaic_rates.append(last_sps((run / "logs" / "script.stdout").read_text()))
        folder = home / f"direct-{pair}"
        folder.mkdir()
        direct = subprocess.run([python, *command], capture_output=True, text=True, cwd=folder,
                                env={**base, "SDL_VIDEODRIVER": "dummy", "PYTHONHASHSEED": str(seed), **threads})
        if direct.returncode != 0:
            raise SystemExit(direct.stderr[-3000:])
        direct_rates.append(last_sps(direct.stdout))
        print(f"pair {pair + 1}: direct {direct_rates[-1]} steps/s, mosaic {mosaic_rates[-1]} steps/s",
              flush=True)
    ratio = statistics.median(mosaic_rates) / statistics.median(direct_rates)
    low, high = ratio_interval(mosaic_rates, direct_rates)
    verdict = ("met" if low >= TARGET else "NOT met" if high < TARGET else
               "undecided: the interval straddles the target; run more pairs")
    print(f"{args.algorithm}, {args.timesteps} steps, seeds 1-{args.pairs}, last command: python {' '.join(command)}")
    print(f"per-pair ratios: {', '.join(f'{m / d:.2f}' for m, d in zip(mosaic_rates, direct_rates))}")
    print(f"direct median {statistics.median(direct_rates)} steps/s, mosaic median "
          f"{statistics.median(mosaic_rates)} steps/s, ratio {ratio:.3f}, 95% interval [{low:.3f}, {high:.3f}] "
          f"(target >= {TARGET}: {verdict})")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
