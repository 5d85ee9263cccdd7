"""BenchMARL's hooks for the shared command line (mosaic.workerkit.cli): cheap to import, the library is imported
when one is called."""

from __future__ import annotations

from typing import Any

from benchmarl_worker import FAMILIES
from benchmarl_worker.config import BenchMARLConfig, allowed_params


def deep_validate(config: BenchMARLConfig) -> dict[str, Any]:
    """What needs the task: its env is built once (its agent groups, the action space the algorithm gets)."""
    from benchmarl_worker.runtime import probe_task, quiet

    quiet()
    checked = probe_task(config)
    if config.checkpoint.restore_from:
        from benchmarl_worker.checkpoint import agents_of
        from benchmarl_worker.config import check_restore_from

        check_restore_from(config, agents_of(checked["groups"]))
    return checked


def dry_run(config: BenchMARLConfig, checked: Any) -> dict[str, Any]:
    """BenchMARL's config dataclasses' values as the run would build them (its yaml, then the config)."""
    return {"task": checked, "experiment_config": config.experiment_values(),
            "algorithm_config": config.algorithm_values(), "task_config": config.task_values(),
            "model_config": config.model_values(), "critic_model_config": config.model_values(critic=True),
            "iterations": -(-config.total_timesteps // config.frames_per_batch)}


def envs() -> dict[str, list[str]]:
    """The tasks BenchMARL ships for each family the worker trains on."""
    from benchmarl_worker.options import task_names

    return {family: task_names(family) for family in FAMILIES}


def params_schema(name: str) -> dict[str, Any]:
    """JSON Schema of ``algo_params`` for one algorithm (``--schema ALGO``)."""
    config = BenchMARLConfig(run_id="-", algorithm=name)
    params = allowed_params(config)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"algo_params of benchmarl {name} (fields of BenchMARL's {config.algo.config_class} and "
                     "ExperimentConfig, defaults from its conf/algorithm and conf/experiment/base_experiment.yaml)",
            "type": "object", "additionalProperties": False,
            "properties": {n: p.schema() for n, p in params.items()}}
