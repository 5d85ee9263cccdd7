"""Env steps per second of XuanCe's training loop through MOSAIC against XuanCe used directly.

Both sides run in the xuance worker's environment with the same algorithm, env,
seed and XuanCe options (its shipped yaml, the budget, in-process envs):

* direct: ``workers/xuance_worker/tests/xuance_direct.py``, XuanCe's own MPE class
  and ``agent.train``, as a XuanCe user writes it;
* mosaic: ``mosaic run CONFIG``, with MOSAIC's env adapter, callback, telemetry,
  safe point after every step and the final checkpoint.

The rate is env steps over the seconds ``agent.train`` took on each side (MOSAIC's
``run_completed`` reports ``train_seconds``; the direct script prints its own), so
process start-up, which differs in kind, is left out. Pairs alternate (mosaic,
direct, ...); the direct side starts as MOSAIC starts a worker, and ``bench/pairs.py``
turns the pairs into a verdict (the paired ratio decides).

    python bench/xuance_throughput.py [--algorithm mappo] [--timesteps 20000] [--pairs 3]

Target: mosaic / direct >= 0.97. Needs the worker's environment (`mosaic envs build xuance`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from pairs import NEW_SESSION, direct_env, verdict

REPO = Path(__file__).resolve().parents[1]
DIRECT = REPO / "workers" / "xuance_worker" / "tests" / "xuance_direct.py"
POLICY = {"mappo": "Categorical_MAAC_Policy", "ippo": "Categorical_MAAC_Policy", "qmix": "Mixing_Q_network",
          "vdn": "Mixing_Q_network", "iql": "Basic_Q_network_marl"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="mappo", choices=sorted(POLICY))
    parser.add_argument("--timesteps", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()

    from mosaic import worker_envs
    from mosaic.testing import WorkerHome

    # a fresh home whose envs/xuance is the checkout's environment (built first: a no-op when up to date)
    bench_home = WorkerHome.create(Path(tempfile.mkdtemp(prefix="mosaic-bench-xuance-")), "xuance",
                                   worker_envs.build("xuance").path)
    home, python = bench_home.root, bench_home.python
    config = home / "bench.json"
    config.write_text(json.dumps({"worker": "xuance", "algorithm": args.algorithm, "seed": 1,
                                  "total_timesteps": args.timesteps, "checkpoint_at_end": True}))
    options = {"seed": 1, "env_seed": 1, "running_steps": args.timesteps, "vectorize": "DummyVecMultiAgentEnv",
               "device": "cpu", "render": False, "continuous_action": False, "policy": POLICY[args.algorithm],
               "log_dir": str(home / "direct-logs"), "model_dir": str(home / "direct-models")}
    base = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    environ = {**base, "MOSAIC_HOME": str(home)}
    direct_rates, mosaic_rates = [], []
    for pair in range(args.pairs):
        proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(config)], capture_output=True,
                              text=True, env=environ)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        run = max((home / "trainer" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
        events = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
        summary = next(e for e in events if e["type"] == "run_completed")["summary"]
        mosaic_rates.append(summary["timesteps_total"] / summary["train_seconds"])
        direct = subprocess.run([python, str(DIRECT), args.algorithm, json.dumps(options), "--seed-action-spaces",
                                 "--timing"], capture_output=True, text=True, cwd=home, env=direct_env(base, 1),
                                **NEW_SESSION)
        if direct.returncode != 0:
            raise SystemExit(direct.stderr[-3000:])
        timing = json.loads(direct.stdout.strip().splitlines()[-2])
        direct_rates.append(timing["timesteps"] / timing["train_seconds"])
        print(f"pair {pair + 1}: direct {direct_rates[-1]:.0f} env steps/s, mosaic {mosaic_rates[-1]:.0f}",
              flush=True)
    result = verdict(mosaic_rates, direct_rates)
    print(f"{args.algorithm}, {args.timesteps} env steps, XuanCe's yaml settings, {args.pairs} pairs:")
    print("\n".join(result.lines(mosaic_rates, direct_rates)))
    return 0 if result.paired[0] >= result.target else 1


if __name__ == "__main__":
    sys.exit(main())
