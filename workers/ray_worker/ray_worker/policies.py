"""Which agent is trained by which module, per policy configuration.

Parameter sharing groups agents whose observation and action spaces are
equal (e.g. all pistons; adversaries apart from good agents in simple_tag),
so envs with several agent types still share within each type.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ray_worker.config import PolicyConfiguration, RayWorkerConfig
from ray_worker.environment import EnvInfo, EnvironmentFactory

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


def layout_for(policy: PolicyConfiguration, env: EnvInfo, ctde_actors: str = "per_agent") -> PolicyLayout:
    if policy is PolicyConfiguration.SHARED_VALUE_FUNCTION:
        from ray_worker.ctde_ids import CRITIC_ID

        per = PolicyConfiguration.INDEPENDENT if ctde_actors == "per_agent" else PolicyConfiguration.PARAMETER_SHARING
        actors = layout_for(per, env)
        first = env.agents[0]
        critic = ModuleInfo(env.observation_spaces[first], env.action_spaces[first], ())
        return PolicyLayout({**actors.modules, CRITIC_ID: critic}, actors.agent_to_module,
                            (*actors.trainable, CRITIC_ID))
    if policy is PolicyConfiguration.SELF_PLAY:
        from mosaic.errors import ConfigError
        from ray_worker.self_play import MAIN, SNAPSHOT_PREFIX

        first = env.agents[0]
        unequal = [a for a in env.agents if env.observation_spaces[a] != env.observation_spaces[first]
                   or env.action_spaces[a] != env.action_spaces[first]]
        if len(env.agents) < 2 or unequal:
            raise ConfigError("policy_configuration", "SELF_PLAY needs two or more agents with equal spaces "
                              "(symmetric games such as connect_four_v3); team-wise self-play for envs like "
                              "simple_tag_v3 is not implemented yet")
        info = ModuleInfo(env.observation_spaces[first], env.action_spaces[first], tuple(env.agents))
        frozen = ModuleInfo(info.observation_space, info.action_space, ())
        return PolicyLayout({MAIN: info, f"{SNAPSHOT_PREFIX}0": frozen}, {a: MAIN for a in env.agents}, (MAIN,))
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


def prepare(config: RayWorkerConfig) -> tuple[EnvironmentFactory, EnvInfo, PolicyLayout]:
    """The env factory, the env's agents and spaces, and the module layout of a run."""
    ctde = config.policy_configuration is PolicyConfiguration.SHARED_VALUE_FUNCTION
    factory = EnvironmentFactory(config.environment, global_state=ctde)
    env_info = factory.describe()
    return factory, env_info, layout_for(config.policy_configuration, env_info, config.ctde.actors)
