"""``python -m tianshou_worker.cli --config run.json``: the shared worker command line for Tianshou."""

from __future__ import annotations

import sys
from typing import Any

from mosaic.workerkit.cli import WorkerProgram, worker_main

from tianshou_worker import get_worker_metadata
from tianshou_worker.config import TianshouConfig, params_schema


def default_config() -> dict[str, Any]:
    data = TianshouConfig(run_id="unset").to_dict()
    del data["run_id"]
    return data


def deep_validate(config: TianshouConfig) -> dict[str, Any]:
    """What needs the env: it is built once and checked against the algorithm's action space."""
    from tianshou_worker.runtime import check_offline_source, check_restore, probe_env, quiet

    quiet()
    spaces = probe_env(config)
    if config.restore_from:
        check_restore(config)
    check_offline_source(config)
    return {"env_id": config.resolved_env_id, "observation_space": repr(spaces.observation),
            "action_space": repr(spaces.action)}


def dry_run(config: TianshouConfig, checked: Any) -> dict[str, Any]:
    """What Tianshou will be given: its classes and their keyword arguments."""
    from tianshou_worker.algorithms import class_name

    policy_kw, algo_kw = config.split_params()
    algo = config.algo
    return {"env": checked, "tianshou_algorithm": class_name(algo.tianshou_class),
            "tianshou_policy": class_name(algo.policy_class), "kind": algo.kind,
            "policy_kwargs": policy_kw, "algorithm_kwargs": algo_kw,
            "collect_steps": config.resolved_collect_steps, "learning_starts": config.resolved_learning_starts}


def envs() -> dict[str, list[str]]:
    from tianshou_worker import classic
    from tianshou_worker.envs import OFFERED

    return {"gymnasium": list(OFFERED), "classic": list(classic.OFFERED)}


def make_runtime(config: TianshouConfig, context: Any) -> Any:
    from tianshou_worker.runtime import TianshouRuntime

    return TianshouRuntime(config, context)


def make_player(target: str, options: dict[str, Any]) -> Any:
    from tianshou_worker.player import TianshouPlayer

    return TianshouPlayer.load(target, options)


def evaluate(request: Any) -> int:
    from tianshou_worker.evaluation import evaluate as run

    return run(request)


PROGRAM = WorkerProgram(name="tianshou", config_from_dict=TianshouConfig.from_dict, make_runtime=make_runtime,
                        default_config=default_config, deep_validate=deep_validate,
                        heartbeat_interval_s=lambda config: config.reporting.heartbeat_interval_s,
                        describe=get_worker_metadata, config_class=TianshouConfig,
                        packages=("mosaic-tianshou-worker", "tianshou", "torch", "numpy", "gymnasium"),
                        algo_params_schema=params_schema, envs=envs, dry_run=dry_run, evaluate=evaluate,
                        rounded_budget=lambda config, start: config.rounded_budget(start),
                        make_player=make_player)


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
