"""``python -m cleanrl_worker.cli --config run.json``: the shared worker command line for CleanRL."""

from __future__ import annotations

import sys

from mosaic.workerkit.cli import WorkerProgram, worker_main
from cleanrl_worker.config import CleanRLConfig, params_schema
from cleanrl_worker.hooks import deep_validate, dry_run, envs

#: The built-in default: PPO on CartPole, 20k steps.
DEFAULTS = {"algorithm": "ppo", "total_timesteps": 20_000, "environment": {"family": "gymnasium", "env_id": "CartPole-v1"}}
PROGRAM = WorkerProgram(name="cleanrl", config_class=CleanRLConfig, make_runtime=".runtime:CleanRLRuntime",
                        default_config=DEFAULTS, deep_validate=deep_validate, algo_params_schema=params_schema,
                        envs=envs, dry_run=dry_run, evaluate=".evaluation:evaluate")


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
