"""Helpers for the Tianshou worker's tests: tiny budgets, the real CLI, the real environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic.testing import WorkerHome

REPO = Path(__file__).resolve().parents[3]

#: Budgets small enough for tests and large enough for several updates of each algorithm. DQN's stops at
#: the end of its first epoch (600 steps): an untrained CartPole policy already lasts 8+ steps, which is
#: the stop_at_return of 5 (Tianshou's stop rule reads the best test so far, the first one included).
TINY: dict[str, dict[str, Any]] = {
    "dqn": {"total_timesteps": 1100, "learning_starts": 100, "collect_steps": 10, "update_per_step": 0.1,
            "reporting": {"every_timesteps": 500}, "eps_schedule": {"start": 0.5, "end": 0.05, "begin_at": 100, "end_at": 800},
            "test_every_timesteps": 500, "test_episodes": 5, "stop_at_return": 5},
    "ppo": {"total_timesteps": 1024, "collect_steps": 512, "repeat_per_collect": 2, "reporting": {"every_timesteps": 512}},
    "sac": {"total_timesteps": 600, "learning_starts": 100, "collect_steps": 10, "reporting": {"every_timesteps": 300}},
    "discrete_cql": {"total_timesteps": 200, "batch_size": 32, "reporting": {"every_timesteps": 100},
                     "offline_data": {"transitions": 1000}, "algo_params": {"num_quantiles": 20}},
}


class Home(WorkerHome):
    """The tianshou worker's test home, with its tiny runs."""

    TINY = TINY
