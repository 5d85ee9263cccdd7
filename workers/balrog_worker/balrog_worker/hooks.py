"""The BALROG-style evaluator's hooks for the shared command line (mosaic.workerkit.cli)."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from mosaic.errors import ConfigError

from balrog_worker.config import BalrogConfig


def task_ids() -> list[str]:
    """Every MiniGrid-* and BabyAI-* id minigrid registers, as installed."""
    import gymnasium as gym
    import minigrid  # noqa: F401  (registers the ids)

    return sorted(i for i in gym.registry if i.startswith(("MiniGrid-", "BabyAI-")))


def unavailable() -> dict[str, str]:
    """Ids minigrid registers that cannot be played as installed, with the reason.

    minigrid 3.2.0's wheel leaves out some of the pattern images its wave-function-
    collapse tasks (``MiniGrid-WFC-*``) are generated from: those fail at reset.
    """
    from minigrid.envs.wfc.config import WFC_PRESETS

    return {f"MiniGrid-WFC-{name}-v0": f"its pattern image {config.pattern_path.name} is missing from minigrid's "
                                       "package, so the task cannot be generated"
            for name, config in WFC_PRESETS.items() if not Path(config.pattern_path).exists()}


def envs() -> dict[str, list[str]]:
    gone = unavailable()
    known = [i for i in task_ids() if i not in gone]
    return {"minigrid": [i for i in known if i.startswith("MiniGrid-")],
            "babyai": [i for i in known if i.startswith("BabyAI-")]}


def deep_validate(config: BalrogConfig) -> dict[str, Any]:
    """Known task ids, each one built once; a key and a listening endpoint; before any run exists."""
    import gymnasium as gym

    from mosaic.llm.backends import check_endpoint

    known, gone = task_ids(), unavailable()
    for index, task in enumerate(config.tasks):
        field = config.task_field(index)
        if task in gone:
            raise ConfigError(field, f"{task} cannot be played here: {gone[task]}")
        if task not in known:
            near = difflib.get_close_matches(task, known, n=3)
            raise ConfigError(field, f"{task!r} is not a MiniGrid or BabyAI id"
                                     + (f"; did you mean {', '.join(near)}?" if near else
                                        f" ({len(known)} are installed: `--describe` lists them)"))
        try:
            gym.make(task, **config.gym_kwargs()).close()
        except Exception as exc:  # noqa: BLE001  (what the env itself says is the message)
            raise ConfigError(field, f"{task} cannot be built here: {type(exc).__name__}: {exc}") from None
    check_endpoint(config.model)
    return {"family": config.environment.family, "tasks": list(config.tasks)}
