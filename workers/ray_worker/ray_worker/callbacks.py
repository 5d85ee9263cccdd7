"""RLlib callbacks that feed MOSAIC telemetry, hooked in through RLlib's own API.

Env runners (possibly remote actors) cannot write to the worker's stdout, so
each finished episode is logged as an item into RLlib's metrics logger; RLlib
carries the items to the driver with the iteration's results, where the
runtime turns them into ``episode`` and ``metrics`` events.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.callbacks.callbacks import RLlibCallback

EPISODES_KEY = "mosaic_episodes"


def count_illegal(observations: Any, actions: Any) -> int:
    """Actions whose entry in the observed ``action_mask`` was 0."""
    if isinstance(observations, dict):
        masks = observations.get("action_mask")
    elif isinstance(observations, (list, tuple)) and observations and isinstance(observations[0], dict):
        masks = [o.get("action_mask") for o in observations]
        if any(m is None for m in masks):
            return 0
    else:
        return 0
    if masks is None:
        return 0
    masks = np.asarray(masks)
    acts = np.asarray(actions).astype(np.int64).reshape(-1)
    n = min(len(acts), len(masks))  # the last observation has no action
    if n == 0:
        return 0
    return int((masks[np.arange(n), acts[:n]] == 0).sum())


def episode_record(episode: Any, prev_chunks: list | None = None) -> dict[str, Any]:
    """Per-agent returns, modules, illegal-action count and length of a finished episode."""
    returns: dict[str, float] = {}
    modules: dict[str, str] = {}
    illegal = 0
    length = 0
    for chunk in [*(prev_chunks or []), episode]:
        length += chunk.env_steps()
        for agent_id, agent_episode in chunk.agent_episodes.items():
            aid = str(agent_id)
            returns[aid] = returns.get(aid, 0.0) + float(agent_episode.get_return())
            if agent_episode.module_id is not None:
                modules[aid] = str(agent_episode.module_id)
            steps = len(agent_episode)
            if steps:
                illegal += count_illegal(agent_episode.get_observations(slice(0, steps)),
                                         agent_episode.get_actions(slice(0, steps)))
    return {"returns": returns, "modules": modules, "length": int(length), "illegal_actions": illegal}


class MosaicCallbacks(RLlibCallback):
    def on_episode_end(self, *, episode: Any, prev_episode_chunks: list | None = None,
                       metrics_logger: Any = None, **kwargs: Any) -> None:
        if metrics_logger is not None:
            metrics_logger.log_value(EPISODES_KEY, episode_record(episode, prev_episode_chunks),
                                     reduce="item_series")
