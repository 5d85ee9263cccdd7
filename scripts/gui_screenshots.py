"""Screenshots of every GUI view for docs/gui.md, made offscreen from real runs.

    .venv/bin/python scripts/gui_screenshots.py [--out docs/gui] [--home DIR]

It starts the GUI on a fresh MOSAIC_HOME (the window starts the daemon), then:

- trains two tiny Ray PPO runs on simple_spread through the New run form (seeds 1 and 2);
- starts a random-policy pistonball run with FastLane on, for live frames.

It grabs each view with ``widget.grab()``, stops the daemon and prints where the PNGs are.
It takes a few minutes on a 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

RAY_RUN = {"rllib.num_env_runners": 0, "algorithm": "ppo", "total_timesteps": 6000,
           "environment.family": "mpe", "environment.env_id": "simple_spread_v3", "environment.api_type": "PARALLEL",
           "environment.env_kwargs": {"N": 2, "max_cycles": 25}}
RAY_PARAMS = {"train_batch_size_per_learner": 1000, "minibatch_size": 250, "num_epochs": 4}
PISTONBALL = {"environment.family": "butterfly", "environment.env_id": "pistonball_v6",
              "environment.api_type": "PARALLEL", "environment.env_kwargs": {"n_pistons": 5, "max_cycles": 60},
              "total_timesteps": 1_000_000, "reporting.every_timesteps": 60, "step_delay_s": 0.02,
              "fastlane.enabled": True, "fastlane.fps": 30}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "gui")
    parser.add_argument("--home", type=Path, default=None, help="MOSAIC_HOME to use (default: a new temporary one)")
    args = parser.parse_args()
    home = args.home or Path(tempfile.mkdtemp(prefix="mosaic-gui-shots-"))
    os.environ["MOSAIC_HOME"] = str(home)
    args.out.mkdir(parents=True, exist_ok=True)

    from mosaic.clients.gui.drive import close_window, fill, inside, open_window, submit, wait

    _app, loop, window = open_window(home, 1280, 820)
    shots: list[Path] = []

    async def shot(name: str, widget=None) -> None:
        await asyncio.sleep(0.3)  # pending layouts and repaints happen first
        path = args.out / f"{name}.png"
        (widget or window).grab().save(str(path))
        shots.append(path)
        print(f"  {path}")

    async def scenario() -> None:
        await window.start()
        window.tabs.setCurrentWidget(window.catalog)
        await shot("workers")

        ray_runs = []
        for seed in (1, 2):
            form = await fill(window, "ray", seed=seed, **RAY_RUN)
            form._dynamic_forms["algo_params"].set_value(RAY_PARAMS)
            if seed == 1:
                window.tabs.setCurrentWidget(window.new_run)
                await shot("new_run")
            new = await submit(window)
            if not isinstance(new, set):
                raise SystemExit(f"the Ray run was refused: {new}")
            ray_runs.append(new.pop())
        await fill(window, "random", **PISTONBALL)
        (live,) = await submit(window)
        await wait(lambda: window.runs.state_of(ray_runs[0]) == "RUNNING", "the first Ray run to start", 600)
        view = window.open_run(ray_runs[0])
        await wait(lambda: view.curves_panel.points("episode_return_mean") >= 3, "three points on the curve", 900)
        window.tabs.setCurrentWidget(window.runs)
        await shot("runs")
        await wait(lambda: all(window.runs.state_of(r) == "COMPLETED" for r in ray_runs), "the Ray runs", 1800)
        window.tabs.setCurrentWidget(view)
        view.tabs.setCurrentWidget(view.curves_panel)
        await wait(lambda: view.curves_panel.points("episode_return_mean") >= 6, "the whole curve", 60)
        await shot("run_curves")

        frames = window.open_run(live)
        frames.tabs.setCurrentWidget(frames.frames)
        await wait(lambda: frames.frames.frames_shown >= 10, "live frames", 600)
        await shot("run_frames")
        await window.client.control("cancel", live, wait_s=60)

        window.tabs.setCurrentWidget(window.compare)
        window.compare.check(ray_runs)
        await wait(lambda: all(r in window.compare.history for r in ray_runs), "the runs' histories", 120)
        window.compare.group_by.setText("algorithm")
        window.compare.redraw()
        await shot("compare")

    try:
        inside(loop, scenario)
    finally:
        close_window(loop, window, home)
    print(f"{len(shots)} screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
