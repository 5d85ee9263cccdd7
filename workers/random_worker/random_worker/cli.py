"""``python -m random_worker.cli --config run.json``: the reference worker's process."""

from __future__ import annotations

import sys

from mosaic.workerkit.envs import offered_env_ids
from mosaic.workerkit.cli import WorkerProgram, worker_main
from random_worker import get_worker_metadata
from random_worker.config import RandomWorkerConfig, default_config
from random_worker.runtime import RandomWorkerRuntime


def _deep_validate(config: RandomWorkerConfig) -> None:
    """Build the env once so a wrong env id or kwarg fails before any run exists."""
    config.environment.make(render_mode="rgb_array" if config.fastlane.enabled else None).close()
    if config.checkpoint.restore_from:
        from random_worker.runtime import RandomCheckpointState

        RandomCheckpointState.read(config.checkpoint.restore_from, "checkpoint.restore_from", "the random worker")


PROGRAM = WorkerProgram(
    name="random",
    config_from_dict=RandomWorkerConfig.from_dict,
    make_runtime=RandomWorkerRuntime,
    default_config=default_config,
    deep_validate=_deep_validate,
    heartbeat_interval_s=lambda config: config.reporting.heartbeat_interval_s,
    describe=get_worker_metadata,
    config_class=RandomWorkerConfig,
    packages=("mosaic-random-worker", "pettingzoo", "gymnasium", "numpy"),
    envs=offered_env_ids,
)


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
