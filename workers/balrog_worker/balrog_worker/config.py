"""The evaluation's configuration: the shared run fields (``mosaic.workerkit.run_fields``) and the evaluator's own.

Which tasks (``environment``: a family and its ids), how many episodes of each
(``episodes``), which model plays (``model``) and how prompts are built.

Cheap to import: MOSAIC's own environment reads the schema from it (minigrid is not there).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from mosaic import configkit
from mosaic.configkit import option
from mosaic.errors import ConfigError
from mosaic.llm.backends import ModelConfig
from mosaic.workerkit.run_fields import EVALUATOR_REFUSALS, Environment, FieldMap, RunConfig

DEFAULT_TASKS = ("BabyAI-GoToRedBallNoDists-v0",)
DEFAULT_EPISODES = 5
FAMILIES = ("babyai", "minigrid")
#: Keyword arguments of ``gym.make`` the worker sets itself.
RESERVED_ENV_KWARGS = {"render_mode": "set by the worker (rgb_array when fastlane is on)"}


def family_of(ids: Sequence[str]) -> str:
    """``babyai`` when every id is a BabyAI-* task, else ``minigrid`` (minigrid's package holds both)."""
    return "babyai" if ids and all(i.startswith("BabyAI-") for i in ids) else "minigrid"


@dataclass
class BalrogConfig(RunConfig):
    """A language model evaluated on MiniGrid/BabyAI tasks (BALROG's protocol)."""

    FIELDS: ClassVar[FieldMap] = FieldMap(
        honoured={
            "algorithm": "always 'llm': the model in `model` chooses every action",
            "environment.family": "'babyai' (every task a BabyAI-* id) or 'minigrid' (any MiniGrid-* or "
                                  "BabyAI-* ids); empty: decided from the ids",
            "environment.env_id": "the one task played (a MiniGrid-* or BabyAI-* gymnasium id)",
            "environment.env_ids": "the tasks played, in this order (MiniGrid-* and BabyAI-* gymnasium ids)",
            "environment.env_kwargs": "keyword arguments of gym.make for every task",
            "seed": "episode i of a task is reset with seed + i; also seeds the random fallback for "
                    "replies that name no legal action",
            "episodes": "episodes of each task",
            "reporting.heartbeat_interval_s": "heartbeats",
            "fastlane": "frames of the env being played",
            "resources.cpus": "CPUs the daemon reserves for the run",
        },
        refused={
            **EVALUATOR_REFUSALS,
            "total_timesteps": "an evaluator: its budget is episodes (per task)",
            "algo_params": "an evaluator: it has no training hyperparameters (the model's settings are "
                           "under `model`)",
            "reporting.every_timesteps": "a `metrics` event follows each task's episodes",
            "resources.threads": "it sets no thread count (the transformers backend uses torch's own)",
            "resources.gpus": "no GPU path in this version of the worker",
        })

    algorithm: str = option("llm", help="always 'llm'")
    environment: Environment = option(
        default_factory=lambda: Environment(family="babyai", env_ids=list(DEFAULT_TASKS)),
        help="the tasks: family 'babyai' or 'minigrid' and MiniGrid-*/BabyAI-* ids in env_ids (env_id for "
             "one task), played in this order (`--describe` lists them)")
    seed: int = option(0, min=0, help="episode i of a task is reset with seed + i; also seeds the random "
                                      "fallback for replies that name no legal action")
    episodes: int | None = option(DEFAULT_EPISODES, min=1, help="episodes of each task")
    max_steps: int | None = option(None, min=1, help="cut an episode after this many steps; default: the task's own")
    history: int = option(2, min=0, help="earlier turns (observation and chosen action) repeated in each prompt")
    retries_per_action: int = option(1, min=0, help="times a reply naming no legal action is asked again before a "
                                                    "random legal action is played (and counted invalid)")
    model: ModelConfig = option(default_factory=ModelConfig, help="the model that plays, and the run's budget")

    @classmethod
    def algorithms(cls) -> Sequence[str]:
        return ("llm",)

    @property
    def tasks(self) -> list[str]:
        """The task ids played, in order."""
        return self.environment.ids()

    def task_field(self, index: int) -> str:
        """The config field that names task ``index``: ``environment.env_ids[i]`` or ``environment.env_id``."""
        return f"environment.env_ids[{index}]" if self.environment.env_ids else "environment.env_id"

    def gym_kwargs(self) -> dict[str, Any]:
        """What ``gym.make`` gets for every task, besides the render mode."""
        return {**self.environment.env_kwargs, **({"max_steps": self.max_steps} if self.max_steps else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "BalrogConfig":
        config = configkit.from_dict(cls, data)
        config.check_shared()
        config.check()
        return config

    def check(self) -> None:
        """The evaluator's own checks (no minigrid needed: ids are checked against it in ``deep_validate``)."""
        env = self.environment
        if self.episodes is None:
            self.episodes = DEFAULT_EPISODES
        if env.env_id and env.env_ids:
            raise ConfigError("environment.env_id", f"{env.env_id!r} given beside env_ids; allowed: env_id for "
                                                    "one task or env_ids for several, not both")
        ids = env.ids()
        if not ids:
            raise ConfigError("environment.env_ids", "name at least one MiniGrid-* or BabyAI-* env id "
                                                     "(or environment.env_id for one task)")
        for index, task in enumerate(ids):
            if not isinstance(task, str) or not task.startswith(("MiniGrid-", "BabyAI-")):
                raise ConfigError(self.task_field(index), f"{task!r} is not a MiniGrid-* or BabyAI-* env id")
        derived = family_of(ids)
        if not env.family:
            env.family = derived
        elif env.family not in FAMILIES:
            raise ConfigError("environment.family", f"{env.family!r} is not played by the balrog worker; "
                                                    f"allowed: {derived} (from the ids)")
        elif env.family == "babyai" and derived != "babyai":
            first = next(i for i, t in enumerate(ids) if not t.startswith("BabyAI-"))
            raise ConfigError("environment.family", f"'babyai' but {self.task_field(first)} is "
                                                    f"{ids[first]!r}, not a BabyAI-* id; allowed: minigrid")
        for key, why in RESERVED_ENV_KWARGS.items():
            if key in env.env_kwargs:
                raise ConfigError(f"environment.env_kwargs.{key}", f"{why}; allowed: leave it out")
        if "max_steps" in env.env_kwargs and self.max_steps:
            raise ConfigError("max_steps", "given twice: max_steps and environment.env_kwargs.max_steps; "
                                           "allowed: one of them")


def default_config() -> dict[str, Any]:
    data = BalrogConfig(run_id="unset").to_dict()
    del data["run_id"], data["worker"]
    return data
