"""A worker process's start with and without the cyclic garbage collector paused.

Every run, evaluation and player is a fresh process that imports torch and a library before it does
anything else (``mosaic.workerkit.startup``). This bench times what that costs: the CPU (user + system)
of a process that imports what a run of the worker imports, in the worker's own environment, with
the collector left on (Python's default, the library run directly) and paused first as MOSAIC's
worker processes do. Pairs alternate which side goes first; the verdict is the paired ratio
paused / plain of the CPU seconds with its 95% interval (``bench/pairs.py``).

    python bench/worker_start.py [--worker xuance] [--pairs 8] [--out FILE.json]

Target: paused / plain <= 0.95 (the pause must save at least 5% of the start's CPU).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pairs import bench_home, paired_ratio  # noqa: E402

TARGET = 0.95

#: What a run of each worker imports before its first step (torch's optimisers import torch._dynamo).
IMPORTS = {
    "xuance": "import torch, torch._dynamo, xuance.torch.agents",
    "tianshou": "import torch, torch._dynamo, tianshou",
    "cleanrl": "import torch, torch._dynamo, gymnasium, stable_baselines3, torch.utils.tensorboard",
}
PAUSE = "from mosaic.workerkit import startup; startup.pause(); "


def cpu_seconds(python: str, code: str) -> float:
    """User + system CPU seconds of one ``python -c code`` process."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([python, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{code!r} failed:\n{proc.stderr[-2000:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=sorted(IMPORTS), default="xuance")
    parser.add_argument("--pairs", type=int, default=8)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    python = bench_home(args.worker).python
    code = IMPORTS[args.worker]
    cpu_seconds(python, code)  # once, unmeasured: bytecode caches and the page cache are warm for both sides
    plain: list[float] = []
    paused: list[float] = []
    for pair in range(args.pairs):
        order = [("plain", code), ("paused", PAUSE + code)]
        for name, line in order if pair % 2 == 0 else order[::-1]:
            (plain if name == "plain" else paused).append(cpu_seconds(python, line))
        print(f"pair {pair + 1}: plain {plain[-1]:.2f} CPU-s, paused {paused[-1]:.2f} CPU-s", flush=True)
    ratio, low, high = paired_ratio(paused, plain)
    word = "met" if high <= TARGET else "NOT met" if low > TARGET else "undecided: run more pairs"
    print(f"{args.worker}: {code}")
    print(f"paused / plain CPU: {ratio:.3f}, 95% interval [{low:.3f}, {high:.3f}] (target <= {TARGET}: {word})")
    if args.out:
        args.out.write_text(json.dumps({"worker": args.worker, "imports": code, "plain": plain, "paused": paused,
                                        "paired_ratio": [ratio, low, high], "target": TARGET, "verdict": word},
                                       indent=1) + "\n")


if __name__ == "__main__":
    main()
