"""Which agent is trained by which module, per policy configuration.

Parameter sharing groups agents whose observation and action spaces are
equal (e.g. all pistons; adversaries apart from good agents in simple_tag),
so envs with several agent types still share within each type.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ray_worker.config import PolicyConfiguration
from ray_worker.environment import EnvInfo

SHARED = "shared"


@dataclass(frozen=True)
class ModuleInfo:
    observation_space: Any
    action_space: Any
    agents: tuple[str, ...]


@dataclass(frozen=True)
class PolicyLayout:
    modules: dict[str, ModuleInfo]
    agent_to_module: dict[str, str]
    trainable: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"modules": {m: list(i.agents) for m, i in self.modules.items()},
                "trainable": list(self.trainable)}


class AgentToModule:
    """RLlib ``policy_mapping_fn``: a plain picklable lookup table."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = dict(mapping)

    def __call__(self, agent_id: str, episode: Any = None, **kwargs: Any) -> str:
        return self.mapping[agent_id]


def _group_name(agents: list[str], index: int) -> str:
    prefix = os.path.commonprefix(agents).rstrip("_0123456789")
    return prefix or f"{SHARED}_{index}"


def layout_for(policy: PolicyConfiguration, env: EnvInfo) -> PolicyLayout:
    if policy is PolicyConfiguration.INDEPENDENT:
        modules = {a: ModuleInfo(env.observation_spaces[a], env.action_spaces[a], (a,)) for a in env.agents}
        return PolicyLayout(modules, {a: a for a in env.agents}, tuple(env.agents))
    if policy is PolicyConfiguration.PARAMETER_SHARING:
        groups: list[list[str]] = []
        for agent in env.agents:
            for group in groups:
                first = group[0]
                if (env.observation_spaces[first] == env.observation_spaces[agent]
                        and env.action_spaces[first] == env.action_spaces[agent]):
                    group.append(agent)
                    break
            else:
                groups.append([agent])
        names = [SHARED] if len(groups) == 1 else [_group_name(g, i) for i, g in enumerate(groups)]
        if len(set(names)) != len(names):
            names = [f"{SHARED}_{i}" for i in range(len(groups))]
        modules = {n: ModuleInfo(env.observation_spaces[g[0]], env.action_spaces[g[0]], tuple(g))
                   for n, g in zip(names, groups)}
        mapping = {a: n for n, g in zip(names, groups) for a in g}
        return PolicyLayout(modules, mapping, tuple(names))
    raise NotImplementedError(f"{policy.name} is not implemented")
