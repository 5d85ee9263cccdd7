"""``python -m xuance_worker.cli --config run.json``: the shared worker command line for XuanCe."""

from __future__ import annotations

import sys

from mosaic.workerkit.cli import WorkerProgram, worker_main
from xuance_worker.config import XuanCeConfig, params_schema
from xuance_worker.hooks import deep_validate, dry_run, envs

PROGRAM = WorkerProgram(name="xuance", config_class=XuanCeConfig, make_runtime=".runtime:XuanCeRuntime",
                        deep_validate=deep_validate, algo_params_schema=params_schema, envs=envs, dry_run=dry_run,
                        evaluate=".evaluation:evaluate", make_player=".player:XuanCePlayer.load")


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
