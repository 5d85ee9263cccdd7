"""``python -m tianshou_worker.cli --config run.json``: the shared worker command line for Tianshou."""

from __future__ import annotations

import sys

from mosaic.workerkit.cli import WorkerProgram, worker_main
from tianshou_worker.config import TianshouConfig, params_schema
from tianshou_worker.hooks import deep_validate, dry_run, envs

PROGRAM = WorkerProgram(name="tianshou", config_class=TianshouConfig, make_runtime=".runtime:TianshouRuntime",
                        deep_validate=deep_validate, algo_params_schema=params_schema, envs=envs, dry_run=dry_run,
                        evaluate=".evaluation:evaluate", make_player=".player:TianshouPlayer.load")


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
