"""Training throughput of the Ray worker against a plain RLlib script, same settings, one run.

Both train PPO with parameter sharing on MPE simple_spread (3 agents) in this
process, sharing one Ray session, with the same batch sizes and env runners.
The plain script is RLlib alone; the worker adds MOSAIC's callbacks, telemetry,
TensorBoard and checkpoint bookkeeping. Runs alternate (plain, worker, plain,
worker, ...) so drift hits both alike; env steps/s is measured over the
iterations after the first (warm-up) one.

    python bench/ray_throughput.py [--iterations 6] [--rounds 2]

Target: worker / plain >= 0.97.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local cluster

from mosaic.workerkit.lifecycle import RunControl  # noqa: E402
from mosaic.runs import RunStore, new_run_id  # noqa: E402
from mosaic.workerkit.telemetry import TelemetryEmitter  # noqa: E402
from mosaic.workerkit.cli import WorkerContext  # noqa: E402

BATCH = 1000
ENV_KWARGS = {"N": 3, "max_cycles": 25, "continuous_actions": False}
PARAMS = {"train_batch_size_per_learner": BATCH, "minibatch_size": 250, "num_epochs": 2,
          "fcnet_hiddens": [64, 64], "lr": 3e-4}


def plain_rllib(iterations: int) -> float:
    """RLlib by itself: env steps/s over iterations 2..N."""
    from mpe2 import simple_spread_v3
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    register_env("bench-spread", lambda _: ParallelPettingZooEnv(simple_spread_v3.parallel_env(**ENV_KWARGS)))
    config = (
        PPOConfig().environment("bench-spread")
        .env_runners(num_env_runners=0, num_envs_per_env_runner=1, episodes_to_numpy=False)  # the worker's setting
        .training(train_batch_size_per_learner=BATCH, minibatch_size=250, num_epochs=2, lr=3e-4)
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={
            "shared": RLModuleSpec(model_config=DefaultModelConfig(fcnet_hiddens=[64, 64]))}))
        .debugging(seed=0)
    )
    algo = config.build_algo()
    try:
        algo.train()  # warm-up
        start, steps = time.perf_counter(), 0
        for _ in range(iterations - 1):
            result = algo.train()
            steps += int(float(result["env_runners"]["num_env_steps_sampled"]))
        return steps / (time.perf_counter() - start)
    finally:
        algo.stop()


def mosaic_worker(iterations: int, home: Path) -> float:
    """The Ray worker's runtime: env steps/s between the first and last metrics events."""
    from ray_worker.config import RayWorkerConfig
    from ray_worker.runtime import RayWorkerRuntime

    run_id = new_run_id("bench-")
    config = RayWorkerConfig.from_dict({
        "run_id": run_id, "seed": 0, "rllib": {"num_env_runners": 0},
        "environment": {"family": "mpe", "env_id": "simple_spread_v3", "env_kwargs": ENV_KWARGS},
        "algorithm": "ppo", "total_timesteps": BATCH * iterations, "algo_params": PARAMS,
        "checkpoint": {"at_end": False}, "reporting": {"heartbeat_interval_s": 0},
    })
    run = RunStore(home).create(run_id, config.to_dict(), {"worker": "ray"})
    out = io.StringIO()
    emitter = TelemetryEmitter(run_id, stream=out)
    RayWorkerRuntime(config, WorkerContext(emitter, RunControl(emitter), run)).run()
    metrics = [e for e in map(json.loads, out.getvalue().splitlines()) if e["type"] == "metrics"]
    first, last = metrics[0], metrics[-1]
    return (last["timesteps_total"] - first["timesteps_total"]) / (last["ts"] - first["ts"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import ray
    import torch

    torch.set_num_threads(1)  # two cores: intra-op threads fighting the sampler only add noise
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    plain, worker = [], []
    with tempfile.TemporaryDirectory() as home:
        for _ in range(args.rounds):
            plain.append(plain_rllib(args.iterations))
            worker.append(mosaic_worker(args.iterations, Path(home)))
    ray.shutdown()
    p, w = statistics.median(plain), statistics.median(worker)
    print(f"plain RLlib : {p:8.0f} env steps/s  (runs: {', '.join(f'{v:.0f}' for v in plain)})")
    print(f"ray_worker  : {w:8.0f} env steps/s  (runs: {', '.join(f'{v:.0f}' for v in worker)})")
    print(f"ratio worker/plain: {w / p:.3f}  (target >= 0.97)")


if __name__ == "__main__":
    main()
