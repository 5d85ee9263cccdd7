"""Helpers for the BenchMARL worker's tests: tiny budgets on a small VMAS task, the real CLI and environment."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mosaic.testing import WorkerHome

REPO = Path(__file__).resolve().parents[3]

#: VMAS balance with 25-step episodes: each collection (4 envs of 25 steps, 100 frames) ends an episode per env.
TASK = {"family": "vmas", "env_id": "balance", "env_kwargs": {"max_steps": 25}}
AGENTS = ["agent_0", "agent_1", "agent_2", "agent_3"]
FRAMES = 100  # per collection
_ON = {"batch_size": 50, "algo_params": {"on_policy_collected_frames_per_batch": FRAMES,
                                          "on_policy_n_minibatch_iters": 1}}
_OFF = {"batch_size": 32, "algo_params": {"off_policy_collected_frames_per_batch": FRAMES,
                                           "off_policy_n_optimizer_steps": 2, "off_policy_memory_size": 1000}}
#: Budgets small enough for tests and large enough for a few updates of each algorithm: two collections.
TINY: dict[str, dict[str, Any]] = {
    algorithm: {"environment": TASK, "total_timesteps": 2 * FRAMES, "num_envs": 4, **(_ON if algorithm in
                                                                                       ("mappo", "ippo") else _OFF)}
    for algorithm in ("mappo", "ippo", "maddpg", "iddpg", "masac", "isac", "qmix", "vdn", "iql")}


class Home(WorkerHome):
    """The benchmarl worker's test home, with its tiny runs (``WorkerHome.run``)."""

    TINY = TINY
