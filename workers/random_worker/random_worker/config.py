"""Configuration of the reference worker, validated field by field."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from mosaic import configkit
from mosaic.configkit import option
from mosaic.envs import EnvironmentConfig
from mosaic.fastlane.config import FastLaneConfig


@dataclass
class RandomWorkerConfig:
    run_id: str = option(help="run id (set by MOSAIC when launched through `mosaic run`)")
    seed: int = option(0, min=0, help="seeds the env resets and every agent's action sampling")
    environment: EnvironmentConfig = option(default_factory=EnvironmentConfig,
                                            help="the PettingZoo env to play")
    total_timesteps: int = option(2_000, min=1, help="env steps to play (one AEC move = one step)")
    steps_per_iteration: int = option(500, min=1, help="env steps between two `metrics` events")
    max_episode_steps: int | None = option(None, min=1, help="cut episodes longer than this")
    step_delay_s: float = option(0.0, min=0.0, max=10.0, help="sleep after each step (demos, tests)")
    heartbeat_interval_s: float = option(5.0, min=0.0, help="seconds between heartbeats; 0 = off")
    checkpoint_every_iterations: int = option(0, min=0, help="save a checkpoint every N iterations; 0 = only at the end")
    checkpoint_at_end: bool = option(True, help="save a checkpoint when the run completes")
    restore_from: str | None = option(None, help="checkpoint folder to resume from (counters and RNG state)")
    fastlane: FastLaneConfig = option(default_factory=FastLaneConfig,
                                      help="stream rendered frames to `mosaic watch` (shared memory)")

    def to_dict(self) -> dict[str, Any]:
        return configkit.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RandomWorkerConfig":
        return configkit.from_dict(cls, data)


def default_config() -> dict[str, Any]:
    """The built-in default: random play of connect_four, a few seconds long."""
    data = RandomWorkerConfig(run_id="unset").to_dict()
    del data["run_id"]
    return data
