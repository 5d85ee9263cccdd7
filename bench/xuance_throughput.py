"""Env steps per second of XuanCe's training loop through MOSAIC against XuanCe used directly.

Both sides run in the xuance worker's environment with the same algorithm, env,
seed and XuanCe options (its shipped yaml, the budget, in-process envs):

* direct: ``workers/xuance_worker/tests/xuance_direct.py``, XuanCe's own MPE class
  and ``agent.train``, as a XuanCe user writes it;
* mosaic: ``mosaic run CONFIG``, with MOSAIC's env adapter, callback, telemetry,
  safe point after every step and the final checkpoint.

The rate is env steps over the seconds ``agent.train`` took on each side (MOSAIC's
``run_completed`` reports ``train_seconds``; the direct script prints its own), so
process start-up, which differs in kind, is left out. Pair i uses seed i + 1 on both
sides; the direct side starts as MOSAIC starts a worker. ``bench/pairs.py`` runs each
pair (``--mode concurrent``, the default: both at once, each on its own CPU; or
``alternate``) and turns the pairs into a verdict (the paired ratio decides).

    python bench/xuance_throughput.py [--algorithm mappo] [--timesteps 20000] [--pairs 10]
                                      [--mode concurrent|alternate] [--json FILE]

Target: mosaic / direct >= 0.97. Needs the worker's environment (`mosaic envs build xuance`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from pairs import MODES, Side, check_mode, direct_env, run_pair, save, verdict, where

REPO = Path(__file__).resolve().parents[1]
DIRECT = REPO / "workers" / "xuance_worker" / "tests" / "xuance_direct.py"
POLICY = {"mappo": "Categorical_MAAC_Policy", "ippo": "Categorical_MAAC_Policy", "qmix": "Mixing_Q_network",
          "vdn": "Mixing_Q_network", "iql": "Basic_Q_network_marl"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algorithm", default="mappo", choices=sorted(POLICY))
    parser.add_argument("--timesteps", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--mode", choices=MODES, default="concurrent")
    parser.add_argument("--json", type=Path, help="write every pair's rates and the estimates to this file")
    args = parser.parse_args()
    check_mode(args.mode)

    from mosaic import worker_envs
    from mosaic.testing import WorkerHome

    # a fresh home whose envs/xuance is the checkout's environment (built first: a no-op when up to date)
    bench_home = WorkerHome.create(Path(tempfile.mkdtemp(prefix="mosaic-bench-xuance-")), "xuance",
                                   worker_envs.build("xuance").path)
    home, python = bench_home.root, bench_home.python
    base = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    direct_rates, mosaic_rates, seeds = [], [], []
    for pair in range(args.pairs):
        seed, folder = pair + 1, home / f"pair-{pair}"
        folder.mkdir()
        config = folder / "bench.json"
        config.write_text(json.dumps({"worker": "xuance", "algorithm": args.algorithm, "seed": seed,
                                      "total_timesteps": args.timesteps, "checkpoint_at_end": True}))
        options = {"seed": seed, "env_seed": seed, "running_steps": args.timesteps,
                   "vectorize": "DummyVecMultiAgentEnv", "device": "cpu", "render": False,
                   "continuous_action": False, "policy": POLICY[args.algorithm],
                   "log_dir": str(folder / "direct-logs"), "model_dir": str(folder / "direct-models")}
        mosaic = Side("mosaic", [sys.executable, "-m", "mosaic", "run", str(config)],
                      {**base, "MOSAIC_HOME": str(home)}, folder)
        direct = Side("direct", [python, str(DIRECT), args.algorithm, json.dumps(options), "--seed-action-spaces",
                                 "--timing"], direct_env(base, seed), folder, new_session=True)
        mosaic, direct, cores = run_pair(pair, args.mode, mosaic, direct, folder)
        run = max((home / "trainer" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
        events = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
        summary = next(e for e in events if e["type"] == "run_completed")["summary"]
        mosaic_rates.append(summary["timesteps_total"] / summary["train_seconds"])
        timing = json.loads(direct.out.strip().splitlines()[-2])
        direct_rates.append(timing["timesteps"] / timing["train_seconds"])
        seeds.append(seed)
        print(f"pair {pair + 1}: direct {direct_rates[-1]:.0f} env steps/s, mosaic {mosaic_rates[-1]:.0f}"
              f"{where(cores)}", flush=True)
    result = verdict(mosaic_rates, direct_rates)
    print(f"{args.algorithm}, {args.timesteps} env steps, XuanCe's yaml settings, {args.mode}, seeds 1-{args.pairs}:")
    print("\n".join(result.lines(mosaic_rates, direct_rates)))
    save(args.json, {"worker": "xuance", "algorithm": args.algorithm, "timesteps": args.timesteps,
                     "mode": args.mode}, seeds, mosaic_rates, direct_rates, result)
    return 0 if result.paired[0] >= result.target else 1


if __name__ == "__main__":
    sys.exit(main())
