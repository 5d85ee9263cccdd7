"""``python -m benchmarl_worker.cli --config run.json``: the shared worker command line for BenchMARL."""

from __future__ import annotations

import sys

from mosaic.workerkit.cli import WorkerProgram, worker_main
from benchmarl_worker.config import BenchMARLConfig
from benchmarl_worker.hooks import deep_validate, dry_run, envs, params_schema

PROGRAM = WorkerProgram(name="benchmarl", config_class=BenchMARLConfig, make_runtime=".runtime:BenchMARLRuntime",
                        deep_validate=deep_validate, algo_params_schema=params_schema, envs=envs, dry_run=dry_run,
                        evaluate=".evaluation:evaluate", make_player=".player:BenchMARLPlayer.load")


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
