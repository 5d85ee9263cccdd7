"""Env steps per second of a CleanRL script through MOSAIC against the same script run directly.

Both sides run the unmodified script in the cleanrl worker's environment with
the same command line (the one MOSAIC builds from the config: ``run_started``
shows it):

* direct: ``python -m cleanrl.<script> ARGS`` in a fresh folder, as a CleanRL
  user runs it;
* mosaic: ``mosaic run CONFIG`` (its defaults otherwise: the observers in the
  script, telemetry, checkpoint at the end, manifest).

The direct side is started as MOSAIC starts a worker (``PYTHONHASHSEED`` from the seed, a
session of its own: ``bench/pairs.py`` says why); pair i uses seed i + 1 on both sides, so
no single memory layout decides the result.

Throughput is the script's own measure, ``global_step / elapsed`` as its last
``SPS:`` line prints it (both sides print it; MOSAIC keeps the script's stdout in
``logs/script.stdout``).

This machine's rate for the same deterministic run varies by 10-20% from one
process to the next, on either side, and drifts over time, so one pair decides
nothing. Two remedies:

* ``--mode concurrent`` (the default, needs 2 CPUs): the two sides of a pair run at
  the same time, each pinned to its own CPU (MOSAIC's whole process tree, its worker
  and ``mosaic run`` included, on one; the direct script on the other; swapped every
  pair), the direct script started when MOSAIC's script starts. Drift over time
  hits both alike, and MOSAIC's own processes compete with its script for one CPU,
  which can only make MOSAIC look slower;
* ``--mode alternate``: one after the other (mosaic, direct, mosaic, ...).

Either way the bench runs many pairs, and ``bench/pairs.py`` turns them into a verdict
(the paired ratio decides; the ratio of medians is printed beside it). ``--json FILE``
keeps every pair's rates.

    python bench/cleanrl_throughput.py [--algorithm ppo] [--timesteps 20000] [--pairs 10] [--threads 1]
                                       [--mode concurrent|alternate]

Target: mosaic / direct >= 0.97. Needs the worker's environment (`mosaic envs build cleanrl`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from pairs import NEW_SESSION, bench_home, check_mode, conclude, direct_env, pinned, wait_for_child, where

SPS = re.compile(r"^SPS: (\d+)", re.MULTILINE)


def last_sps(text: str) -> int:
    found = SPS.findall(text)
    if not found:
        raise SystemExit(f"no SPS line in:\n{text[-2000:]}")
    return int(found[-1])


def wait_for_script(root_pid: int) -> list[str]:
    """The command line of the CleanRL script MOSAIC starts under ``root_pid``, once it runs (``-m cleanrl.x ...``)."""
    return wait_for_child(root_pid, lambda line: len(line) > 2 and line[1] == "-m"
                          and line[2].startswith("cleanrl."))[1:]


def start_direct(python: str, command: list[str], folder: Path, base: dict, seed: int, threads: dict,
                 cpu: int | None) -> subprocess.Popen:
    """The script run directly in ``folder``; its output goes to files there (a pipe nobody reads yet could
    fill and stall it)."""
    folder.mkdir()
    with (folder / "stdout.txt").open("w") as out, (folder / "stderr.txt").open("w") as err:
        return subprocess.Popen([python, *command], stdout=out, stderr=err, cwd=folder,
                                env=direct_env({**base, "SDL_VIDEODRIVER": "dummy", **threads}, seed),
                                preexec_fn=pinned(cpu), **NEW_SESSION)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="ppo")
    parser.add_argument("--timesteps", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads on both sides (resources.threads / OMP_NUM_THREADS); 0 = torch's default")
    parser.add_argument("--mode", choices=("concurrent", "alternate"), default="concurrent",
                        help="the two sides of a pair at once, each on its own CPU, or one after the other")
    parser.add_argument("--json", type=Path, help="write every pair's rates and the estimates to this file")
    args = parser.parse_args()
    check_mode(args.mode)

    worker_home = bench_home("cleanrl")
    home, python = worker_home.root, worker_home.python
    config = home / "bench.json"
    threads = {"OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)} if args.threads else {}
    base = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    environ = {**base, "MOSAIC_HOME": str(home)}
    direct_rates, mosaic_rates, command = [], [], None
    for pair in range(args.pairs):
        seed = pair + 1
        config.write_text(json.dumps({"worker": "cleanrl", "algorithm": args.algorithm, "seed": seed,
                                      "total_timesteps": args.timesteps,
                                      **({"resources": {"threads": args.threads}} if args.threads else {})}))
        cores = (pair % 2, 1 - pair % 2) if args.mode == "concurrent" else (None, None)
        proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=environ, preexec_fn=pinned(cores[0]))
        if args.mode == "concurrent":
            command = wait_for_script(proc.pid)
            direct = start_direct(python, command, home / f"direct-{pair}", base, seed, threads, cores[1])
        _out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit(err[-3000:])
        run = max((home / "trainer" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
        command = json.loads((run / "telemetry.jsonl").read_text().splitlines()[0])["command"]
        mosaic_rates.append(last_sps((run / "logs" / "script.stdout").read_text()))
        if args.mode != "concurrent":
            direct = start_direct(python, command, home / f"direct-{pair}", base, seed, threads, None)
        folder = home / f"direct-{pair}"
        if direct.wait() != 0:
            raise SystemExit((folder / "stderr.txt").read_text()[-3000:])
        direct_rates.append(last_sps((folder / "stdout.txt").read_text()))
        print(f"pair {pair + 1}: direct {direct_rates[-1]} steps/s, mosaic {mosaic_rates[-1]} steps/s{where(cores)}",
              flush=True)
    return conclude(f"{args.algorithm}, {args.timesteps} steps, {args.mode}, seeds 1-{args.pairs}, "
                    f"last command: python {' '.join(command)}",
                    {"algorithm": args.algorithm, "timesteps": args.timesteps, "mode": args.mode,
                     "threads": args.threads}, list(range(1, args.pairs + 1)), mosaic_rates, direct_rates, args.json)


if __name__ == "__main__":
    sys.exit(main())
