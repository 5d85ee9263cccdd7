"""Env steps per second of Tianshou's DQN training through MOSAIC against Tianshou used directly.

Both sides run in the tianshou worker's environment with the same env, seed and
settings (CartPole-v1, one env, a random warm-up, then Tianshou's off-policy
trainer with 10 env steps per collection and 0.1 gradient steps per env step):

* direct: ``workers/tianshou_worker/tests/tianshou_direct.py``, Tianshou's
  algorithm API as its users write it (no logger, nothing observing);
* mosaic: ``mosaic run CONFIG``, with the wrapped collector, the logger, the
  safe point before every training step, telemetry and the final checkpoint.

The rate is env steps over the seconds the warm-up and ``run_training`` took on
each side (MOSAIC's ``run_completed`` reports ``train_seconds``; the direct script
prints its own), so process start-up is left out. Pair i uses seed i + 1 on both
sides; the direct side starts as MOSAIC starts a worker. ``bench/pairs.py`` runs each
pair (``--mode concurrent``, the default: both at once, each on its own CPU; or
``alternate``) and turns the pairs into a verdict (the paired ratio decides).

    python bench/tianshou_throughput.py [--timesteps 20000] [--pairs 10] [--mode concurrent|alternate]
                                        [--json FILE]

Target: mosaic / direct >= 0.97. Needs the worker's environment (`mosaic envs build tianshou`).
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
DIRECT = REPO / "workers" / "tianshou_worker" / "tests" / "tianshou_direct.py"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timesteps", type=int, default=20_000)
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--mode", choices=MODES, default="concurrent")
    parser.add_argument("--json", type=Path, help="write every pair's rates and the estimates to this file")
    args = parser.parse_args()
    check_mode(args.mode)

    worker_home = bench_home("tianshou")
    home, python = worker_home.root, worker_home.python
    base = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}

    def sides(pair: int, folder: Path) -> tuple[Side, Side]:
        seed = pair + 1
        settings = {"env_id": "CartPole-v1", "seed": seed, "num_envs": 1, "hidden_sizes": [64, 64],
                    "learning_rate": 0.001, "buffer_size": args.timesteps, "batch_size": 64, "learning_starts": 100,
                    "collect_steps": 10, "update_per_step": 0.1, "total_timesteps": args.timesteps}
        config = folder / "bench.json"
        shared = {k: v for k, v in settings.items() if k != "env_id"}
        config.write_text(json.dumps({"worker": "tianshou", "algorithm": "dqn",
                                      "environment": {"family": "gymnasium", "env_id": settings["env_id"]},
                                      "checkpoint": {"at_end": True}, "reporting": {"every_timesteps": 1000},
                                      "algo_params": {"eps_training": 0.1}, **shared}))
        return (Side("mosaic", [sys.executable, "-m", "mosaic", "run", str(config)],
                     {**base, "MOSAIC_HOME": str(home)}, folder),
                Side("direct", [python, str(DIRECT), json.dumps({**settings, "eps_training": 0.1}), "--timing"],
                     direct_env(base, seed), folder, new_session=True))

    mosaic_rates, direct_rates = measure(args.pairs, args.mode, home, sides, lambda _: mosaic_train_rate(home),
                                         lambda direct: direct_train_rate(direct.out))
    return conclude(f"dqn, CartPole-v1, {args.timesteps} env steps, {args.mode}, seeds 1-{args.pairs}:",
                    {"worker": "tianshou", "algorithm": "dqn", "env_id": "CartPole-v1", "timesteps": args.timesteps,
                     "mode": args.mode}, list(range(1, args.pairs + 1)), mosaic_rates, direct_rates, args.json)

if __name__ == "__main__":
    sys.exit(main())
