"""XuanCe's hooks for the shared command line (mosaic.workerkit.cli): cheap to import, the library is imported
when one is called."""

from __future__ import annotations

from typing import Any

from xuance_worker.config import XuanCeConfig


def deep_validate(config: XuanCeConfig) -> dict[str, Any]:
    """What needs the env: it is built once and checked against the algorithm's action spaces."""
    from xuance_worker.runtime import probe_env, quiet_xuance

    quiet_xuance()
    checked = probe_env(config)
    if config.checkpoint.restore_from:
        from xuance_worker.config import check_restore_from

        check_restore_from(config, checked["agents"])
    return checked


def dry_run(config: XuanCeConfig, checked: Any) -> dict[str, Any]:
    """XuanCe's arguments as the run would build them (yaml, then the config, then the env)."""
    from pathlib import Path

    from xuance_worker.runtime import config_path, xuance_arguments

    args = xuance_arguments(config, Path("RUN_FOLDER"), checked)
    shown = {k: v for k, v in sorted(vars(args).items()) if k not in ("mosaic_env",)}
    return {"env": checked, "xuance_yaml": str(config_path(config)), "xuance_arguments": shown}


def envs() -> dict[str, list[str]]:
    """MPE, SISL and Butterfly as installed; the classic games that import here (chess and the card games need
    packages the environment does not have), turn-based ones played in turns (envs.py)."""
    from mosaic.workerkit.envs import offered_env_ids

    offered = offered_env_ids(("mpe", "sisl", "butterfly", "classic"))
    offered["classic"] = [env_id for env_id in offered["classic"] if importable("classic", env_id)]
    return offered


def importable(family: str, env_id: str) -> bool:
    from mosaic.workerkit.envs import load_env_module
    from mosaic.errors import ConfigError

    try:
        load_env_module(family, env_id)
    except ConfigError:  # not importable here
        return False
    return True
