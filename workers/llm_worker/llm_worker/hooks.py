"""The language-model worker's hooks for the shared command line (mosaic.workerkit.cli)."""

from __future__ import annotations

from typing import Any

from mosaic.errors import ConfigError
from mosaic.workerkit.envs import reward_structure

from llm_worker.config import MAX_AGENTS, LLMWorkerConfig


def envs() -> dict[str, list[str]]:
    """The classic and MPE ids this worker can describe as text, as installed."""
    from llm_worker.text import coverage

    return {family: [i for i, why in coverage(family).items() if why is None] for family in ("classic", "mpe")}


def deep_validate(config: LLMWorkerConfig) -> dict[str, Any]:
    """The env built once with its describer, the players checked, the endpoint reachable; before any run exists."""
    from llm_worker.players import build_env, close_policies, load_policies

    env_cfg = config.environment
    policies = load_policies(config)
    try:
        env, _describer = build_env(config, policies)
    finally:
        close_policies(policies)
    agents = list(env.possible_agents)
    env.close()
    if len(agents) > MAX_AGENTS:
        raise ConfigError("environment.env_kwargs", f"{env_cfg.env_id} has {len(agents)} agents; this worker "
                                                    f"plays at most {MAX_AGENTS}")
    structure = reward_structure(env_cfg.family, env_cfg.env_id)
    if config.coordination == "central_planner" and structure == "competitive":
        raise ConfigError("coordination", f"central_planner plans for a team, and in {env_cfg.env_id} "
                                          "(competitive) every player is alone: use independent or message_round")
    models = [a for a in agents if config.player(a).kind == "llm"]
    if models:
        from mosaic.llm.backends import check_endpoint

        check_endpoint(config.model)
    elif config.theory_of_mind or config.coordination != "independent":
        raise ConfigError("players", "no agent is played by the model, so coordination and theory_of_mind "
                                     "have nothing to do")
    return {"agents": agents, "players": {a: config.player(a).label() for a in agents},
            "reward_structure": structure}


def make_player(target: str, options: dict[str, Any]) -> Any:
    """``--player CONFIG``: a language model as one seat of a match (llm_worker.player)."""
    from llm_worker.player import make_player as player_of

    return player_of(target, options)
