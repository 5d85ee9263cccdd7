"""``python -m jumanji_worker.cli --config run.json``: the shared worker command line for Jumanji."""

from __future__ import annotations

import sys

from mosaic.workerkit.cli import WorkerProgram, worker_main
from jumanji_worker.config import JumanjiConfig, params_schema
from jumanji_worker.hooks import deep_validate, dry_run, envs

PROGRAM = WorkerProgram(name="jumanji", config_class=JumanjiConfig, make_runtime=".runtime:JumanjiRuntime",
                        deep_validate=deep_validate, algo_params_schema=params_schema, envs=envs, dry_run=dry_run,
                        evaluate=".evaluation:evaluate")  # its rounded budget: whole epochs, restored or not


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
