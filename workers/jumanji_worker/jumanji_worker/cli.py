"""``python -m jumanji_worker.cli --config run.json``: the shared worker command line for Jumanji."""

from __future__ import annotations

import sys
from typing import Any

from mosaic.workerkit.cli import WorkerProgram, worker_main

from jumanji_worker import get_worker_metadata
from jumanji_worker.config import JumanjiConfig, environments, params_schema


def default_config() -> dict[str, Any]:
    data = JumanjiConfig(run_id="unset").to_dict()
    del data["run_id"], data["worker"]
    return data


def deep_validate(config: JumanjiConfig) -> dict[str, Any]:
    """What needs Jumanji: hydra composes the config from Jumanji's files; a restore is checked."""
    from jumanji_worker.config import compose
    from jumanji_worker.runtime import check_restore

    if config.checkpoint.restore_from:
        check_restore(config)
    cfg = compose(config)
    return {"registered_version": cfg.env.registered_version, "jumanji_config": _plain(cfg)}


def _plain(cfg: Any) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(cfg, resolve=True)


def dry_run(config: JumanjiConfig, checked: Any) -> dict[str, Any]:
    """What jumanji.training will be given: hydra's overrides and the config they compose."""
    return {"env_id": checked["registered_version"], "hydra_overrides": config.overrides(),
            "steps_per_epoch": config.steps_per_epoch, "epochs": config.num_epochs,
            "jumanji_config": checked["jumanji_config"]}


def envs() -> dict[str, list[str]]:
    return {"jumanji": list(environments())}


def make_runtime(config: JumanjiConfig, context: Any) -> Any:
    from jumanji_worker.runtime import JumanjiRuntime

    return JumanjiRuntime(config, context)


def evaluate(request: Any) -> int:
    from jumanji_worker.evaluation import evaluate as run

    return run(request)


PROGRAM = WorkerProgram(name="jumanji", config_from_dict=JumanjiConfig.from_dict, make_runtime=make_runtime,
                        default_config=default_config, deep_validate=deep_validate,
                        heartbeat_interval_s=lambda config: config.reporting.heartbeat_interval_s,
                        describe=get_worker_metadata, config_class=JumanjiConfig,
                        packages=("mosaic-jumanji-worker", "jumanji", "jax", "jaxlib", "dm-haiku", "optax",
                                  "hydra-core"),
                        algo_params_schema=params_schema, envs=envs, dry_run=dry_run, evaluate=evaluate,
                        rounded_budget=lambda config, start: config.rounded_budget())  # whole epochs either way


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
