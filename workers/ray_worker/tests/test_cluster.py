"""Training on a multi-node Ray cluster simulated on this machine (head + one worker node)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from ray_support import TINY, merge


@pytest.fixture(scope="module")
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, connect=False, head_node_args={"num_cpus": 1})
    c.add_node(num_cpus=1)
    c.wait_for_nodes()
    yield c
    c.shutdown()


def test_training_runs_on_a_two_node_cluster(cluster, tmp_path):
    config = tmp_path / "c.json"
    # One remote env runner (1 CPU) plus the driver's learner: needs both nodes' CPUs.
    config.write_text(json.dumps(merge(TINY, {"worker": "ray", "rllib": {
        "address": cluster.address, "num_env_runners": 1, "cpus_per_env_runner": 1}})))
    proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(config)], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "MOSAIC_HOME": str(tmp_path / "home")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run,) = (tmp_path / "home" / "trainer" / "runs").iterdir()
    events = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
    started = events[0]
    assert started["resources"]["ray"]["CPU"] == 2.0
    assert started["resources"]["ray_nodes"] == 2
    assert events[-1]["type"] == "run_completed"
