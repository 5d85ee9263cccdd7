"""Where a CleanRL run's artefacts land, and the manifest entries that point at them.

The script runs with the run folder as its working directory, so its own
relative paths put things where a CleanRL user looks for them, inside the run:
``runs/<run_name>/`` (TensorBoard) and ``videos/<run_name>/`` (``capture_video``).
MOSAIC's ``tensorboard/`` gets a link to the script's folder, so
``tensorboard --logdir <run>/tensorboard`` shows it as it shows every worker's.
With ``wandb``, the script's W&B run is under ``wandb/`` (``offline-run-*`` offline,
``run-*`` online), listed as the ``wandb`` artefact.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping


def link_tensorboard(run_root: Path, log_dir: str | None) -> Path | None:
    """``tensorboard/<run_name>`` -> ``../runs/<run_name>`` (relative: the run folder can move)."""
    if not log_dir:
        return None
    target = Path(log_dir)
    if not target.is_dir():
        return None
    link = run_root / "tensorboard" / target.name
    link.parent.mkdir(exist_ok=True)
    if not link.exists() and not link.is_symlink():
        link.symlink_to(os.path.relpath(target, link.parent))
    return link


def videos(run_root: Path) -> list[str]:
    folder = run_root / "videos"
    return sorted(str(p.relative_to(run_root)) for p in folder.rglob("*.mp4")) if folder.is_dir() else []


def wandb_runs(run_root: Path) -> list[str]:
    folder = run_root / "wandb"
    return sorted(str(p.relative_to(run_root)) for p in folder.glob("*run-*") if p.is_dir()) if folder.is_dir() else []


def manifest_fields(run_root: Path, log_dir: str | None, script: Mapping[str, Any]) -> dict[str, Any]:
    link = link_tensorboard(run_root, log_dir)
    artefacts: dict[str, Any] = {"videos": videos(run_root)}
    if log_dir:
        artefacts["tensorboard"] = os.path.relpath(log_dir, run_root)
    if link is not None:
        artefacts["tensorboard_link"] = str(link.relative_to(run_root))
    if wandb_runs(run_root):
        artefacts["wandb"] = wandb_runs(run_root)
    return {"artefacts": artefacts, "cleanrl": dict(script)}
