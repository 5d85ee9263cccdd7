"""Policy actor vs ``Algorithm.from_checkpoint``: load time and actions/s, one run.

Trains a tiny PPO run on MPE simple_spread to get a checkpoint, then measures
in this process:
  * load: ``create_ray_actor`` (module only, no Ray) vs ``Algorithm.from_checkpoint``
    (with a Ray session already up, so Ray's own start-up is not counted against it);
  * actions/s for single observations and batches of 64, actor vs the algorithm's module.

    python bench/policy_actor.py

Target: actor load >= 10x faster.
"""

from __future__ import annotations

import io
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

import numpy as np  # noqa: E402

from mosaic.workerkit.lifecycle import RunControl  # noqa: E402
from mosaic.runs import RunStore, new_run_id  # noqa: E402
from mosaic.workerkit.telemetry import TelemetryEmitter  # noqa: E402
from mosaic.workerkit.cli import WorkerContext  # noqa: E402


def make_checkpoint(home: Path) -> str:
    from ray_worker.config import RayWorkerConfig
    from ray_worker.runtime import RayWorkerRuntime

    run_id = new_run_id("bench-")
    config = RayWorkerConfig.from_dict({
        "run_id": run_id, "rllib": {"num_env_runners": 0},
        "environment": {"family": "mpe", "env_id": "simple_spread_v3", "env_kwargs": {"N": 3}},
        "total_timesteps": 400, "algo_params": {"train_batch_size_per_learner": 200,
                                                "minibatch_size": 100, "num_epochs": 1}})
    run = RunStore(home).create(run_id, config.to_dict(), {"worker": "ray"})
    emitter = TelemetryEmitter(run_id, stream=io.StringIO())
    summary = RayWorkerRuntime(config, WorkerContext(emitter, RunControl(emitter), run)).run()
    return summary["final_checkpoint"]


def rate(fn, seconds: float = 2.0) -> float:
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - start)


def main() -> None:
    import ray
    import torch
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.core.columns import Columns

    from ray_worker import RayPolicyConfig, create_ray_actor

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory() as home:
        ckpt = make_checkpoint(Path(home))
        create_ray_actor(RayPolicyConfig(ckpt))  # warm imports once for both sides
        t = time.perf_counter()
        actor = create_ray_actor(RayPolicyConfig(ckpt))
        actor_load = time.perf_counter() - t
        t = time.perf_counter()
        algo = Algorithm.from_checkpoint(ckpt)
        algo_load = time.perf_counter() - t
        module = algo.get_module("shared")
        obs = np.random.default_rng(0).normal(size=(64, 18)).astype(np.float32)

        def algo_actions(batch: np.ndarray) -> None:
            with torch.no_grad():
                logits = module.forward_inference({Columns.OBS: torch.from_numpy(batch)})[Columns.ACTION_DIST_INPUTS]
            logits.argmax(-1).numpy()

        single_actor = rate(lambda: actor.compute_action(obs[0]))
        single_algo = rate(lambda: algo_actions(obs[:1]))
        batch_actor = 64 * rate(lambda: actor.compute_actions(list(obs)))
        batch_algo = 64 * rate(lambda: algo_actions(obs))
        algo.stop()
    ray.shutdown()
    print(f"load: actor {actor_load * 1000:.1f} ms, Algorithm.from_checkpoint {algo_load * 1000:.1f} ms, "
          f"ratio {algo_load / actor_load:.1f}x (target >= 10x)")
    print(f"actions/s single : actor {single_actor:,.0f}, algorithm module {single_algo:,.0f}")
    print(f"actions/s batch64: actor {batch_actor:,.0f}, algorithm module {batch_algo:,.0f}")


if __name__ == "__main__":
    main()
