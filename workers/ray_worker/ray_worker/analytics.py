"""Where metrics go besides telemetry: TensorBoard event files and, if asked, W&B.

Both are keyed by sampled env steps, so curves line up with MOSAIC's
``timesteps_total``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from mosaic.errors import ConfigError


def flatten_scalars(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """``{"learner": {"shared": {"vf_loss": 1}}}`` → ``{"learner/shared/vf_loss": 1.0}``."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten_scalars(value, f"{name}/"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def check_wandb_available() -> None:
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise ConfigError("wandb", "true needs the wandb package (pip install wandb); "
                          "or set it to false") from None


class MetricsSinks:
    """TensorBoard writer (tensorboardX, shipped with Ray) plus an optional W&B run."""

    SKIP = ("iteration", "timesteps_total", "total_timesteps", "num_episodes_lifetime")

    def __init__(self, run_dir: Path, run_id: str, tensorboard: bool, wandb: bool,
                 wandb_project: str, wandb_mode: str, config: Mapping[str, Any]) -> None:
        self.tb = None
        self.wandb_run = None
        if tensorboard:
            from tensorboardX import SummaryWriter

            self.tb = SummaryWriter(logdir=str(run_dir / "tensorboard"), flush_secs=5)
        if wandb:
            import wandb as wandb_lib

            self.wandb_run = wandb_lib.init(project=wandb_project, name=run_id, id=run_id,
                                            mode=wandb_mode, dir=str(run_dir / "logs"),
                                            config=dict(config), resume="allow")

    def write(self, metrics: Mapping[str, Any]) -> None:
        step = int(metrics.get("timesteps_total", 0))
        scalars = flatten_scalars({k: v for k, v in metrics.items() if k not in self.SKIP})
        if self.tb is not None:
            for name, value in scalars.items():
                self.tb.add_scalar(name, value, step)
        if self.wandb_run is not None:
            self.wandb_run.log({**scalars, "iteration": metrics.get("iteration")}, step=step)

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()
