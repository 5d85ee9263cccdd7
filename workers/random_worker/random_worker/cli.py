"""``python -m random_worker.cli --config run.json``: the reference worker's process."""

from __future__ import annotations

import sys

from mosaic.workerkit.envs import offered_env_ids
from mosaic.workerkit.cli import WorkerProgram, worker_main
from random_worker import get_worker_metadata
from random_worker.config import RandomWorkerConfig, default_config
from random_worker.runtime import RandomWorkerRuntime


def _deep_validate(config: RandomWorkerConfig) -> None:
    """Build the env once so a wrong env id or kwarg fails before any run exists; a checkpoint to restore must
    hold the sampling state of this env's agents (one of another env would fail the run at its first move)."""
    env = config.environment.make(render_mode="rgb_array" if config.fastlane.enabled else None)
    agents = list(env.possible_agents)
    env.close()
    if config.checkpoint.restore_from:
        from mosaic.errors import ConfigError
        from random_worker.runtime import RandomCheckpointState

        path = config.checkpoint.restore_from
        state = RandomCheckpointState.read(path, "checkpoint.restore_from", "the random worker")
        saved = sorted((state.policy.get("spaces") or {}))
        if saved != sorted(agents):
            raise ConfigError("checkpoint.restore_from", f"{path} holds the sampling state of agents "
                                                         f"{', '.join(saved) or 'none'}, not of "
                                                         f"{config.environment.env_id}'s {', '.join(agents)}; "
                                                         "allowed: a checkpoint of a random run of this env")


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
