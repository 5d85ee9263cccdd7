"""CleanRL's hooks for the shared command line (mosaic.workerkit.cli): cheap to import, the scripts' libraries are
imported when one is called."""

from __future__ import annotations

from typing import Any

from cleanrl_worker import algorithms
from cleanrl_worker.config import CleanRLConfig


def deep_validate(config: CleanRLConfig) -> dict[str, Any]:
    """What needs the env: it is made once with the API the script imports."""
    import importlib

    algorithms.silence_gym_notice()
    if config.environment.family == "envpool":  # made by envpool.make, as ppo_atari_envpool.py makes it
        env = algorithms.make_envpool(config.resolved_env_id)
    else:
        api = importlib.import_module(config.algo.env_api)
        algorithms.prepare_family(config.environment.family)
        env = api.make(config.resolved_env_id)
    try:
        return {"observation_space": repr(env.observation_space), "action_space": repr(env.action_space)}
    finally:
        env.close()


def dry_run(config: CleanRLConfig, checked: Any) -> dict[str, Any]:
    from mosaic.workerkit.threads import thread_env

    from cleanrl_worker.runtime import command

    threads = thread_env(config.resources.threads)
    shown = {"command": command(config)[1:], "script_params": config.params(), "env": checked,
             "env_api": config.algo.env_api, "thread_variables": threads, "env_steps": config.env_steps()}
    return shown  # a budget the script rounds: the warning is the core's (PROGRAM.rounded_budget)


def envs() -> dict[str, list[str]]:
    """Each family whose library is installed here, with its ids (those of every action space)."""
    import importlib.util

    return {family: sorted({e for ids in by_space.values() for e in ids})
            for family, by_space in algorithms.ENVS.items()
            if importlib.util.find_spec(algorithms.FAMILY_MODULES[family]) is not None}
