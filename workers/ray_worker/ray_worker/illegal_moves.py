"""Count illegal moves where they happen: in the PettingZoo env, not in RLlib's episodes.

The counter is reported in every agent's info as ``mosaic_illegal_moves`` (the
game's running total), so a callback can read it from any agent's last info no
matter how RLlib cut the episode into chunks.
"""

from __future__ import annotations

from typing import Any

from pettingzoo.utils.wrappers.base import BaseWrapper

INFO_KEY = "mosaic_illegal_moves"


def _mask(observation: Any, info: Any) -> Any:
    if isinstance(observation, dict) and "action_mask" in observation:
        return observation["action_mask"]
    if isinstance(info, dict):
        return info.get("action_mask")
    return None


class IllegalMoveMonitor(BaseWrapper):
    """AEC wrapper: checks each live agent's action against its current action mask."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.illegal_moves = 0

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        self.illegal_moves = 0
        super().reset(seed=seed, options=options)
        self._publish()

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        live = not (self.terminations.get(agent) or self.truncations.get(agent))
        if live and action is not None:
            mask = _mask(self.observe(agent), self.infos.get(agent))
            if mask is not None and not mask[int(action)]:
                self.illegal_moves += 1
        super().step(action)
        self._publish()

    def _publish(self) -> None:
        for info in self.env.unwrapped.infos.values():
            info[INFO_KEY] = self.illegal_moves
