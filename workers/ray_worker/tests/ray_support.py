"""Helpers of the Ray worker's tests: tiny configs and in-process training.

In-process training joins the test module's Ray session (the ``ray_session``
fixture in conftest.py).
"""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

from mosaic.workerkit.lifecycle import RunControl
from mosaic.runs import RunStore, new_run_id
from mosaic.workerkit.telemetry import TelemetryEmitter
from mosaic.workerkit.cli import WorkerContext

#: Tiny but real settings: two short iterations per algorithm on 2 CPUs.
TINY: dict[str, Any] = {
    "rllib": {"num_env_runners": 0},
    "algorithm": "ppo", "total_timesteps": 400,
    "algo_params": {"train_batch_size_per_learner": 200, "minibatch_size": 100,
                    "num_epochs": 1, "fcnet_hiddens": [32, 32]},
    "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
                    "env_kwargs": {"N": 2, "max_cycles": 25}},
    "tensorboard": True,
}

#: Off-policy (DQN, SAC) algo_params for a few short iterations: 25 steps each, learning from the third.
OFF_POLICY: dict[str, Any] = {"train_batch_size_per_learner": 32, "num_steps_sampled_before_learning_starts": 50,
                              "rollout_fragment_length": 25, "fcnet_hiddens": [32]}


def merge(base: dict, override: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key not in ("algo_params", "environment"):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


class TrainedRun:
    def __init__(self, config, run, events, summary):
        self.config, self.run, self.events, self.summary = config, run, events, summary

    def of_type(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]


def train(tmp_path: Path, override: dict, *, tiny: bool = True) -> TrainedRun:
    """Train in this process (joining the module's Ray session) and collect telemetry."""
    from ray_worker.cli import deep_validate
    from ray_worker.config import RayWorkerConfig
    from ray_worker.runtime import RayWorkerRuntime

    run_id = new_run_id("t-")
    data = merge(TINY, override) if tiny else override
    config = RayWorkerConfig.from_dict({**data, "run_id": run_id})
    deep_validate(config)
    run = RunStore(tmp_path).create(run_id, config.to_dict(), {"worker": "ray"})
    buf = io.StringIO()
    emitter = TelemetryEmitter(run_id, stream=buf)
    summary = RayWorkerRuntime(config, WorkerContext(emitter, RunControl(emitter), run)).run()
    events = [json.loads(line) for line in buf.getvalue().splitlines()]
    return TrainedRun(config, run, events, summary)
