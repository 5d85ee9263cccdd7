"""Helpers for the Jumanji worker's tests: tiny networks and budgets, the real CLI, the real environment.

XLA compilation is most of a Jumanji test's time. The networks are shrunk through the
env yaml's ``network`` keys, every test runs one or two epochs of a few learner
steps, and the tests of a session share JAX's persistent compilation cache
(``conftest.py``): a computation compiled once (by a MOSAIC run, by train.py run
directly, by a resumed run) is read back from disk afterwards.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from mosaic.testing import WorkerHome

REPO = Path(__file__).resolve().parents[3]

#: Per env: the smallest network of the yaml's kind, small batches, 80 env steps an epoch.
TINY: dict[str, dict[str, Any]] = {
    "tsp": {"environment": {"family": "jumanji", "env_id": "tsp"}, "n_steps": 5, "num_envs": 8, "num_learner_steps_per_epoch": 2,
            "eval_episodes": 8, "greedy_eval_episodes": 8,
            "network": {"transformer_num_blocks": 1, "transformer_num_heads": 2, "transformer_key_size": 8,
                        "transformer_mlp_units": [32]}},
    "bin_pack": {"environment": {"family": "jumanji", "env_id": "bin_pack"}, "n_steps": 5, "num_envs": 8, "num_learner_steps_per_epoch": 2,
                 "eval_episodes": 8, "greedy_eval_episodes": 8,
                 "network": {"num_transformer_layers": 1, "transformer_num_heads": 2, "transformer_key_size": 8,
                             "transformer_mlp_units": [32]}},
}
STEPS_PER_EPOCH = 5 * 8 * 2
#: For tests that check what runs, not what is learned (the env walk, one epoch per family): XLA compiles with most
#: of its optimisations off (JAX's own switch, read by the worker's JAX from its environment). Compiling is most of
#: such a run (mmst: 36 s -> 22 s); the computation is the same, only less optimised code runs it. Tests that
#: check learning or exact values compile as a user's run does.
QUICK_COMPILE = {"JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}
#: One epoch of one env, for the same tests: two learner steps of 5 steps, after evaluations of one episode each. The
#: programs compiled are the same for any batch; the unoptimised code plays a batch of eight seconds slower.
ONE_ENV_EPOCH = {"n_steps": 5, "num_envs": 1, "num_learner_steps_per_epoch": 2, "eval_episodes": 1,
                 "greedy_eval_episodes": 1}
ONE_ENV_STEPS = 5 * 1 * 2


class Home(WorkerHome):
    """The jumanji worker's test home, with its tiny runs."""

    def run(self, env: str, *args: str, xla: dict[str, str] | None = None,
            **fields: Any) -> tuple[subprocess.CompletedProcess, Path]:
        """``mosaic run`` a tiny budget on ``env`` (``xla``: QUICK_COMPILE, or nothing); (process, run folder)."""
        cfg = {"seed": 0, "total_timesteps": 2 * STEPS_PER_EPOCH, **TINY[env], **fields}
        name = f"{env}-{len(list(self.root.glob('*.json')))}"
        proc = self.cli("run", str(self.config(name, **cfg)), *args, env=xla or {})
        return proc, self.runs()[-1]
