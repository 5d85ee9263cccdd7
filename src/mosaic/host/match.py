"""A match: a PettingZoo env run in MOSAIC's own process, each seat played by a player process.

The env is built raw by the core (:func:`mosaic.workerkit.envs.make_env`), never by a worker, so no library
decides what the others see; each player gets its agent's raw observation and applies its own encoding
(:mod:`mosaic.workerkit.player`). Games are played with :func:`mosaic.workerkit.evaluation.play_episodes`,
game ``i`` seeded ``seed + i`` and every player reset with that seed first, so a match is repeatable.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from mosaic.errors import UserError
from mosaic.workerkit.player import PlayerError, PlayerProcess

BUILT_IN = ("random",)


def player_command(target: str, options: Mapping[str, Any] | None = None,
                   home: Path | str | None = None) -> tuple[list[str], str]:
    """The command that serves ``target`` as a player, and its label:

    * ``random`` or ``scripted:MODULE:FUNCTION``: MOSAIC's built-in players;
    * a run (id or folder) or a checkpoint inside a run folder: served by the worker that trained it;
    * a player config file (JSON or YAML, outside any run folder) whose ``worker`` field names the worker that
      serves it (e.g. a language model for the ``mosaic_llm`` worker); its ``label`` field names the player.

    A worker serves in its own environment (``--player PATH``); ``options`` are the worker's player options."""
    if target == "random":
        return [sys.executable, "-m", "mosaic.workerkit.player", "random"], "random"
    if target.startswith("scripted:"):
        return [sys.executable, "-m", "mosaic.workerkit.player", "scripted", target[len("scripted:"):]], target
    import json

    from mosaic.runs import MANIFEST_FILE, RunStore

    path = Path(target)
    if not path.exists():
        path = RunStore(home).resolve(target).root
    folder = next((p for p in (path, *path.parents) if (p / MANIFEST_FILE).is_file()), None)
    if folder is not None:
        worker_name = json.loads((folder / MANIFEST_FILE).read_text(encoding="utf-8")).get("worker")
        what, label = f"{target!r} was trained by the {worker_name} worker, which", folder.name
    elif path.is_file():
        from mosaic.configkit import read_document

        document = read_document(path, "player")
        worker_name = document.get("worker")
        if not isinstance(worker_name, str) or not worker_name:
            raise UserError(f"player: worker: {path} names no worker; a player config needs `worker: NAME`")
        what, label = f"{path}: worker: {worker_name}", str(document.get("label") or path.stem)
    else:
        raise UserError(f"player: {target!r} is not a run, a checkpoint inside a run folder, a player config file, "
                        f"nor one of: {', '.join(BUILT_IN)}, scripted:MODULE:FUNCTION")
    worker = _worker(str(worker_name))
    if worker.description is not None and worker.description.get("can_serve_player") is False:
        raise UserError(f"player: {what} cannot serve a player (its description says can_serve_player: false)")
    from mosaic.host.launcher import worker_command

    command = [*worker_command(worker), "--player", str(path.resolve())]
    if options:
        command += ["--player-options", json.dumps(dict(options))]
    return command, label


def _worker(name: str) -> Any:
    from mosaic.host.discovery import discover_workers

    found = discover_workers(only=name)
    if name not in found.names():
        found = discover_workers()
    return found.get(name)


def open_player(target: str, options: Mapping[str, Any] | None = None,
                home: Path | str | None = None) -> PlayerProcess:
    """A running player for ``target`` (:func:`player_command`)."""
    command, label = player_command(target, options, home)
    return PlayerProcess(command, label=label)


@dataclass
class Game:
    game: int
    seed: int
    seats: dict[str, str]             # agent -> player label
    returns: dict[str, float]
    length: int
    winner: str | None
    #: Player label -> the summed returns of the agents it played (its team's result in a team game).
    teams: dict[str, float] = field(default_factory=dict)
    #: The actions in the order taken, JSON-able (:func:`mosaic.workerkit.player.to_wire`): ``[agent, action]``
    #: pairs in an AEC game, one ``{agent: action}`` dict per step in a parallel one. Stepping a fresh env, reset
    #: with ``seed`` and built with the match's environment (``api_type`` included), through them replays the
    #: game (:func:`replay`).
    moves: list[Any] = field(default_factory=list)


@dataclass
class MatchResult:
    environment: dict[str, Any]
    games: list[Game] = field(default_factory=list)

    def scores(self, label: str) -> list[float]:
        """Per game, 1 / 0.5 / 0 for a win / draw / loss of ``label`` (two-player zero-sum games; in a team game
        of general sum, where returns of the two sides are not on one scale, read :meth:`team_returns`)."""
        out = []
        for g in self.games:
            mine = [a for a, p in g.seats.items() if p == label]
            theirs = [a for a, p in g.seats.items() if p != label]
            if not mine or not theirs:
                continue
            a, b = sum(g.returns[x] for x in mine), sum(g.returns[x] for x in theirs)
            out.append(1.0 if a > b else 0.0 if a < b else 0.5)
        return out

    def team_returns(self, label: str) -> list[float]:
        """Per game that ``label`` played, the summed returns of the agents it played (its team's return)."""
        return [g.teams[label] for g in self.games if label in g.teams]

    def teams(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Per player label, per side it played (its agents, joined by ``+``): games and the team return's mean
        with a 95% interval. Sides are kept apart: in a general-sum game their returns are on other scales."""
        from mosaic.workerkit.evaluation import _stats

        sides: dict[str, dict[str, list[float]]] = {}
        for g in self.games:
            for label, value in g.teams.items():
                side = "+".join(sorted(a for a, p in g.seats.items() if p == label))
                sides.setdefault(label, {}).setdefault(side, []).append(value)
        return {label: {side: {"games": len(values), "return": _stats(values)} for side, values in by_side.items()}
                for label, by_side in sides.items()}


def match_api_type(environment: Mapping[str, Any], players: Sequence[PlayerProcess] = ()) -> str:
    """The PettingZoo API a match steps: the environment's ``api_type`` when it names one; else PARALLEL where
    the env has it, it is not a classic (turn-based) game, and no player says it was trained on AEC (a
    player's hello ``environment.api_type``); else AEC. Players get the same observations either way."""
    from mosaic.workerkit.envs import load_env_module, supported_api_types

    if environment.get("api_type"):
        return str(environment["api_type"])
    family, env_id = str(environment["family"]), str(environment["env_id"])
    kinds = supported_api_types(load_env_module(family, env_id))
    trained = {str(p.environment.get("api_type")) for p in players if p.environment.get("api_type")}
    if "PARALLEL" in kinds and family != "classic" and "AEC" not in trained:
        return "PARALLEL"
    if "AEC" not in kinds:
        return "PARALLEL"
    return "AEC"


def play_match(environment: Mapping[str, Any], seatings: Sequence[Mapping[str, PlayerProcess]], games: int,
               seed: int = 0, max_steps: int | None = None) -> MatchResult:
    """Play ``games`` games; game ``i`` seats agents as ``seatings[i % len(seatings)]`` (agent -> player), so
    two seatings alternate who moves first (or which team plays which side). A player may hold several seats
    (a team): it is asked for each of its agents' actions at every step. Every player is checked against the
    env before the first game, and told it where its hello needs it (the built-in random player: the action
    spaces it draws from); the API is :func:`match_api_type`'s."""
    from mosaic.workerkit.envs import make_env
    from mosaic.workerkit.evaluation import play_episodes
    from mosaic.workerkit.player import to_wire

    family, env_id = str(environment["family"]), str(environment["env_id"])
    kwargs = dict(environment.get("env_kwargs") or {})
    everyone = list({id(p): p for seating in seatings for p in seating.values()}.values())
    api = match_api_type(environment, everyone)
    env = make_env(family, env_id, api, kwargs, None)
    played = {"family": family, "env_id": env_id, "env_kwargs": kwargs, "api_type": api}
    try:
        agents = list(env.possible_agents)
        controllers = []
        for seating in seatings:
            missing = [a for a in agents if a not in seating]
            if missing:
                raise UserError(f"seats: {', '.join(missing)} of {env_id} have no player; agents: {', '.join(agents)}")
            for player in {id(p): p for p in seating.values()}.values():
                player.check_environment(family, env_id, kwargs)
                player.tell_environment(played)
                player.seat([a for a in agents if seating[a] is player])
            controllers.append(Seating({a: seating[a] for a in agents}))
        result = MatchResult(dict(played))
        for i in range(games):
            seating = controllers[i % len(controllers)]
            for player in seating.players():
                player.reset(seed + i)
            moves: list[Any] = []

            def record(_episode: int, actions: dict[str, Any], moves: list[Any] = moves) -> None:
                if api == "AEC":
                    moves.extend([agent, to_wire(action)] for agent, action in actions.items())
                else:
                    moves.append({agent: to_wire(action) for agent, action in actions.items()})

            episodes, _ = play_episodes(env, [seating], 1, seed=seed + i, max_steps=max_steps, on_actions=record)
            episode = episodes[0]
            seats = {a: p.label for a, p in seating.seats.items()}
            teams: dict[str, float] = {}
            for agent, label in seats.items():
                teams[label] = teams.get(label, 0.0) + float(episode.returns.get(agent, 0.0))
            result.games.append(Game(i, seed + i, seats, dict(episode.returns), episode.length, episode.winner,
                                     teams, moves))
        return result
    finally:
        env.close()


def replay(environment: Mapping[str, Any], game: Game) -> dict[str, float]:
    """Step a fresh env (the match's ``environment``, ``api_type`` included) through ``game.moves`` from a reset
    with ``game.seed``; returns each agent's return, which equals ``game.returns`` for a recorded game."""
    from mosaic.workerkit.envs import make_env
    from mosaic.workerkit.player import from_wire

    api = match_api_type(environment)
    env = make_env(str(environment["family"]), str(environment["env_id"]), api,
                   dict(environment.get("env_kwargs") or {}), None)
    try:
        returns = {a: 0.0 for a in env.possible_agents}
        if api == "AEC":
            env.reset(seed=game.seed)
            moves = iter(game.moves)
            for agent in env.agent_iter():
                _, _, term, trunc, _ = env.last()
                if term or trunc:
                    action = None
                else:
                    step = next(moves, None)
                    if step is None:
                        break
                    if step[0] != agent:
                        raise UserError(f"moves: {step[0]} moved where the env expects {agent}")
                    action = from_wire(step[1])
                env.step(action)
                for a, r in env.rewards.items():
                    returns[a] += float(r)
        else:
            env.reset(seed=game.seed)
            for actions in game.moves:
                _, rewards, _, _, _ = env.step({a: from_wire(x) for a, x in actions.items()})
                for a, r in rewards.items():
                    returns[a] += float(r)
        return returns
    finally:
        env.close()


@dataclass
class Seating:
    seats: dict[str, PlayerProcess]
    #: One actor per agent, kept: play_parallel batches agents by their actor's id(), and a fresh object per call
    #: could reuse a freed one's id and send one agent's observation to another's actor.
    _actors: dict[str, Any] = field(default_factory=dict)

    def players(self) -> list[PlayerProcess]:
        return list({id(p): p for p in self.seats.values()}.values())

    def actor_for(self, agent: str) -> Any:
        player = self.seats.get(agent)
        if player is None:
            return None
        if agent not in self._actors:
            player.seat([agent])
            self._actors[agent] = player.actor_for(agent)
        return self._actors[agent]


__all__ = ["BUILT_IN", "Game", "MatchResult", "PlayerError", "Seating", "match_api_type", "open_player", "play_match",
           "player_command", "replay"]
