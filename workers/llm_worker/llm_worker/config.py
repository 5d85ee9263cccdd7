"""The evaluation's configuration: the shared run fields (``mosaic.workerkit.run_fields``) and the evaluator's own.

Which env (``environment``), how many episodes (``episodes``), who plays each agent
(``players``), which model (``model``) and how the models coordinate.

Cheap to import: the GUI and ``--describe`` read the schema from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

from mosaic import configkit
from mosaic.configkit import option
from mosaic.workerkit.envs import EnvironmentConfig
from mosaic.errors import ConfigError
from mosaic.llm.backends import ModelConfig
from mosaic.workerkit.run_fields import EVALUATOR_REFUSALS, FieldMap, RunConfig

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
DEFAULT_EPISODES = 10

#: How the worker treats the fields every run shares (``docs/llm-worker.md`` shows it as a table).
LLM_FIELDS = FieldMap(
    honoured={
        "algorithm": "always 'llm': the model in `model` plays the agents `players` leaves to it",
        "environment.family": "the PettingZoo family: classic (played AEC) or mpe (played parallel), the "
                              "families with a text describer",
        "environment.env_id": "the versioned PettingZoo id (`--describe` lists those with a text describer)",
        "environment.env_kwargs": "the env constructor's keyword arguments",
        "seed": "episode i is reset with seed + i; also seeds random players and the random fallback for "
                "replies that name no legal action",
        "episodes": "episodes (games) to play",
        "reporting.heartbeat_interval_s": "heartbeats",
        "fastlane": "frames of the env being played",
        "resources.cpus": "CPUs the daemon reserves for the run",
    },
    refused={
        **EVALUATOR_REFUSALS,
        "environment.env_ids": "one env per run",
        "algo_params": "an evaluator: it has no training hyperparameters (the model's settings are under "
                       "`model`)",
        "reporting.every_timesteps": "a `metrics` event every episodes_per_block episodes",
        "resources.threads": "it sets no thread count (the transformers backend and policy players use "
                             "torch's own)",
        "resources.gpus": "no GPU path in this version of the worker",
    })


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
class LLMWorkerConfig(RunConfig):
    """Language models as the agents of a PettingZoo env, evaluated over episodes."""

    FIELDS: ClassVar[FieldMap] = LLM_FIELDS

    algorithm: str = option("llm", help="always 'llm'")
    environment: EnvironmentConfig = option(default_factory=_default_environment,
                                            help="the PettingZoo env (`--describe` lists those with a text "
                                                 "describer); classic games are played AEC, MPE parallel")
    seed: int = option(0, min=0, help="episode i is reset with seed + i; also seeds random players and the "
                                      "random fallback for replies that name no legal action")
    episodes: int | None = option(DEFAULT_EPISODES, min=1, help="episodes (games) to play")
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

    @classmethod
    def algorithms(cls) -> Sequence[str]:
        return ("llm",)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LLMWorkerConfig":
        # the families this worker plays, before the generic check (whose allowed list is every PettingZoo family)
        family = (data.get("environment") or {}).get("family") if isinstance(data, Mapping) else None
        if isinstance(family, str) and family and family not in API_TYPE_OF_FAMILY:
            raise ConfigError("environment.family", f"{family!r} has no text describer here; allowed: "
                                                    f"{', '.join(API_TYPE_OF_FAMILY)}")
        config = configkit.from_dict(cls, data)
        config.check_shared()
        if config.episodes is None:
            config.episodes = DEFAULT_EPISODES
        env = config.environment
        wanted = API_TYPE_OF_FAMILY[env.family]  # a family without a describer was refused above
        given = (data.get("environment") or {}).get("api_type") if isinstance(data, Mapping) else None
        if given is not None and given != wanted:
            raise ConfigError("environment.api_type", f"{env.family} envs are played {wanted} by this worker; "
                                                      f"allowed: {wanted} (or leave api_type out)")
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
    del data["run_id"], data["worker"]
    return data
