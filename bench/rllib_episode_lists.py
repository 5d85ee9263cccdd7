"""RLlib's training iterations with sampled episodes kept as lists (MOSAIC's setting) and numpy'd (RLlib's default).

RLlib 2.60's multi-agent env runner calls ``to_numpy()`` on every episode finished so far in a ``sample()``
at every env step (the loop over them sits inside the step loop), so the cost grows with the square of
the episodes a sample holds. The Ray worker sets ``episodes_to_numpy=False``; the numbers stay RLlib's own
(workers/ray_worker/tests/test_episode_lists.py). This bench measures what the setting saves, with RLlib
alone (no MOSAIC code runs): MOSAIC's main job (PPO, one module shared by the two agents of MPE
simple_spread, 25-step episodes, sampling in the driver, 10 epochs of 500-step minibatches) at each
batch size, as a fresh process per side. Pairs alternate which side goes first, both with the same
``PYTHONHASHSEED`` and seed; each side reports the seconds its ``train()`` calls took and the returns
it saw (equal on both sides, or the bench stops). The verdict is the paired ratio lists / numpy of
those seconds with its 95% interval (``bench/pairs.py``).

    python bench/rllib_episode_lists.py [--pairs 4] [--batches 2000 4000] [--iterations 2] [--out FILE.json]

Target: lists / numpy <= 0.90 at the main job's batch (2000 env steps: 80 episodes a sample).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pairs import direct_env, paired_ratio  # noqa: E402

TARGET = 0.90
MAIN_JOB_BATCH = 2000
SEED = 0


def side(to_numpy: bool, batch: int, iterations: int) -> None:
    """One side, in this process: print {"train_seconds", "returns"} as JSON."""
    import ray
    from mpe2 import simple_spread_v3
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    import torch

    torch.set_num_threads(1)
    register_env("spread", lambda _: ParallelPettingZooEnv(
        simple_spread_v3.parallel_env(N=2, max_cycles=25, continuous_actions=False)))
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    config = (
        PPOConfig().environment("spread")
        .env_runners(num_env_runners=0, episodes_to_numpy=to_numpy)
        .training(train_batch_size_per_learner=batch, minibatch_size=500, num_epochs=10, lr=5e-4,
                  lambda_=0.95, vf_clip_param=1000.0, entropy_coeff=0.01)
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
        .debugging(seed=SEED)
    )
    algo = config.build_algo()
    seconds, returns = 0.0, []
    for _ in range(iterations):
        start = time.perf_counter()
        result = algo.train()
        seconds += time.perf_counter() - start
        returns.append(float(result["env_runners"]["episode_return_mean"]))
    algo.stop()
    ray.shutdown()
    print(json.dumps({"train_seconds": seconds, "returns": returns}))


def run_side(to_numpy: bool, batch: int, iterations: int) -> dict:
    env = {**direct_env(dict(os.environ), SEED), "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([sys.executable, __file__, "--side", "numpy" if to_numpy else "lists",
                           "--batches", str(batch), "--iterations", str(iterations)],
                          capture_output=True, text=True, env=env, start_new_session=True)
    if proc.returncode != 0:
        raise SystemExit(f"the {'numpy' if to_numpy else 'lists'} side failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--batches", type=int, nargs="+", default=[MAIN_JOB_BATCH, 2 * MAIN_JOB_BATCH])
    parser.add_argument("--iterations", type=int, default=2)
    parser.add_argument("--side", choices=("numpy", "lists"), help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.side:
        return side(args.side == "numpy", args.batches[0], args.iterations)
    report = {"iterations": args.iterations, "seed": SEED, "target": TARGET, "batches": {}}
    for batch in args.batches:
        lists: list[float] = []
        numpy: list[float] = []
        for pair in range(args.pairs):
            order = (False, True) if pair % 2 == 0 else (True, False)
            seen = {flag: run_side(flag, batch, args.iterations) for flag in order}
            if seen[False]["returns"] != seen[True]["returns"]:
                raise SystemExit(f"batch {batch}: the two sides saw different returns: {seen}")
            lists.append(seen[False]["train_seconds"])
            numpy.append(seen[True]["train_seconds"])
            print(f"batch {batch}, pair {pair + 1}: numpy {numpy[-1]:.1f} s, lists {lists[-1]:.1f} s "
                  f"({args.iterations} iterations)", flush=True)
        ratio, low, high = paired_ratio(lists, numpy)
        print(f"batch {batch} ({batch // 25} episodes a sample): lists / numpy train seconds {ratio:.3f}, "
              f"95% interval [{low:.3f}, {high:.3f}]", flush=True)
        report["batches"][str(batch)] = {"numpy": numpy, "lists": lists, "paired_ratio": [ratio, low, high]}
    if str(MAIN_JOB_BATCH) in report["batches"]:
        _, low, high = report["batches"][str(MAIN_JOB_BATCH)]["paired_ratio"]
        report["verdict"] = "met" if high <= TARGET else "NOT met" if low > TARGET else "undecided: run more pairs"
        print(f"main job's batch ({MAIN_JOB_BATCH}): target lists / numpy <= {TARGET}: {report['verdict']}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
