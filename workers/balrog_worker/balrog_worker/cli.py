"""``python -m balrog_worker.cli --config run.json``: the evaluator's process (in its own environment)."""

from __future__ import annotations

import sys

from mosaic.workerkit.cli import WorkerProgram, worker_main
from balrog_worker.config import BalrogConfig
from balrog_worker.hooks import deep_validate, envs, task_ids, unavailable  # noqa: F401  (tests use the last two)

PROGRAM = WorkerProgram(name="balrog", config_class=BalrogConfig, make_runtime=".runtime:BalrogRuntime",
                        deep_validate=deep_validate, envs=envs, dry_run=lambda config, checked: checked)


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
