"""Tianshou's hooks for the shared command line (mosaic.workerkit.cli): cheap to import, the library is imported
when one is called."""

from __future__ import annotations

from typing import Any

from tianshou_worker.config import TianshouConfig


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
