"""The evaluation's configuration: which env, who plays each agent, how the models coordinate.

Cheap to import: the GUI and ``--describe`` read the schema from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from mosaic import configkit
from mosaic.configkit import option
from mosaic.envs import EnvironmentConfig
from mosaic.errors import ConfigError
from mosaic.fastlane.config import FastLaneConfig
from mosaic.llm.backends import ModelConfig

#: How the language-model agents decide, each with what it costs per decision.
COORDINATION = {
    "independent": "each agent is asked on its own, from its own view (one call per agent and decision)",
    "message_round": "each agent first writes a short message to the others, then acts having read theirs "
                     "(two calls per agent and decision)",
    "central_planner": "one call per team sees every teammate's view and names an action for each "
                       "(cooperative and mixed envs; teams are the agents sharing a name prefix)",
}
PLAYER_KINDS = ("llm", "random", "policy")
#: Classic games are turn-based (AEC); MPE agents move at the same time (parallel).
API_TYPE_OF_FAMILY = {"classic": "AEC", "mpe": "PARALLEL"}
MAX_AGENTS = 8


@dataclass
class PlayerConfig:
    """Who plays one agent."""

    kind: str = option("llm", choices=PLAYER_KINDS,
                       help="llm: the configured model; random: a uniformly random legal action; "
                            "policy: a policy from a Ray worker checkpoint (played without Ray)")
    checkpoint: str | None = option(None, help="policy: a Ray worker checkpoint folder, or a run folder "
                                               "(its latest checkpoint)")
    module_id: str | None = option(None, help="policy: which module plays; default: the one the run trained "
                                              "for this agent, else its main one")
    deterministic: bool = option(True, help="policy: the likeliest action (false: sampled)")

    def label(self) -> str:
        if self.kind != "policy":
            return self.kind
        name = (self.checkpoint or "").rstrip("/").split("/")[-1]
        return f"policy:{name}" + (f"/{self.module_id}" if self.module_id else "")


def _default_environment() -> EnvironmentConfig:
    return EnvironmentConfig(family="classic", env_id="tictactoe_v3", api_type="AEC")


@dataclass
class LLMWorkerConfig:
    """Language models as the agents of a PettingZoo env, evaluated over episodes."""

    run_id: str = option(help="run id (set by MOSAIC)")
    seed: int = option(0, min=0, help="episode i is reset with seed + i; also seeds random players and the "
                                      "random fallback for replies that name no legal action")
    environment: EnvironmentConfig = option(default_factory=_default_environment,
                                            help="the PettingZoo env (`--describe` lists those with a text "
                                                 "describer); classic games are played AEC, MPE parallel")
    episodes: int = option(10, min=1, help="episodes (games) to play")
    max_steps: int | None = option(None, min=1, help="cut an episode after this many env steps; default: "
                                                     "the env's own end")
    players: dict[str, PlayerConfig] = option(default_factory=dict,
                                              help="agent id -> who plays it; agents not named are played "
                                                   "by the model")
    alternate_seats: bool = option(True, help="two-agent envs with different players: swap the players' seats "
                                              "every other episode, so each plays both sides equally often")
    coordination: str = option("independent", choices=tuple(COORDINATION),
                               help="how the model's agents decide: " + "; ".join(
                                   f"{k}: {v}" for k, v in COORDINATION.items()))
    theory_of_mind: bool = option(False, help="before acting, each model agent predicts every other agent's "
                                              "next action; predictions are scored against the actions taken")
    message_words: int = option(30, min=1, help="message_round: longest message, in words (the rest is cut)")
    history: int = option(2, min=0, help="earlier turns of this agent (view and action) repeated in its prompt")
    retries_per_action: int = option(1, min=0, help="times a reply naming no legal action is asked again "
                                                    "before a random legal action is played (counted invalid)")
    episodes_per_block: int = option(5, min=1, help="episodes per `metrics` event (win rates so far, etc.)")
    model: ModelConfig = option(default_factory=ModelConfig, help="the model that plays, and the run's budget")
    heartbeat_interval_s: float = option(5.0, min=0.1, help="seconds between heartbeats")
    fastlane: FastLaneConfig = option(default_factory=FastLaneConfig,
                                      help="stream the env's frames to `mosaic watch` (shared memory)")

    def to_dict(self) -> dict[str, Any]:
        return configkit.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LLMWorkerConfig":
        config = configkit.from_dict(cls, data)
        env = config.environment
        if env.family not in API_TYPE_OF_FAMILY:
            raise ConfigError("environment.family", f"{env.family!r} has no text describer here; families with "
                                                    f"one: {', '.join(API_TYPE_OF_FAMILY)}")
        wanted = API_TYPE_OF_FAMILY[env.family]
        given = (data.get("environment") or {}).get("api_type") if isinstance(data, Mapping) else None
        if given is not None and given != wanted:
            raise ConfigError("environment.api_type", f"{env.family} envs are played {wanted} by this worker "
                                                      f"(leave api_type out, or set it to {wanted})")
        env.api_type = wanted
        for agent, player in config.players.items():
            if player.kind == "policy" and not player.checkpoint:
                raise ConfigError(f"players.{agent}.checkpoint", "a policy player needs a Ray worker checkpoint "
                                                                 "(or run folder)")
            if player.kind != "policy" and (player.checkpoint or player.module_id):
                raise ConfigError(f"players.{agent}.checkpoint", f"only a policy player has a checkpoint; "
                                                                 f"this one is {player.kind}")
        return config

    def player(self, agent: str) -> PlayerConfig:
        return self.players.get(agent) or PlayerConfig()


def default_config() -> dict[str, Any]:
    data = LLMWorkerConfig(run_id="unset").to_dict()
    del data["run_id"]
    return data
