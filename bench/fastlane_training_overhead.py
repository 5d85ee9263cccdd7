"""Training cost of FastLane: Ray worker env steps/s with FastLane on (30 fps) versus off.

Same settings as ``bench/ray_throughput.py`` (PPO, parameter sharing, MPE
simple_spread with 3 agents, env runner in the driver), one Ray session, runs
alternating off/on so drift hits both alike; env steps/s is taken between the
first and last ``metrics`` events. With FastLane on, the env runner renders
``rgb_array`` frames (MPE: ~20 ms per 700x700 frame here) and publishes them;
the throttle's fps cap (30) and overhead budget (``max_overhead``, default
3 %) decide how many. The frames actually published are reported too, and
the time FastLane itself measured spending (render + publish), which is the
overhead without the run-to-run noise of a shared machine.

    python bench/fastlane_training_overhead.py [--iterations 6] [--rounds 2]

Target: on / off >= 0.95.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a private local cluster
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from mosaic.fastlane.registry import read_registry  # noqa: E402
from mosaic.workerkit.lifecycle import RunControl  # noqa: E402
from mosaic.runs import RunStore, new_run_id  # noqa: E402
from mosaic.workerkit.telemetry import TelemetryEmitter  # noqa: E402
from mosaic.workerkit.cli import WorkerContext  # noqa: E402

BATCH = 1000
ENV_KWARGS = {"N": 3, "max_cycles": 25, "continuous_actions": False}
PARAMS = {"train_batch_size_per_learner": BATCH, "minibatch_size": 250, "num_epochs": 2,
          "fcnet_hiddens": [64, 64], "lr": 3e-4}


def train(iterations: int, home: Path, fastlane: dict) -> tuple[float, float, int, float]:
    """(env steps/s, seconds trained, frames published, share of the run spent in FastLane) of one run."""
    from ray_worker.config import RayWorkerConfig
    from ray_worker.runtime import RayWorkerRuntime

    run_id = new_run_id("bench-")
    config = RayWorkerConfig.from_dict({
        "run_id": run_id, "seed": 0, "rllib": {"num_env_runners": 0},
        "environment": {"family": "mpe", "env_id": "simple_spread_v3", "env_kwargs": ENV_KWARGS},
        "algorithm": "ppo", "total_timesteps": BATCH * iterations, "algo_params": PARAMS,
        "checkpoint": {"at_end": False}, "reporting": {"heartbeat_interval_s": 0}, "tensorboard": False,
        "fastlane": fastlane,
    })
    run = RunStore(home).create(run_id, config.to_dict(), {"worker": "ray"})
    out = io.StringIO()
    emitter = TelemetryEmitter(run_id, stream=out)
    RayWorkerRuntime(config, WorkerContext(emitter, RunControl(emitter), run)).run()
    events = [json.loads(line) for line in out.getvalue().splitlines()]
    metrics = [e for e in events if e["type"] == "metrics"]
    first, last = metrics[0], metrics[-1]
    seconds = last["ts"] - first["ts"]
    streams = read_registry(run.root)["streams"].values()
    frames = sum(s.get("frames", 0) for s in streams)
    busy = sum(s.get("busy_s", 0.0) for s in streams)
    run_seconds = last["ts"] - next(e["ts"] for e in events if e["type"] == "run_started")
    return (last["timesteps_total"] - first["timesteps_total"]) / seconds, seconds, frames, busy / run_seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=6)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--fps", type=float, default=30.0)
    parser.add_argument("--max-overhead", type=float, default=0.03)
    args = parser.parse_args()

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    off, on, frames, seconds, shares = [], [], [], [], []
    lane = {"enabled": True, "fps": args.fps, "max_overhead": args.max_overhead}
    with tempfile.TemporaryDirectory() as home:
        for _ in range(args.rounds):
            off.append(train(args.iterations, Path(home), {"enabled": False})[0])
            rate, secs, n, share = train(args.iterations, Path(home), lane)
            on.append(rate)
            shares.append(share)
            frames.append(n)
            seconds.append(secs)
    ray.shutdown()
    a, b = statistics.median(off), statistics.median(on)
    print(f"FastLane off: {a:8.0f} env steps/s  (runs: {', '.join(f'{v:.0f}' for v in off)})")
    print(f"FastLane on : {b:8.0f} env steps/s  (runs: {', '.join(f'{v:.0f}' for v in on)}); "
          f"fps cap {args.fps:g}, max_overhead {args.max_overhead:g}; frames published per run: "
          f"{', '.join(map(str, frames))} (~{statistics.median(f / s for f, s in zip(frames, seconds)):.1f} fps "
          "over the timed iterations)")
    print(f"ratio on/off: {b / a:.3f}  (target >= 0.95)")
    print(f"time spent rendering + publishing, measured inside FastLane: "
          f"{', '.join(f'{100 * s:.1f}%' for s in shares)} of each run's wall time "
          f"(so on/off >= {1 - max(shares):.3f} without scheduling noise)")


if __name__ == "__main__":
    main()
