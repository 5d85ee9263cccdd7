"""Helpers for the XuanCe worker's tests: tiny budgets, the real CLI, the real environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic.testing import WorkerHome

REPO = Path(__file__).resolve().parents[3]

_OFF_POLICY = {"start_training": 200, "buffer_size": 2000}
#: Budgets small enough for tests and large enough for a few updates of each algorithm.
TINY: dict[str, dict[str, Any]] = {
    "mappo": {"total_timesteps": 800, "num_envs": 2, "batch_size": 200},
    "ippo": {"total_timesteps": 800, "num_envs": 2, "batch_size": 200},
    "qmix": {"total_timesteps": 800, "num_envs": 2, "batch_size": 32, "algo_params": _OFF_POLICY},
    "vdn": {"total_timesteps": 800, "num_envs": 2, "batch_size": 32, "algo_params": _OFF_POLICY},
    "iql": {"total_timesteps": 800, "num_envs": 2, "batch_size": 32, "algo_params": _OFF_POLICY},
    "maddpg": {"total_timesteps": 800, "num_envs": 2, "batch_size": 32, "algo_params": _OFF_POLICY},
    "coma": {"total_timesteps": 800, "num_envs": 2, "batch_size": 200},
}


class Home(WorkerHome):
    """The xuance worker's test home, with its tiny runs."""

    TINY = TINY
    RUN_FIELDS = {"seed": 1, "reporting": {"every_timesteps": 400}}
