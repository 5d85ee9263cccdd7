"""A CleanRL run: the unmodified script as a child process, observed from inside.

``CleanRLRuntime.run()`` reports ``run_started``, then hands the script's
command line to :class:`mosaic.workerkit.script_runtime.ScriptRuntime`, which owns the
child (its own process group; pause = SIGSTOP/SIGCONT of the group; cancel =
SIGTERM, SIGKILL after a short grace) and relays the records
``child.py`` writes on a pipe of their own through ``telemetry.Translator``.

The child's environment: ``PYTHONPATH`` starts with the script's overlay, if it
has one (``Algorithm.overlay``: ppo_atari and c51_atari run with SB3 1.2.0 from the
environment's ``overlays/sb3-gym``), then ``site/`` (the observers' ``sitecustomize``), ``SDL_NO_SIGNAL_HANDLERS=1`` (pygame's SDL would otherwise
swallow SIGTERM while videos are captured) and ``SDL_VIDEODRIVER=dummy`` (no
display). Atari runs get ``MOSAIC_CLEANRL_ALE=1`` (ALE's ids registered by the
import hook on gymnasium), MuJoCo runs ``MUJOCO_GL=egl`` unless it is set
(MuJoCo renders headless through EGL; rendering only). With ``wandb``, W&B's
own variables: ``WANDB_MODE`` from ``wandb_mode``, ``WANDB_DIR`` the run folder (the
script's W&B run lands in ``<run>/wandb/``), ``WANDB_SILENT`` and, offline,
``WANDB_ERROR_REPORTING=false`` (nothing leaves the machine). Its working directory is
the run folder.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from mosaic.provenance import package_versions
from mosaic.workerkit.program import run_started
from mosaic.workerkit.script_runtime import ScriptRuntime
from mosaic.workerkit.threads import thread_env

import cleanrl_worker
from cleanrl_worker import PACKAGES, algorithms, analytics
from cleanrl_worker.config import CleanRLConfig
from cleanrl_worker.telemetry import AGENT, Translator

SITE_DIR = Path(cleanrl_worker.__file__).parent / "site"
#: Seconds between SIGTERM and SIGKILL when a run is cancelled.
CANCEL_GRACE_S = 5.0


def command(config: CleanRLConfig) -> list[str]:
    return [sys.executable, "-m", config.algo.module, *config.argv()]


def child_env(config: CleanRLConfig, run_root: Path) -> dict[str, str]:
    params = config.params()
    state = {"run_id": config.run_id, "algorithm": config.algorithm, "env_id": config.resolved_env_id,
             "params": params, "policy": config.algo.policy_global,
             "cleanrl_version": package_versions(["cleanrl"]).get("cleanrl", "")}
    overlay = algorithms.overlay_path(config.algo)
    path = [*filter(None, [overlay]), str(SITE_DIR), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {"PYTHONPATH": os.pathsep.join(path),
           "SDL_NO_SIGNAL_HANDLERS": "1", "SDL_VIDEODRIVER": "dummy", "PYGAME_HIDE_SUPPORT_PROMPT": "1",
           "MOSAIC_CLEANRL_RUN_DIR": str(run_root),
           "MOSAIC_CLEANRL_CHECKPOINT_EVERY": str(config.checkpoint.every_timesteps),
           "MOSAIC_CLEANRL_CHECKPOINT_AT_END": "1" if config.checkpoint.at_end else "0",
           "MOSAIC_CLEANRL_ENV_STEPS": str(config.env_steps()),
           "MOSAIC_CLEANRL_STATE": json.dumps(state)}
    env.update(thread_env(config.resources.threads))
    if config.environment.family == "atari":
        env["MOSAIC_CLEANRL_ALE"] = "1"  # ALE's ids registered with gymnasium 0.29.1 (child.py)
    elif config.environment.family == "mujoco" and "MUJOCO_GL" not in os.environ:
        env["MUJOCO_GL"] = "egl"  # headless rendering (FastLane, capture_video); dynamics do not change
    if config.wandb:
        env.update(config.wandb_environment(str(run_root)))
    if config.fastlane.enabled:
        env["MOSAIC_CLEANRL_FASTLANE"] = json.dumps({"run_id": config.run_id, "run_dir": str(run_root),
                                                     "config": config.fastlane.__dict__})
    return env


def overlay_versions(config: CleanRLConfig) -> dict[str, str]:
    """The versions of the script's overlay: its packages in place of the environment's."""
    found: dict[str, str] = {}
    overlay = algorithms.overlay_path(config.algo)
    if overlay:
        from importlib import metadata

        for dist in metadata.distributions(path=[overlay]):
            found[dist.metadata["Name"]] = dist.version
    return found


class CleanRLRuntime:
    def __init__(self, config: CleanRLConfig, context: Any) -> None:
        self.config = config
        self.ctx = context

    def run(self) -> dict[str, Any]:
        cfg = self.config
        root = Path(self.ctx.run_dir.root).absolute()
        params = cfg.params()
        steps = cfg.env_steps()  # what the script will run: ppo rounds its budget down to whole rollouts
        translator = Translator(cfg.algo, steps)
        argv = command(cfg)
        env = child_env(cfg, root)
        run_started(
            self.ctx.emitter, cfg, worker="cleanrl", packages=PACKAGES, versions=overlay_versions(cfg),
            resources={"cpus": 1, "gpus": cfg.resources.gpus}, algorithm=cfg.algorithm,
            env={"family": cfg.environment.family, "env_id": cfg.resolved_env_id, "api_type": cfg.algo.env_api},
            policy_configuration="INDEPENDENT", seed=cfg.seed, total_timesteps=steps,
            agents=[AGENT], script=cfg.algo.module, command=argv[1:])
        script = ScriptRuntime(argv, self.ctx, translator, cwd=root, env=env,
                               grace_s=CANCEL_GRACE_S, telemetry_fd_env="MOSAIC_CLEANRL_FD", keep_stdout=True,
                               relay_stdout=False)  # the translator reads the telemetry fd only
        try:
            outcome = script.run()
        finally:
            self.ctx.run_dir.update_manifest(**analytics.manifest_fields(
                root, translator.log_dir, {"module": cfg.algo.module, "argv": argv[1:], "params": params}))
        return {**translator.summary(), "script": outcome}
