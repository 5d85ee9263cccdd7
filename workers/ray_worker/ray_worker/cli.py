"""``python -m ray_worker.cli --config run.json``: the Ray RLlib worker's process (``--schema ALGO``: an algorithm's
hyperparameter JSON Schema)."""

from __future__ import annotations

import sys

from mosaic.workerkit.cli import WorkerProgram, worker_main
from ray_worker import algo_params
from ray_worker.config import RayWorkerConfig, default_config
from ray_worker.hooks import deep_validate, dry_run, evaluate

PROGRAM = WorkerProgram(name="ray", config_class=RayWorkerConfig, make_runtime=".runtime:RayWorkerRuntime",
                        default_config=default_config, deep_validate=deep_validate,
                        algo_params_schema=algo_params.schema, envs=".environment:offered_envs", dry_run=dry_run,
                        evaluate=evaluate, make_player=".player:RayPlayer.load")


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
