"""Whole-process wall time: `mosaic run` against a plain RLlib script of the same job.

A user waits for the whole process, not for steady-state iterations: start-up,
validation, Ray, training, TensorBoard, the final checkpoint and shutdown. Both
sides run the same job as a fresh process: PPO, one module shared by the 3 agents
of MPE simple_spread, one env runner, 10k env steps, a checkpoint at the end.

* plain: a script that uses RLlib directly (written to a temporary folder, shown
  with ``--show-script``): ``ray.init``, ``PPOConfig``, ``train()`` until 10k steps,
  ``save_to_path``, ``ray.shutdown``;
* mosaic: ``mosaic run CONFIG`` with the same settings (its defaults otherwise:
  telemetry, TensorBoard, manifest, progress line).

Pairs alternate (plain, mosaic, plain, mosaic, ...) so drift hits both alike; the
ratio is the median mosaic time over the median plain time.

    python bench/run_wall_time.py [--pairs 3] [--timesteps 10000]

Target: mosaic / plain <= 1.03.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

BATCH = 1000
THREADS = 1  # torch threads of the driver process, on both sides
ENV_KWARGS = {"N": 3, "max_cycles": 25, "continuous_actions": False}
PARAMS = {"train_batch_size_per_learner": BATCH, "minibatch_size": 250, "num_epochs": 4,
          "fcnet_hiddens": [64, 64], "lr": 3e-4}

PLAIN = textwrap.dedent('''\
    """The same job as the MOSAIC config, written against RLlib directly."""
    import math, os, sys
    import ray
    import torch
    from mpe2 import simple_spread_v3
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    TOTAL, OUT = int(sys.argv[1]), sys.argv[2]
    torch.set_num_threads({threads})  # the driver's learner: as MOSAIC's resources.threads
    ray.init(address="local", num_cpus=max(os.cpu_count() or 1, 2), include_dashboard=False, log_to_driver=True)
    register_env("spread", lambda _: ParallelPettingZooEnv(simple_spread_v3.parallel_env(**{env_kwargs!r})))
    algo = (
        PPOConfig().environment("spread")
        .env_runners(num_env_runners=1, num_envs_per_env_runner=1, num_cpus_per_env_runner=1)
        .training(train_batch_size_per_learner={batch}, minibatch_size=250, num_epochs=4, lr=3e-4)
        .multi_agent(policies={{"shared"}}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={{
            "shared": RLModuleSpec(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64]))}}))
        .debugging(seed=0)
    ).build_algo()
    steps = 0
    while steps < TOTAL:
        result = algo.train()
        steps += int(float(result["env_runners"]["num_env_steps_sampled"]))
        print(f"{{steps}} env steps, return {{result['env_runners'].get('episode_return_mean')}}", flush=True)
    algo.save_to_path(OUT)
    algo.stop()
    ray.shutdown()
    ''').format(env_kwargs=ENV_KWARGS, batch=BATCH, threads=THREADS)


def mosaic_config(timesteps: int) -> dict:
    return {"worker": "ray", "seed": 0, "policy_configuration": "PARAMETER_SHARING",
            "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
                            "env_kwargs": ENV_KWARGS},
            "algorithm": "ppo", "total_timesteps": timesteps, "algo_params": PARAMS,
            "rllib": {"num_env_runners": 1}, "num_envs": 1, "resources": {"threads": THREADS},
            "checkpoint": {"at_end": True}}


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--timesteps", type=int, default=10_000)
    parser.add_argument("--show-script", action="store_true", help="print the plain RLlib script and exit")
    args = parser.parse_args()
    if args.show_script:
        print(PLAIN)
        return
    python = sys.executable
    mosaic = str(Path(python).with_name("mosaic"))
    plain_times, mosaic_times = [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        script = tmp_path / "plain_rllib.py"
        script.write_text(PLAIN)
        config = tmp_path / "job.json"
        config.write_text(json.dumps(mosaic_config(args.timesteps)))
        env = {**os.environ, "RAY_AUTH_MODE": "disabled", "MOSAIC_HOME": str(tmp_path / "home")}
        for i in range(args.pairs):
            plain_times.append(timed([python, str(script), str(args.timesteps), str(tmp_path / f"ckpt{i}")], env))
            mosaic_times.append(timed([mosaic, "run", str(config)], env))
            print(f"pair {i + 1}: plain {plain_times[-1]:6.1f} s   mosaic run {mosaic_times[-1]:6.1f} s", flush=True)
    p, m = statistics.median(plain_times), statistics.median(mosaic_times)
    print(f"plain RLlib script : median {p:6.1f} s  (runs: {', '.join(f'{v:.1f}' for v in plain_times)})")
    print(f"mosaic run         : median {m:6.1f} s  (runs: {', '.join(f'{v:.1f}' for v in mosaic_times)})")
    print(f"ratio mosaic/plain: {m / p:.3f}  (target <= 1.03)")


if __name__ == "__main__":
    main()
