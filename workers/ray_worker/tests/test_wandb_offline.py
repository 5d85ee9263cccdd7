"""The Ray worker's W&B path, offline: one tiny RLlib run with ``wandb: true`` leaves a W&B run in its folder.

``analytics.MetricsSinks`` starts the W&B run in the worker's process (here: the test's,
as ray_support.train runs it) under ``<run>/logs/wandb/``. Offline is the field's default:
the config leaves ``wandb_mode`` out. Every address W&B could reach (its API URL, the
HTTP(S) proxies) points at a local listener that records connections, and there is no
API key, so a run that tried the network fails the test instead of leaving the machine.
"""

from __future__ import annotations

import json

import pytest

from mosaic.workerkit.wandb_offline import NetworkTrap, offline_runs, read_offline_run, trapped_environment
from ray_support import train


@pytest.fixture(scope="module")
def tracked(ray_session, tmp_path_factory):
    listener = NetworkTrap()
    env = {**trapped_environment(listener, tmp_path_factory.mktemp("wandb-settings")),
           "WANDB_SILENT": "true", "WANDB_ERROR_REPORTING": "false"}
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("WANDB_MODE", raising=False)
        for name, value in env.items():
            patch.setenv(name, value)
        trained = train(tmp_path_factory.mktemp("home"), {"wandb": True, "wandb_project": "ray-test"})
    yield trained, listener
    listener.close()


def test_a_tiny_rllib_run_leaves_an_offline_wandb_run_in_its_folder(tracked):
    trained, listener = tracked
    assert trained.config.wandb_mode == "offline"
    assert trained.summary["timesteps_total"] >= 400  # the run trained to its end
    metrics = trained.of_type("metrics")
    assert metrics

    found = offline_runs(trained.run.root / "logs")
    assert len(found) == 1, found
    wb = read_offline_run(found[0])
    assert wb.project == "ray-test" and wb.run_id == trained.config.run_id
    assert json.loads(wb.config["algorithm"]) == "ppo"  # the run's config, as MetricsSinks gives it
    assert json.loads(wb.config["total_timesteps"]) == 400
    assert "iteration" in wb.logged and any(name.startswith("learner/") for name in wb.logged), sorted(wb.logged)
    assert wb.kinds.get("history", 0) == len(metrics)  # one W&B step per metrics event
    assert wb.kinds.get("exit") == 1  # finished: the sinks closed the W&B run
    assert listener.connections == [], listener.connections  # nothing tried the network
