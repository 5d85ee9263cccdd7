"""``python -m xuance_worker.cli --config run.json``: the shared worker command line for XuanCe."""

from __future__ import annotations

import sys
from typing import Any

from mosaic.workerkit.cli import WorkerProgram, worker_main

from xuance_worker import get_worker_metadata
from xuance_worker.config import XuanCeConfig, params_schema


def default_config() -> dict[str, Any]:
    data = XuanCeConfig(run_id="unset").to_dict()
    del data["run_id"], data["worker"]
    return data


def deep_validate(config: XuanCeConfig) -> dict[str, Any]:
    """What needs the env: it is built once and checked against the algorithm's action spaces."""
    from xuance_worker.runtime import probe_env, quiet_xuance

    quiet_xuance()
    return probe_env(config)


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


def make_runtime(config: XuanCeConfig, context: Any) -> Any:
    from xuance_worker.runtime import XuanCeRuntime

    return XuanCeRuntime(config, context)


def evaluate(request: Any) -> int:
    from xuance_worker.evaluation import evaluate as run

    return run(request)


def make_player(target: str, options: dict[str, Any]) -> Any:
    from xuance_worker.player import XuanCePlayer

    return XuanCePlayer.load(target, options)


PROGRAM = WorkerProgram(name="xuance", config_from_dict=XuanCeConfig.from_dict, make_runtime=make_runtime,
                        default_config=default_config, deep_validate=deep_validate,
                        heartbeat_interval_s=lambda config: config.reporting.heartbeat_interval_s,
                        describe=get_worker_metadata, config_class=XuanCeConfig,
                        packages=("mosaic-xuance-worker", "xuance", "torch", "numpy", "pettingzoo", "gymnasium"),
                        algo_params_schema=params_schema, envs=envs, dry_run=dry_run, evaluate=evaluate,
                        rounded_budget=lambda config, start: config.rounded_budget(start),
                        make_player=make_player)


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
