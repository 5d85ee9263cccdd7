"""The one end-to-end run with the real Ray RLlib worker under the daemon."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("ray_worker", reason="the Ray worker is not installed")

RAY_CONFIG = {
    "worker": "ray", "rllib": {"num_env_runners": 0},
    "algorithm": "ppo", "total_timesteps": 400,
    "algo_params": {"train_batch_size_per_learner": 200, "minibatch_size": 100,
                    "num_epochs": 1, "fcnet_hiddens": [32, 32]},
    "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
                    "env_kwargs": {"N": 2, "max_cycles": 25}},
}


@pytest.mark.slow
def test_ray_ppo_run_under_the_daemon(shared_daemon):
    d = shared_daemon
    run_id = d.submit(RAY_CONFIG)
    streamed = [json.loads(e.json) for e in d.client.telemetry(run_id, 0, follow=True)]
    info = d.wait_state(run_id, {"COMPLETED", "FAILED"}, timeout=10)
    assert info.state_reason == "completed", (info.failure_reason, d.log()[-2000:])
    assert info.exit_code == 0 and info.algorithm == "ppo" and info.env_id == "simple_spread_v3"
    assert streamed == d.events(run_id)
    types = [e["type"] for e in streamed]
    assert types[0] == "run_started" and types[-1] == "run_completed"
    metrics = [e for e in streamed if e["type"] == "metrics"]
    assert metrics and metrics[-1]["timesteps_total"] >= 400
    assert json.loads(info.last_metrics_json)["timesteps_total"] == metrics[-1]["timesteps_total"]
