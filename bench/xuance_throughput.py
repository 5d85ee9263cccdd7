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
from pathlib import Path

from pairs import (MODES, Side, bench_home, check_mode, conclude, direct_env, direct_train_rate, measure,
                   mosaic_train_rate)

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

    worker_home = bench_home("xuance")
    home, python = worker_home.root, worker_home.python
    base = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}

    def sides(pair: int, folder: Path) -> tuple[Side, Side]:
        seed = pair + 1
        config = folder / "bench.json"
        config.write_text(json.dumps({"worker": "xuance", "algorithm": args.algorithm, "seed": seed,
                                      "total_timesteps": args.timesteps, "checkpoint": {"at_end": True}}))
        options = {"seed": seed, "env_seed": seed, "running_steps": args.timesteps,
                   "vectorize": "DummyVecMultiAgentEnv", "device": "cpu", "render": False,
                   "continuous_action": False, "policy": POLICY[args.algorithm],
                   "log_dir": str(folder / "direct-logs"), "model_dir": str(folder / "direct-models")}
        return (Side("mosaic", [sys.executable, "-m", "mosaic", "run", str(config)],
                     {**base, "MOSAIC_HOME": str(home)}, folder),
                Side("direct", [python, str(DIRECT), args.algorithm, json.dumps(options), "--seed-action-spaces",
                                "--timing"], direct_env(base, seed), folder, new_session=True))

    mosaic_rates, direct_rates = measure(args.pairs, args.mode, home, sides, lambda _: mosaic_train_rate(home),
                                         lambda direct: direct_train_rate(direct.out))
    return conclude(f"{args.algorithm}, {args.timesteps} env steps, XuanCe's yaml settings, {args.mode}, "
                    f"seeds 1-{args.pairs}:",
                    {"worker": "xuance", "algorithm": args.algorithm, "timesteps": args.timesteps, "mode": args.mode},
                    list(range(1, args.pairs + 1)), mosaic_rates, direct_rates, args.json)

if __name__ == "__main__":
    sys.exit(main())
