"""Reproduce the Tianshou DQN learning result on CartPole-v1 (docs/tianshou-worker.md, "Results").

Runs ``examples/tianshou_dqn_cartpole.json`` through ``mosaic run`` (seed and budget
as in the file, or ``--seed``), prints the training curve (mean training-episode
return per iteration, exploration on), then plays every checkpoint greedily with
``mosaic eval`` (20 episodes, seeds 100-119) and prints the mean return of each.

    .venv/bin/python scripts/tianshou_dqn_cartpole.py [--seed 0] [--episodes 20]
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
    parser.add_argument("--episodes", type=int, default=20)
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
    print("env steps  training return (mean, exploring)")
    for e in events:
        if e["type"] == "metrics":
            print(f"{e['timesteps_total']:9d}  {e.get('episode_return_mean') or 0:.1f}")
    print("checkpoint (env steps)  greedy return over", args.episodes, "episodes: mean (min-max)")
    for e in events:
        if e["type"] != "checkpoint_saved":
            continue
        out = subprocess.run([sys.executable, "-m", "mosaic", "eval", e["path"], "--episodes", str(args.episodes),
                              "--seed", "100", "--json"], capture_output=True, text=True)
        stats = json.loads(out.stdout)["per_agent_return"]["agent_0"]
        print(f"{e['timesteps_total']:9d}  {stats['mean']:.1f} ({stats['min']:.0f}-{stats['max']:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
