"""The env, and the trained policies that play beside (or against) the language models.

A ``policy`` player is a trained run's policy served by the worker that trained it, in that worker's own
environment, through the player protocol of the worker contract (``mosaic player CHECKPOINT``,
:mod:`mosaic.workerkit.player`): this worker never imports another. The env is built here, raw, from this
run's own ``environment``; each policy player gets its agent's raw observation and encodes it as its
training did. A checkpoint trained on another env id or other env settings is refused before the run
starts, naming the player.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

from mosaic.errors import ConfigError
from mosaic.workerkit.player import PlayerError, PlayerProcess

from llm_worker.config import LLMWorkerConfig, PlayerConfig
from llm_worker.text import Describer, Unsupported, describer_for


@dataclass
class PolicyPlayer:
    """One checkpoint's player process; it acts for every seat it is given."""

    config: PlayerConfig
    field_path: str
    process: PlayerProcess | None = None

    def load(self) -> "PolicyPlayer":
        options: dict[str, Any] = {"deterministic": self.config.deterministic}
        if self.config.module_id is not None:
            options["module_id"] = self.config.module_id
        command = [sys.executable, "-m", "mosaic", "player", str(self.config.checkpoint), "--options",
                   json.dumps(options)]
        try:
            self.process = PlayerProcess(command, label=self.config.label())
        except PlayerError as exc:
            raise ConfigError(f"{self.field_path}.checkpoint", _reason(str(exc))) from None
        return self

    @property
    def environment(self) -> dict[str, Any]:
        return self.process.environment if self.process else {}

    def actor_for(self, agent: str) -> Any:
        return self.process.seat([agent]).actor_for(agent)

    def close(self) -> None:
        if self.process is not None:
            self.process.close()


def _reason(message: str) -> str:
    """A player's failure without the process wrapping: the worker's own ``mosaic: error:`` line."""
    marker = "mosaic: error: "
    return message.split(marker, 1)[1].strip() if marker in message else message


def close_policies(policies: dict[str, PolicyPlayer]) -> None:
    for policy in policies.values():
        policy.close()


def load_policies(config: LLMWorkerConfig) -> dict[str, PolicyPlayer]:
    """Each distinct policy player, by its label, started and checked against this run's env."""
    out: dict[str, PolicyPlayer] = {}
    env_cfg = config.environment
    try:
        for agent, player in config.players.items():
            if player.kind != "policy" or player.label() in out:
                continue
            policy = PolicyPlayer(player, f"players.{agent}").load()
            out[player.label()] = policy
            trained = policy.environment
            for key, mine in (("family", env_cfg.family), ("env_id", env_cfg.env_id)):
                if trained.get(key) != mine:
                    raise ConfigError(f"players.{agent}.checkpoint", f"was trained on {trained.get('family')}/"
                                                                     f"{trained.get('env_id')}, not {env_cfg.family}/"
                                                                     f"{env_cfg.env_id}")
            theirs, ours = dict(trained.get("env_kwargs") or {}), dict(env_cfg.env_kwargs or {})
            if theirs != ours:
                raise ConfigError("environment.env_kwargs", f"{ours} differs from what players.{agent}.checkpoint "
                                                            f"was trained with ({theirs})")
    except BaseException:
        close_policies(out)
        raise
    return out


def build_env(config: LLMWorkerConfig, policies: dict[str, PolicyPlayer], render_mode: str | None = None
              ) -> tuple[Any, Describer]:
    """The env, raw, and its describer; every policy player seated at its agents."""
    env_cfg = config.environment
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
        try:
            policy.process.seat(seats)
        except PlayerError as exc:
            env.close()
            raise ConfigError(f"{policy.field_path}.checkpoint", str(exc)) from None
    return env, describer
