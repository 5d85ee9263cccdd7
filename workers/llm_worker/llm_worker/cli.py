"""``python -m llm_worker.cli --config run.json``: the evaluation's process (MOSAIC's own environment)."""

from __future__ import annotations

import sys

from mosaic.workerkit.cli import WorkerProgram, worker_main
from llm_worker.config import LLMWorkerConfig
from llm_worker.hooks import deep_validate, envs, make_player

PROGRAM = WorkerProgram(name="mosaic_llm", config_class=LLMWorkerConfig, make_runtime=".runtime:LLMWorkerRuntime",
                        deep_validate=deep_validate, envs=envs, dry_run=lambda config, checked: checked,
                        make_player=make_player)


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
