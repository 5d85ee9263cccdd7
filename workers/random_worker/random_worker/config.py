"""Configuration of the reference worker: the shared run fields (``mosaic.workerkit.run_fields``) and its own few."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from mosaic.configkit import option
from mosaic.workerkit.envs import EnvironmentConfig
from mosaic.workerkit.run_fields import FieldMap, Reporting, RunConfig

NOT_LEARNING = "random play learns nothing"
DEFAULT_TOTAL_TIMESTEPS = 2_000


@dataclass
class RandomWorkerConfig(RunConfig):
    """Random, mask-respecting play of any PettingZoo env."""

    FIELDS: ClassVar[FieldMap] = FieldMap(
        honoured={
            "algorithm": "always 'random'",
            "environment.family": "the PettingZoo family",
            "environment.env_id": "the versioned PettingZoo id",
            "environment.env_kwargs": "the env constructor's keyword arguments",
            "seed": "env resets and every agent's action sampling",
            "total_timesteps": "env steps to play (one AEC move or one parallel step = one step)",
            "checkpoint.every_timesteps": "a checkpoint at the first report at or past each multiple",
            "checkpoint.at_end": "a checkpoint when the run completes",
            "checkpoint.restore_from": "counters and the sampling RNG's state",
            "reporting.every_timesteps": "a `metrics` event at the first episode end at or past each multiple",
            "reporting.heartbeat_interval_s": "heartbeats",
            "fastlane": "frames of the one env",
            "resources.cpus": "CPUs the daemon reserves for the run",
        },
        refused={
            "environment.env_ids": "one env per run",
            "episodes": "its budget is total_timesteps",
            "num_envs": "it plays one env",
            "learning_rate": NOT_LEARNING, "gamma": NOT_LEARNING, "batch_size": NOT_LEARNING,
            "algo_params": NOT_LEARNING,
            "checkpoint.keep": "its checkpoints are a few bytes each: all are kept",
            "resources.threads": "it runs no numeric library that threads",
            "resources.gpus": "it uses no GPU",
        })

    algorithm: str = option("random", help="always 'random'")
    environment: EnvironmentConfig = option(default_factory=EnvironmentConfig, help="the PettingZoo env to play")
    total_timesteps: int | None = option(DEFAULT_TOTAL_TIMESTEPS, min=1,
                                         help="env steps to play (one AEC move = one step); null = 2000")
    reporting: Reporting = option(merge=True, default_factory=lambda: Reporting(every_timesteps=500),
                                  help="metrics and heartbeat cadence")
    max_episode_steps: int | None = option(None, min=1, help="cut episodes longer than this")
    step_delay_s: float = option(0.0, min=0.0, max=10.0, help="sleep after each step (demos, tests)")

    @classmethod
    def algorithms(cls) -> Sequence[str]:
        return ("random",)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RandomWorkerConfig":
        config = super().from_dict(data)
        if config.total_timesteps is None:  # null: the default, written into the run's config
            config.total_timesteps = DEFAULT_TOTAL_TIMESTEPS
        return config


def default_config() -> dict[str, Any]:
    """The built-in default: random play of connect_four, a few seconds long."""
    data = RandomWorkerConfig(run_id="unset").to_dict()
    del data["run_id"], data["worker"]
    return data
