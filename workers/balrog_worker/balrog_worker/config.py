"""The evaluation's configuration: which tasks, how many episodes, which model, how prompts are built.

Cheap to import: MOSAIC's own environment reads the schema from it (minigrid is not there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from mosaic import configkit
from mosaic.configkit import option
from mosaic.fastlane.config import FastLaneConfig
from mosaic.llm.backends import ModelConfig

DEFAULT_TASKS = ("BabyAI-GoToRedBallNoDists-v0",)


@dataclass
class BalrogConfig:
    """A language model evaluated on MiniGrid/BabyAI tasks (BALROG's protocol)."""

    run_id: str = option(help="run id (set by MOSAIC)")
    seed: int = option(0, min=0, help="episode i of a task is reset with seed + i; also seeds the random "
                                      "fallback for replies that name no legal action")
    tasks: list[str] = option(default_factory=lambda: list(DEFAULT_TASKS),
                              help="MiniGrid-* and BabyAI-* env ids, played in this order (`--describe` lists them)")
    episodes_per_task: int = option(5, min=1, help="episodes of each task")
    max_steps: int | None = option(None, min=1, help="cut an episode after this many steps; default: the task's own")
    history: int = option(2, min=0, help="earlier turns (observation and chosen action) repeated in each prompt")
    retries_per_action: int = option(1, min=0, help="times a reply naming no legal action is asked again before a "
                                                    "random legal action is played (and counted invalid)")
    model: ModelConfig = option(default_factory=ModelConfig, help="the model that plays, and the run's budget")
    heartbeat_interval_s: float = option(5.0, min=0.1, help="seconds between heartbeats")
    fastlane: FastLaneConfig = option(default_factory=FastLaneConfig,
                                      help="stream the env's frames to `mosaic watch` (shared memory)")

    def to_dict(self) -> dict[str, Any]:
        return configkit.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BalrogConfig":
        config = configkit.from_dict(cls, data)
        if not config.tasks:
            from mosaic.errors import ConfigError

            raise ConfigError("tasks", "name at least one MiniGrid-* or BabyAI-* env id")
        return config


def default_config() -> dict[str, Any]:
    data = BalrogConfig(run_id="unset").to_dict()
    del data["run_id"]
    return data
