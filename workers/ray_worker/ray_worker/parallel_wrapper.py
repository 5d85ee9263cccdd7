"""A PettingZoo parallel env wrapper that passes everything through unless overridden."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
from pettingzoo.utils.env import ParallelEnv


class ParallelPassThrough(ParallelEnv):
    """Subclasses change observations; agents, actions, state, rendering stay the inner env's."""

    def __init__(self, env: ParallelEnv) -> None:
        self.env = env
        self.metadata = getattr(env, "metadata", {})
        self.possible_agents = list(env.possible_agents)
        self.render_mode = getattr(env, "render_mode", None)

    @property
    def agents(self) -> list[str]:
        return self.env.agents

    def action_space(self, agent: str) -> gym.Space:
        return self.env.action_space(agent)

    def state(self) -> Any:
        return self.env.state()

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    @property
    def unwrapped(self) -> Any:
        return self.env.unwrapped
