"""Which agent is trained by which module, per policy configuration.

Parameter sharing groups agents whose observation and action spaces are
equal (e.g. all pistons; adversaries apart from good agents in simple_tag),
so envs with several agent types still share within each type.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from mosaic.errors import ConfigError
from ray_worker.config import PolicyConfiguration, RayWorkerConfig, SelfPlayConfig
from ray_worker.environment import EnvInfo, EnvironmentFactory

SHARED = "shared"
#: The module of a single-agent run: RLlib's own id for it (ray.rllib.core.DEFAULT_MODULE_ID).
SINGLE_AGENT_MODULE = "default_policy"


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
    #: SELF_PLAY: side name -> its agents; fixed baseline modules (never trained, never evicted).
    sides: dict[str, tuple[str, ...]] = field(default_factory=dict)
    baselines: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"modules": {m: list(i.agents) for m, i in self.modules.items()},
                               "trainable": list(self.trainable)}
        if self.sides:
            out["sides"] = {s: list(a) for s, a in self.sides.items()}
        return out


class AgentToModule:
    """RLlib ``policy_mapping_fn``: a plain picklable lookup table."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = dict(mapping)

    def __call__(self, agent_id: str, episode: Any = None, **kwargs: Any) -> str:
        return self.mapping[agent_id]


def _group_name(agents: list[str], index: int) -> str:
    prefix = os.path.commonprefix(agents).rstrip("_0123456789")
    return prefix or f"{SHARED}_{index}"


def _same_spaces(env: EnvInfo, a: str, b: str) -> bool:
    return env.observation_spaces[a] == env.observation_spaces[b] and env.action_spaces[a] == env.action_spaces[b]


def _space_groups(env: EnvInfo) -> tuple[list[str], list[list[str]]]:
    """Agents grouped by equal spaces, and a name per group (its agents' common prefix)."""
    groups: list[list[str]] = []
    for agent in env.agents:
        for group in groups:
            if _same_spaces(env, group[0], agent):
                group.append(agent)
                break
        else:
            groups.append([agent])
    names = [SHARED] if len(groups) == 1 else [_group_name(g, i) for i, g in enumerate(groups)]
    if len(set(names)) != len(names):
        names = [f"{SHARED}_{i}" for i in range(len(groups))]
    return names, groups


def self_play_sides(env: EnvInfo, teams: dict[str, list[str]]) -> dict[str, tuple[str, ...]]:
    """The sides of a self-play run: given teams, one side for symmetric games, else one per agent type."""
    from ray_worker.self_play import ALL_SEATS

    if teams:
        listed = [a for agents in teams.values() for a in agents]
        missing, unknown = set(env.agents) - set(listed), set(listed) - set(env.agents)
        if unknown or missing or len(listed) != len(set(listed)):
            raise ConfigError("self_play.teams", f"must list every agent exactly once; agents: "
                              f"{', '.join(env.agents)}" + (f"; unknown: {sorted(unknown)}" if unknown else "")
                              + (f"; missing: {sorted(missing)}" if missing else ""))
        if len(teams) < 2:
            raise ConfigError("self_play.teams", "needs two or more sides")
        for side, agents in teams.items():
            if any(not _same_spaces(env, agents[0], a) for a in agents):
                raise ConfigError(f"self_play.teams.{side}", "agents of one side must share observation "
                                  "and action spaces (they share one learner)")
        return {str(s): tuple(a) for s, a in teams.items()}
    if len(env.agents) < 2:
        raise ConfigError("policy_configuration", "SELF_PLAY needs two or more agents")
    names, groups = _space_groups(env)
    if len(groups) == 1:
        return {ALL_SEATS: tuple(env.agents)}
    return {n: tuple(g) for n, g in zip(names, groups)}


def self_play_layout(env: EnvInfo, config: SelfPlayConfig | None) -> PolicyLayout:
    """Learners (mains, exploiters), each main's first frozen snapshot, and the fixed baselines."""
    from ray_worker.self_play import MAIN, baseline_id, learner_ids, snapshot_id

    config = config or SelfPlayConfig()
    sides = self_play_sides(env, config.teams)
    unknown = sorted(set(config.win_returns) - set(sides))
    if unknown:
        raise ConfigError("self_play.win_returns", f"{unknown[0]!r} is not a side; sides: {', '.join(sides)}")
    modules: dict[str, ModuleInfo] = {}
    mapping: dict[str, str] = {}
    learners = learner_ids(sides, config.main_exploiters)
    for learner in learners:
        first = sides[learner.side][0]
        spaces = (env.observation_spaces[first], env.action_spaces[first])
        if learner.role == MAIN:
            modules[learner.module_id] = ModuleInfo(*spaces, sides[learner.side])
            mapping.update({a: learner.module_id for a in sides[learner.side]})
            modules[snapshot_id(learner.module_id, 0)] = ModuleInfo(*spaces, ())
        else:
            modules[learner.module_id] = ModuleInfo(*spaces, ())
    baselines = []
    for side, agents in sides.items():
        for name in config.baselines:
            baselines.append(baseline_id(name, side))
            modules[baselines[-1]] = ModuleInfo(env.observation_spaces[agents[0]], env.action_spaces[agents[0]], ())
    return PolicyLayout(modules, mapping, tuple(l.module_id for l in learners), sides, tuple(baselines))


def single_agent_layout(env: EnvInfo) -> PolicyLayout:
    """A single-agent env: its one agent, trained by RLlib's one module ``default_policy``."""
    (agent,) = env.agents
    module = ModuleInfo(env.observation_spaces[agent], env.action_spaces[agent], (agent,))
    return PolicyLayout({SINGLE_AGENT_MODULE: module}, {agent: SINGLE_AGENT_MODULE}, (SINGLE_AGENT_MODULE,))


def layout_for(policy: PolicyConfiguration, env: EnvInfo, ctde_actors: str = "per_agent",
               self_play: SelfPlayConfig | None = None) -> PolicyLayout:
    if env.single_agent:
        return single_agent_layout(env)
    if policy is PolicyConfiguration.SHARED_VALUE_FUNCTION:
        from ray_worker.ctde_ids import CRITIC_ID

        per = PolicyConfiguration.INDEPENDENT if ctde_actors == "per_agent" else PolicyConfiguration.PARAMETER_SHARING
        actors = layout_for(per, env)
        first = env.agents[0]
        critic = ModuleInfo(env.observation_spaces[first], env.action_spaces[first], ())
        return PolicyLayout({**actors.modules, CRITIC_ID: critic}, actors.agent_to_module,
                            (*actors.trainable, CRITIC_ID))
    if policy is PolicyConfiguration.SELF_PLAY:
        return self_play_layout(env, self_play)
    if policy is PolicyConfiguration.INDEPENDENT:
        modules = {a: ModuleInfo(env.observation_spaces[a], env.action_spaces[a], (a,)) for a in env.agents}
        return PolicyLayout(modules, {a: a for a in env.agents}, tuple(env.agents))
    if policy is PolicyConfiguration.PARAMETER_SHARING:
        names, groups = _space_groups(env)
        modules = {n: ModuleInfo(env.observation_spaces[g[0]], env.action_spaces[g[0]], tuple(g))
                   for n, g in zip(names, groups)}
        mapping = {a: n for n, g in zip(names, groups) for a in g}
        return PolicyLayout(modules, mapping, tuple(names))
    raise NotImplementedError(f"{policy.name} is not implemented")


def check_self_play_env(family: str, env_id: str) -> None:
    """Self-play needs someone to beat: refuse envs whose agents all share one goal."""
    from mosaic.workerkit.envs import reward_structure

    structure = reward_structure(family, env_id)
    if structure in ("cooperative", "single"):
        why = ("it has a single agent" if structure == "single" else
               "it is fully cooperative: every agent works toward one shared reward, so no side can win")
        raise ConfigError("policy_configuration", f"SELF_PLAY needs opponents, but {family}/{env_id} has none "
                          f"({why}); use PARAMETER_SHARING, INDEPENDENT or SHARED_VALUE_FUNCTION")


def prepare(config: RayWorkerConfig) -> tuple[EnvironmentFactory, EnvInfo, PolicyLayout]:
    """The env factory, the env's agents and spaces, and the module layout of a run."""
    if config.policy_configuration is PolicyConfiguration.SELF_PLAY:
        check_self_play_env(config.environment.family, config.environment.env_id)
    ctde = config.policy_configuration is PolicyConfiguration.SHARED_VALUE_FUNCTION
    factory = EnvironmentFactory(config.environment, global_state=ctde,
                                 critic_actions=ctde and config.ctde.critic_actions)
    env_info = factory.describe()
    return factory, env_info, layout_for(config.policy_configuration, env_info, config.ctde.actors,
                                         config.self_play)
