"""RLlib callbacks that feed MOSAIC telemetry, hooked in through RLlib's own API.

Env runners (possibly remote actors) cannot write to the worker's stdout, so
each finished episode is logged as an item into RLlib's metrics logger; RLlib
carries the items to the driver with the iteration's results, where the
runtime turns them into ``episode`` and ``metrics`` events.
"""

from __future__ import annotations

from typing import Any

from ray.rllib.callbacks.callbacks import RLlibCallback

from ray_worker.environment import SINGLE_AGENT
from ray_worker.illegal_moves import INFO_KEY
from ray_worker.policies import SINGLE_AGENT_MODULE

EPISODES_KEY = "mosaic_episodes"


def episode_record(episode: Any, prev_chunks: list | None = None) -> dict[str, Any]:
    """Per-agent returns, modules, illegal moves (counted in the env) and length of an episode.

    A single-agent episode (RLlib's ``SingleAgentEpisode``, of a Gymnasium env) is one agent's,
    ``agent_0``, played by the module ``default_policy``.
    """
    returns: dict[str, float] = {}
    modules: dict[str, str] = {}
    illegal = 0
    length = 0
    for chunk in [*(prev_chunks or []), episode]:
        length += chunk.env_steps()
        if not hasattr(chunk, "agent_episodes"):
            returns[SINGLE_AGENT] = returns.get(SINGLE_AGENT, 0.0) + float(chunk.get_return())
            modules[SINGLE_AGENT] = str(chunk.module_id or SINGLE_AGENT_MODULE)
            continue
        for agent_id, agent_episode in chunk.agent_episodes.items():
            aid = str(agent_id)
            returns[aid] = returns.get(aid, 0.0) + float(agent_episode.get_return())
            if agent_episode.module_id is not None:
                modules[aid] = str(agent_episode.module_id)
            infos = agent_episode.get_infos()
            if len(infos):
                illegal = max(illegal, int((infos[-1] or {}).get(INFO_KEY, 0)))
    return {"returns": returns, "modules": modules, "length": int(length), "illegal_actions": illegal}


class MosaicCallbacks(RLlibCallback):
    def on_episode_end(self, *, episode: Any, prev_episode_chunks: list | None = None,
                       metrics_logger: Any = None, **kwargs: Any) -> None:
        if metrics_logger is not None:
            metrics_logger.log_value(EPISODES_KEY, episode_record(episode, prev_episode_chunks),
                                     reduce="item_series")
