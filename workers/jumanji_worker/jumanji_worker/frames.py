"""Pictures of Jumanji states drawn by Jumanji's own viewers (matplotlib, off screen).

Every Jumanji env draws a state with ``env.render(state)`` through its viewer;
built with ``render_mode="rgb_array"`` the viewer returns the picture as an RGB
array. Training runs inside compiled JAX code, so there is no step to watch:
once per epoch the worker draws env 0 of the training batch as it stands
(:class:`EpochFrames`), through FastLane.
"""

from __future__ import annotations

import os
from typing import Any


def headless() -> None:
    """Before matplotlib is imported: draw off screen."""
    os.environ.setdefault("MPLBACKEND", "Agg")


def drawing_env(registered_version: str) -> Any:
    """``jumanji.make(registered_version)`` whose viewer returns RGB arrays instead of showing a window."""
    import jumanji

    env = jumanji.make(registered_version)
    viewer = getattr(env, "_viewer", None)
    if viewer is None:
        raise ValueError(f"{registered_version} has no viewer")
    return jumanji.make(registered_version, viewer=type(viewer)(name=viewer._name, render_mode="rgb_array"))


def one_state(batched: Any, *index: int) -> Any:
    """One env's state out of a batched (devices × envs) state, as numpy arrays."""
    import jax
    import numpy as np

    def pick(x: Any) -> Any:
        for i in index:
            x = x[i]
        return np.asarray(x)

    return jax.tree_util.tree_map(pick, batched)


class EpochFrames:
    """A FastLane stream ``main``: env 0 of the training batch drawn after each epoch."""

    def __init__(self, run_id: str, run_dir: str, config: Any, registered_version: str) -> None:
        from mosaic.fastlane.config import FastLaneTarget
        from mosaic.fastlane.publisher import Publisher

        self.lane = Publisher(FastLaneTarget(run_id, run_dir, config), "main")
        try:
            self.env = drawing_env(registered_version)
        except Exception as exc:  # a viewer that cannot draw off screen: no frames, training goes on
            self.env = None
            self.lane.fail(f"{type(exc).__name__}: {exc}")

    def offer(self, training_state: Any, epoch: int, measures: dict[str, float]) -> None:
        if self.env is None or training_state is None or not self.lane.due():
            return
        state = one_state(training_state.acting_state.state, 0, 0)
        self.lane.offer(lambda: self.env.render(state), epoch, epoch, measures)

    def close(self) -> None:
        self.lane.close()
        if self.env is not None:
            try:
                self.env.close()
            except Exception:
                pass
