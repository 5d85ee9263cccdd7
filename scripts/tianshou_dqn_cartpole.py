"""Reproduce the Tianshou DQN learning result on CartPole-v1 (docs/results.md, docs/tianshou-worker.md).

Runs ``examples/tianshou_dqn_cartpole.json`` through ``mosaic run`` (seed and budget as
in the file, or ``--seed``): an epsilon schedule, a greedy test of 100 episodes every
5,000 env steps, and a stop at the first test whose mean return reaches 475. Prints the
test curve and why training ended, then plays the final checkpoint greedily with
``mosaic eval`` (``--episodes``, seeds from 100) and prints its mean return with the 95%
confidence interval.

    .venv/bin/python scripts/tianshou_dqn_cartpole.py [--seed 0] [--episodes 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--episodes", type=int, default=100)
    args = parser.parse_args()
    config = json.loads((REPO / "examples" / "tianshou_dqn_cartpole.json").read_text())
    if args.seed is not None:
        config["seed"] = args.seed
    path = Path(tempfile.mkdtemp(prefix="tianshou-dqn-")) / "config.json"
    path.write_text(json.dumps(config))
    run_id = f"tianshou-dqn-cartpole-s{config['seed']}"
    proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(path), "--run-id", run_id],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    home = Path(os.environ.get("MOSAIC_HOME", REPO / "var"))
    run = home / "trainer" / "runs" / run_id
    events = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
    print("env steps  greedy test return (mean of", config["test_episodes"], "episodes)")
    for e in events:
        if e["type"] == "log" and "test" in e:
            print(f"{e['test']['timesteps_total']:9d}  {e['test']['return_mean']:.1f}")
    (done,) = [e for e in events if e["type"] == "run_completed"]
    print("training ended:", done["summary"]["stopped"])
    final = [e for e in events if e["type"] == "checkpoint_saved"][-1]
    out = subprocess.run([sys.executable, "-m", "mosaic", "eval", final["path"], "--episodes", str(args.episodes),
                          "--seed", "100", "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    stats = json.loads(out.stdout)["per_agent_return"]["agent_0"]
    print(f"final checkpoint ({final['timesteps_total']} env steps), greedy over {stats['n']} episodes: "
          f"mean {stats['mean']:.1f}, 95% CI [{stats['ci95_low']:.1f}, {stats['ci95_high']:.1f}], "
          f"min {stats['min']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
