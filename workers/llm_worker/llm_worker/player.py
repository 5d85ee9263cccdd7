"""A language model as a player of a match (``--player CONFIG``, :mod:`mosaic.workerkit.player`).

The arena (or ``mosaic eval --opponent``) seats a model by a **player config**, a JSON or YAML file::

    worker: mosaic_llm
    label: gpt-local                    # default: the file's stem
    environment: {family: classic, env_id: connect_four_v3, env_kwargs: {}}
    model: {base_url: http://127.0.0.1:8000/v1, model: ..., api_key_env: OPENAI_API_KEY}
    theory_of_mind: false
    history: 2
    retries_per_action: 1

``model``, ``theory_of_mind``, ``history`` and ``retries_per_action`` are the worker's own run-config fields
(:class:`llm_worker.config.LLMWorkerConfig`: the same names, defaults, bounds and errors). A player decides
for one seat at a time, so the run's ``coordination``, ``players`` and ``episodes`` have no place here.

The match sends the env's raw observation of the agent to move, not the env. The worker's describers read
the env's state (``env.unwrapped``), so each turn the part of that state a describer reads is rebuilt from
the observation (the board from its two planes; rock-paper-scissors' last throw is the observation) and
the describer is run on it: the prompt is the one the worker's own games show at that point. The action is
then chosen exactly as there (:func:`mosaic.llm.actions.choose_action`: a reply naming no legal move is
asked again, then replaced by a random legal move from the game's seeded generator and counted invalid).

Only the games whose describer reads no more than one agent's observation are served: the classic
two-player games with a describer (tic-tac-toe, connect four, rock-paper-scissors). MPE's describers read
the whole world (every agent's velocity, who is the adversary), which one observation does not hold.

With ``theory_of_mind`` the model first predicts the other agent's next action, as in the worker's games;
the prediction is scored at the model's next turn, when the observation shows what the other played.
Totals (decisions, invalid replies, tokens, seconds, cost, theory-of-mind accuracy) go to stderr as one
JSON line per game and one at exit.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping

import numpy as np

from mosaic import configkit
from mosaic.configkit import option
from mosaic.errors import ConfigError, UserError
from mosaic.llm.actions import choose_action
from mosaic.llm.backends import ModelConfig

from llm_worker import coordination as co
from llm_worker.config import LLMWorkerConfig
from llm_worker.text import CLASSIC, Describer, Unsupported, View, describer_for

WORKER = "mosaic_llm"


# -- what a describer reads, rebuilt from one observation -------------------------------------------------
def _cells(observation: Any, seat: int) -> list[int]:
    """A classic board game's cells (1: the first agent's mark, 2: the second's, 0: empty), in the env's own
    order, from the two planes of ``seat``'s observation (its own marks, then the other's)."""
    planes = np.asarray(observation["observation"]).reshape(-1, 2)
    mine, theirs = seat + 1, 2 - seat
    return [mine if own else theirs if other else 0 for own, other in planes.tolist()]


def _placed(before: Any, now: Any) -> list[int]:
    """Cells the other agent marked between two observations of the same seat."""
    if before is None:
        return []
    old = np.asarray(before["observation"])[..., 1].reshape(-1)
    new = np.asarray(now["observation"])[..., 1].reshape(-1)
    return [int(i) for i in np.flatnonzero((new != 0) & (old == 0))]


def _one(cells: list[int], to_action: Callable[[int], int]) -> int | None:
    return to_action(cells[0]) if len(cells) == 1 else None


@dataclass(frozen=True)
class Game:
    """How one game's observation feeds its describer."""

    #: (observation, seat index) -> the attributes of ``env.unwrapped`` the describer reads.
    state: Callable[[Any, int], dict[str, Any]]
    #: (the seat's previous observation or None, its observation now, describer) -> the action index the other
    #: agent played in between, or None when the observation does not tell.
    their_move: Callable[[Any, Any, Describer], int | None]
    #: Both agents throw at once each round: the returns so far are got by replaying each round in the env.
    rounds: bool = False


GAMES: dict[str, Game] = {
    "tictactoe_v3": Game(state=lambda obs, seat: {"board": SimpleNamespace(squares=_cells(obs, seat))},
                         their_move=lambda before, now, d: _one(_placed(before, now), lambda cell: cell)),
    "connect_four_v3": Game(state=lambda obs, seat: {"board": _cells(obs, seat)},
                            their_move=lambda before, now, d: _one(_placed(before, now), lambda cell: cell % 7)),
    "rps_v2": Game(state=lambda obs, seat: {},
                   their_move=lambda before, now, d: int(np.asarray(now)) if int(np.asarray(now)) < d.n else None,
                   rounds=True),
}
#: The env ids a language-model player serves: a describer that one observation can feed.
PLAYABLE = tuple(sorted(set(GAMES) & set(CLASSIC)))


class _Seen:
    """What a describer reads of an env (``env.unwrapped``), rebuilt from the observation of the agent to move."""

    def __init__(self, env: Any, agent: str, observation: Any, state: Mapping[str, Any]) -> None:
        self.possible_agents = list(env.possible_agents)
        self._env, self._agent, self._observation = env, agent, observation
        self.__dict__.update(state)

    @property
    def unwrapped(self) -> "_Seen":
        return self

    def action_space(self, agent: str) -> Any:
        return self._env.action_space(agent)

    def observe(self, agent: str) -> Any:
        if agent != self._agent:
            raise UserError(f"the player was shown {self._agent}'s observation, not {agent}'s")
        return self._observation


# -- the player config ---------------------------------------------------------------------------------------
def _worker_field(name: str) -> Any:
    """The worker's own run-config field ``name``: its default, bounds, choices and help."""
    found = {f.name: f for f in dataclasses.fields(LLMWorkerConfig)}[name]
    if found.default is not dataclasses.MISSING:
        return dataclasses.field(default=found.default, metadata=found.metadata)
    return dataclasses.field(default_factory=found.default_factory, metadata=found.metadata)


@dataclass
class PlayedEnvironment:
    """The game the player plays; a match on another one is refused before it starts."""

    family: str = option(help="the PettingZoo family: classic (the families whose describers one agent's "
                              "observation can feed)")
    env_id: str = option(help=f"the versioned PettingZoo id; one of {', '.join(PLAYABLE)}")
    env_kwargs: dict = option(default_factory=dict, help="the env constructor's keyword arguments (a match "
                                                         "with others is refused)")


@dataclass(kw_only=True)
class LLMPlayerConfig:
    """A language model as one seat of a match (``mosaic player FILE``)."""

    worker: str = option(WORKER, choices=(WORKER,), help="the worker that serves this player")
    label: str | None = option(None, help="the player's name in matches and ratings; default: the file's stem")
    environment: PlayedEnvironment = option(help="the game it plays")
    model: ModelConfig = _worker_field("model")
    theory_of_mind: bool = _worker_field("theory_of_mind")
    history: int = _worker_field("history")
    retries_per_action: int = _worker_field("retries_per_action")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "LLMPlayerConfig":
        config = configkit.from_dict(cls, data)
        env = config.environment
        if env.family != "classic":
            raise ConfigError("environment.family", f"{env.family!r} cannot be played by a language-model player "
                                                    "(it is given one agent's observation; MPE's describers read "
                                                    "the whole world); allowed: classic")
        if env.env_id not in PLAYABLE:
            raise ConfigError("environment.env_id", f"{env.env_id!r} has no text describer a player can feed "
                                                    f"from one observation; allowed: {', '.join(PLAYABLE)}")
        return config


def _merged(document: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` (``--player-options``) over ``document``, objects merged field by field."""
    out = dict(document)
    for key, value in options.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = value
    return out


# -- the player ----------------------------------------------------------------------------------------------
@dataclass
class LLMPlayer:
    config: LLMPlayerConfig
    label: str
    env: Any
    describer: Describer
    client: Any
    agents: tuple[str, ...] = ()  # any seat of the game
    environment: dict[str, Any] = field(default_factory=dict)
    games: int = 0
    decisions: int = 0
    invalid: int = 0
    scored: list[co.Scored] = field(default_factory=list)

    @classmethod
    def load(cls, target: str, options: Mapping[str, Any] | None = None, check: bool = True) -> "LLMPlayer":
        """The player of config file ``target``; ``options`` override its fields. ``check``: refuse a model
        whose key variable is unset or whose endpoint nobody answers at, as a run's ``--dry-run`` does."""
        from mosaic.llm.backends import check_endpoint, make_client
        from mosaic.workerkit.envs import make_env

        path = Path(target)
        document = configkit.read_document(path, "player")
        config = LLMPlayerConfig.from_dict(_merged(document, dict(options or {})))
        env_cfg = config.environment
        env = make_env(env_cfg.family, env_cfg.env_id, "AEC", env_cfg.env_kwargs, None, "environment")
        try:
            env.reset(seed=0)
            describer = describer_for(env_cfg.family, env_cfg.env_id, env)
            if check:
                check_endpoint(config.model)
            client = make_client(config.model)
        except Unsupported as exc:
            env.close()
            raise ConfigError("environment.env_id", f"{exc}; allowed: {', '.join(PLAYABLE)}") from None
        except BaseException:
            env.close()
            raise
        player = cls(config, config.label or path.stem, env, describer, client,
                     environment={"family": env_cfg.family, "env_id": env_cfg.env_id,
                                  "env_kwargs": dict(env_cfg.env_kwargs)})
        player.reset(0)
        return player

    # -- one game ------------------------------------------------------------------------------------------
    def reset(self, seed: int) -> None:
        """A new game: the fallback's generator seeded with ``seed``; prompts' history and predictions cleared."""
        self._end_game()
        agents = self.describer.agents
        self.rng = random.Random(seed)
        self.game: dict[str, Any] = {
            "seed": seed, "decisions": 0, "invalid": 0, "tokens": 0, "mind": co.MindReading(),
            "history": {a: [] for a in agents}, "turns": {a: 0 for a in agents},
            "returns": {a: 0.0 for a in agents}, "seen": {a: None for a in agents}, "played": {a: None for a in agents},
        }

    def _end_game(self) -> None:
        """The game so far counted in the totals, and reported on stderr (once; a game without a move is none)."""
        game = getattr(self, "game", None)
        if game is None or not game["decisions"] or game.get("ended"):
            return
        game["ended"] = True
        game["mind"].end_episode()
        scored = game["mind"].scored
        self.scored += scored
        self.games += 1
        line = {"game": self.games, "seed": game["seed"], "decisions": game["decisions"],
                "invalid_actions": game["invalid"], "tokens": game["tokens"]}
        if self.config.theory_of_mind:
            line["theory_of_mind"] = co.tom_summary(scored)
        print(f"{WORKER} player {self.label}: {json.dumps(line)}", file=sys.stderr, flush=True)

    def totals(self) -> dict[str, Any]:
        """What the player did and spent over every game so far."""
        out: dict[str, Any] = {"player": self.label, "games": self.games, "decisions": self.decisions,
                               "invalid_actions": self.invalid, "llm": self.client.totals()}
        if self.config.theory_of_mind:
            out["theory_of_mind"] = co.tom_summary(self.scored)
        return out

    def report(self) -> None:
        """At exit: the last game, then the totals, on stderr."""
        self._end_game()
        print(f"{WORKER} player totals: {json.dumps(self.totals())}", file=sys.stderr, flush=True)

    # -- one move ------------------------------------------------------------------------------------------
    def act(self, agent: str, observation: Any) -> int:
        describer, game, cfg = self.describer, self.game, self.config
        if agent not in describer.agents:
            raise UserError(f"agent {agent!r} is not in {cfg.environment.env_id}; its agents: "
                            f"{', '.join(describer.agents)}")
        seat = describer.agents.index(agent)
        step = game["turns"][agent] * len(describer.agents) + seat
        self._observe(agent, observation, step)
        seen = _Seen(self.env, agent, observation, GAMES[cfg.environment.env_id].state(observation, seat))
        shown = describer.view(seen, agent, View(step, dict(game["returns"])))
        legal = describer.legal_names(seen, agent)
        if cfg.theory_of_mind:
            shown = co.with_predictions(shown, self._predict(step, agent, shown))
        messages = co.conversation(describer.system_prompt(agent), self._turns(agent), shown)
        choice = choose_action(self.client, messages, legal, self.rng, retries=cfg.retries_per_action)
        game["decisions"] += 1
        game["invalid"] += 0 if choice.valid else 1
        game["tokens"] += sum(c.prompt_tokens + c.completion_tokens for c in choice.calls)
        self.decisions += 1
        self.invalid += 0 if choice.valid else 1
        game["history"][agent].append((shown, choice.action))
        game["turns"][agent] += 1
        game["seen"][agent] = observation
        action = describer.index(agent, choice.action)
        game["played"][agent] = action
        return action

    def _turns(self, agent: str) -> list[tuple[str, str]]:
        history = self.game["history"][agent]
        return history[-self.config.history:] if self.config.history else []

    def _observe(self, agent: str, observation: Any, step: int) -> None:
        """What the other agent did since ``agent``'s last turn: its predictions scored; in games of rounds,
        the last round's points added to the returns."""
        describer, game = self.describer, self.game
        spec = GAMES[self.config.environment.env_id]
        other = next(a for a in describer.agents if a != agent)
        move = spec.their_move(game["seen"][agent], observation, describer)
        if move is None:
            return
        game["mind"].acted(other, describer.action_names(other)[move], step)
        if spec.rounds and game["played"][agent] is not None:
            points = self._round(agent, game["played"][agent], other, move)
            for a, r in points.items():
                game["returns"][a] += r

    def _round(self, agent: str, mine: int, other: str, theirs: int) -> dict[str, float]:
        """One round of a simultaneous game played in the env: each agent's points."""
        env = self.env
        env.reset(seed=0)
        for a in env.possible_agents:
            env.step(mine if a == agent else theirs)
        return {a: float(env.rewards[a]) for a in env.possible_agents}

    def _predict(self, step: int, agent: str, shown: str) -> dict[str, str | None]:
        describer = self.describer
        others = {b: describer.action_names(b) for b in describer.agents if b != agent}
        prompt = f"{shown}\n{co.prediction_request(others)}"
        messages = co.conversation(describer.system_prompt(agent), self._turns(agent), prompt)
        reply = self.client.complete(messages)
        self.game["tokens"] += reply.call.prompt_tokens + reply.call.completion_tokens
        predicted = co.parse_predictions(reply.text, others)
        self.game["mind"].predict(agent, predicted, step)
        return predicted


def make_player(target: str, options: Mapping[str, Any] | None = None) -> LLMPlayer:
    """``--player FILE [--player-options JSON]``: the player config ``FILE`` as a player; its totals are
    written to stderr when the process exits."""
    player = LLMPlayer.load(target, options)
    atexit.register(player.report)
    return player
