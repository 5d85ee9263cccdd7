"""``python -m random_worker.cli --config run.json``: the reference worker's process."""

from __future__ import annotations

import sys

from mosaic.workerkit.cli import WorkerProgram, worker_main
from mosaic.workerkit.envs import offered_env_ids
from random_worker.config import RandomWorkerConfig

PROGRAM = WorkerProgram(name="random", config_class=RandomWorkerConfig, make_runtime=".runtime:RandomWorkerRuntime",
                        deep_validate=".runtime:deep_validate", envs=offered_env_ids)


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
