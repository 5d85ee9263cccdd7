"""Jumanji's hooks for the shared command line (mosaic.workerkit.cli): cheap to import, the library is imported
when one is called."""

from __future__ import annotations

from typing import Any

from jumanji_worker.config import JumanjiConfig, environments


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
