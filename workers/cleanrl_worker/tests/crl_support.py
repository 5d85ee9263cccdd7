"""Helpers for the CleanRL worker's tests: the real CLI, the real worker environment."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

from mosaic.testing import WorkerHome, run_events
from mosaic.workerkit.threads import thread_env

REPO = Path(__file__).resolve().parents[3]
RUN_TIMEOUT_S = 900  # tiny budgets take a minute on a busy 2-core machine; the bound is for hangs

THREADS = 1  # torch threads of every script the tests run, through MOSAIC and directly

#: Budgets small enough for tests: a few updates of each algorithm.
TINY: dict[str, dict[str, Any]] = {
    "ppo": {"total_timesteps": 512, "algo_params": {"num_envs": 2, "num_steps": 64}},
    "dqn": {"total_timesteps": 600, "algo_params": {"learning_starts": 200, "train_frequency": 10,
                                                    "buffer_size": 1000}},
    "c51": {"total_timesteps": 600, "algo_params": {"learning_starts": 200, "train_frequency": 10,
                                                    "buffer_size": 1000}},
    "sac": {"total_timesteps": 400, "algo_params": {"learning_starts": 200, "buffer_size": 1000}},
    "td3": {"total_timesteps": 400, "algo_params": {"learning_starts": 200, "buffer_size": 1000}},
    "ddpg": {"total_timesteps": 400, "algo_params": {"learning_starts": 200, "buffer_size": 1000}},
}


class Home(WorkerHome):
    """The cleanrl worker's test home (``mosaic.testing.WorkerHome``), with its tiny runs."""

    TINY = TINY
    #: one torch thread, as the examples have it (and as :meth:`direct` runs the script): with torch's default the
    #: tiny networks crawl on a busy machine (``mosaic.workerkit.threads``)
    RUN_FIELDS = {"seed": 1, "resources": {"threads": THREADS}}

    def direct(self, module: str, argv: list[str], cwd: Path,
               pythonpath: list[str] | None = None) -> subprocess.CompletedProcess:
        """The upstream script run directly in the worker's environment, as a CleanRL user would
        (``pythonpath``: what docs/cleanrl-worker.md says to put on ``PYTHONPATH`` for it)."""
        cwd.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("MOSAIC_")}
        if pythonpath:
            env["PYTHONPATH"] = os.pathsep.join(pythonpath)
        env.update(SDL_VIDEODRIVER="dummy", PYTHONHASHSEED=os.environ.get("PYTHONHASHSEED", "0"),
                   **thread_env(THREADS))
        return subprocess.run([self.python, "-m", module, *argv], capture_output=True, text=True, cwd=cwd,
                              timeout=RUN_TIMEOUT_S, env=env)


events = run_events


_PRINTED = re.compile(r"global_step=(\d+), episodic_return=\[?([-0-9.e+]+)\]?")


def printed_episodes(stdout: str) -> list[tuple[int, float]]:
    """``(global_step, return)`` of every episode a CleanRL script printed."""
    return [(int(m.group(1)), float(m.group(2))) for m in _PRINTED.finditer(stdout)]
