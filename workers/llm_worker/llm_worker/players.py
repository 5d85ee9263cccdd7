"""The env, and the trained policies that play beside (or against) the language models.

A ``policy`` player is a module from a Ray worker checkpoint, played without Ray by
the Ray worker's policy actor. It must see exactly the observations it was trained
on, so when any agent is a policy the env is built by the Ray worker's own
environment factory from the checkpoint's recorded environment (the text the
models read comes from the env beneath, so it does not change). The checkpoint
must have been trained on the same env id and settings: anything else is refused
before the run starts, naming the player.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from mosaic.errors import ConfigError, UserError

from llm_worker.config import LLMWorkerConfig, PlayerConfig
from llm_worker.text import Describer, Unsupported, api_type, describer_for


@dataclass
class PolicyPlayer:
    """One checkpoint; a module per seat it is given (the one trained for that agent, or the configured one)."""

    config: PlayerConfig
    field_path: str
    info: Any = None
    actors: dict[str, Any] = field(default_factory=dict)

    def load(self) -> "PolicyPlayer":
        try:
            from ray_worker.policy_actor import read_checkpoint
        except ImportError:
            raise ConfigError(f"{self.field_path}.kind", "policy players need the Ray worker (mosaic-ray-worker) "
                                                         "installed beside this worker") from None
        try:
            self.info = read_checkpoint(self.config.checkpoint)
        except UserError as exc:
            raise ConfigError(f"{self.field_path}.checkpoint", str(exc)) from None
        if self.config.module_id is not None and self.config.module_id not in self.info.modules:
            raise ConfigError(f"{self.field_path}.module_id", f"{self.config.module_id!r} is not in "
                                                              f"{self.info.path}; modules: {', '.join(self.info.modules)}")
        return self

    def actor_for(self, agent: str) -> Any:
        if agent not in self.actors:
            from ray_worker.policy_actor import RayPolicyConfig, create_ray_actor

            module = self.config.module_id or self.info.state.agent_to_module.get(agent)
            self.actors[agent] = create_ray_actor(RayPolicyConfig(str(self.info.path), module_id=module,
                                                                  deterministic=self.config.deterministic))
        return self.actors[agent]


def load_policies(config: LLMWorkerConfig) -> dict[str, PolicyPlayer]:
    """Each distinct policy player, by its label, with its checkpoint read and checked against the env."""
    out: dict[str, PolicyPlayer] = {}
    env_cfg = config.environment
    for agent, player in config.players.items():
        if player.kind != "policy" or player.label() in out:
            continue
        policy = PolicyPlayer(player, f"players.{agent}").load()
        trained = trained_environment(policy.info)
        for key, mine in (("family", env_cfg.family), ("env_id", env_cfg.env_id)):
            if trained.get(key) != mine:
                raise ConfigError(f"players.{agent}.checkpoint", f"was trained on {trained.get('family')}/"
                                                                 f"{trained.get('env_id')}, not {env_cfg.family}/"
                                                                 f"{env_cfg.env_id}")
        if env_cfg.env_kwargs and dict(trained.get("env_kwargs") or {}) != dict(env_cfg.env_kwargs):
            raise ConfigError("environment.env_kwargs", f"{env_cfg.env_kwargs} differs from what "
                                                        f"players.{agent}.checkpoint was trained with "
                                                        f"({trained.get('env_kwargs') or {}})")
        out[player.label()] = policy
    return out


def trained_environment(info: Any) -> dict[str, Any]:
    """The ``environment`` section of the Ray run a checkpoint comes from, whichever config shape it had.

    The checkpoint's own state records it. Where it does not, the run's ``config.json``
    beside ``checkpoints/`` is read: ``environment`` sits at its top level both before the
    shared run fields (``training.algorithm``, ``resources.num_workers``) and after them
    (``algorithm``, ``rllib``, ``resources`` at the top level), so both shapes are read the same.
    """
    recorded = getattr(info, "environment", None)
    if isinstance(recorded, Mapping) and recorded:
        return dict(recorded)
    import json
    from pathlib import Path

    for folder in Path(info.path).parents[:2]:
        config = folder / "config.json"
        if config.is_file():
            try:
                data = json.loads(config.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                break
            section = data.get("environment") if isinstance(data, Mapping) else None
            if isinstance(section, Mapping):
                return dict(section)
            break
    return {}


def ray_environment(info: Any, api: str) -> Any:
    """The Ray worker's environment config for the env a checkpoint was trained on, played through ``api``.

    Read defensively: the Ray worker's env config class is ``RayEnvironmentConfig`` now
    (``EnvironmentConfig`` before), and keys one version writes that the other does not know
    (``env_ids`` of the shared ``environment``) are left out.
    """
    import dataclasses

    from mosaic import configkit
    from ray_worker import config as ray_config

    cls = getattr(ray_config, "RayEnvironmentConfig", None) or ray_config.EnvironmentConfig
    known = {f.name for f in dataclasses.fields(cls)}
    data = {k: v for k, v in trained_environment(info).items() if k in known}
    data["api_type"] = api
    return configkit.from_dict(cls, data, "environment")


def build_env(config: LLMWorkerConfig, policies: dict[str, PolicyPlayer], render_mode: str | None = None
              ) -> tuple[Any, Describer]:
    """The env (through the Ray worker's factory when a policy plays) and its describer."""
    env_cfg = config.environment
    if policies:
        from ray_worker.environment import EnvironmentFactory

        first = next(iter(policies.values()))
        env, _ = EnvironmentFactory(ray_environment(first.info, api_type(env_cfg.family))
                                    ).make_pettingzoo(render_mode)
    else:
        env = env_cfg.make(render_mode)
    try:
        env.reset(seed=config.seed)
        describer = describer_for(env_cfg.family, env_cfg.env_id, env)
    except Unsupported as exc:
        env.close()
        raise ConfigError("environment.env_id", str(exc)) from None
    for agent, player in config.players.items():
        if agent not in env.possible_agents:
            env.close()
            raise ConfigError(f"players.{agent}", f"{env_cfg.env_id} has no agent {agent!r}; its agents: "
                                                  f"{', '.join(env.possible_agents)}")
    for label, policy in policies.items():
        seats = [a for a in env.possible_agents if config.player(a).label() == label]
        if config.alternate_seats and len(env.possible_agents) == 2:
            seats = list(env.possible_agents)
        for agent in seats:
            actor = policy.actor_for(agent)
            try:
                actor.check_space(agent, env.observation_space(agent), env.action_space(agent))
            except UserError as exc:
                env.close()
                raise ConfigError(f"{policy.field_path}.checkpoint", str(exc)) from None
    return env, describer
