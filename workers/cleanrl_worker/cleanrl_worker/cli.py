"""``python -m cleanrl_worker.cli --config run.json``: the shared worker command line for CleanRL."""

from __future__ import annotations

import sys
from typing import Any

from mosaic.workerkit.cli import WorkerProgram, worker_main

from cleanrl_worker import algorithms, get_worker_metadata
from cleanrl_worker.config import CleanRLConfig, params_schema


def default_config() -> dict[str, Any]:
    data = CleanRLConfig(run_id="unset").to_dict()
    del data["run_id"]
    data.update(algorithm="ppo", total_timesteps=20_000)
    data["environment"].update(family="gymnasium", env_id="CartPole-v1")
    return data


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


def make_runtime(config: CleanRLConfig, context: Any) -> Any:
    from cleanrl_worker.runtime import CleanRLRuntime

    return CleanRLRuntime(config, context)


def evaluate(request: Any) -> int:
    from cleanrl_worker.evaluation import evaluate as run

    return run(request)


PROGRAM = WorkerProgram(name="cleanrl", config_from_dict=CleanRLConfig.from_dict, make_runtime=make_runtime,
                        default_config=default_config, deep_validate=deep_validate,
                        describe=get_worker_metadata, config_class=CleanRLConfig,
                        packages=("mosaic-cleanrl-worker", "cleanrl", "torch", "gym", "gymnasium", "numpy", "ale-py",
                                  "mujoco", "envpool"),
                        algo_params_schema=params_schema, envs=envs, dry_run=dry_run, evaluate=evaluate,
                        rounded_budget=lambda config, start: config.rounded_budget(),  # no restore
                        heartbeat_interval_s=lambda config: config.reporting.heartbeat_interval_s)


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
