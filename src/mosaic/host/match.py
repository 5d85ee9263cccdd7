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

    from mosaic.runs import RunStore

    path = Path(target)
    if not path.exists():
        path = RunStore(home).resolve(target).root
    folder = next((p for p in (path, *path.parents) if (p / "analytics.json").is_file()), None)
    if folder is not None:
        worker_name = json.loads((folder / "analytics.json").read_text(encoding="utf-8")).get("worker")
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


@dataclass
class MatchResult:
    environment: dict[str, Any]
    games: list[Game] = field(default_factory=list)

    def scores(self, label: str) -> list[float]:
        """Per game, 1 / 0.5 / 0 for a win / draw / loss of ``label`` (two-player zero-sum games)."""
        out = []
        for g in self.games:
            mine = [a for a, p in g.seats.items() if p == label]
            theirs = [a for a, p in g.seats.items() if p != label]
            if not mine or not theirs:
                continue
            a, b = sum(g.returns[x] for x in mine), sum(g.returns[x] for x in theirs)
            out.append(1.0 if a > b else 0.0 if a < b else 0.5)
        return out


def play_match(environment: Mapping[str, Any], seatings: Sequence[Mapping[str, PlayerProcess]], games: int,
               seed: int = 0, max_steps: int | None = None) -> MatchResult:
    """Play ``games`` games; game ``i`` seats agents as ``seatings[i % len(seatings)]`` (agent -> player), so
    two seatings alternate who moves first. Every player is checked against the env before the first game."""
    from mosaic.workerkit.envs import make_env
    from mosaic.workerkit.evaluation import play_episodes

    family, env_id = str(environment["family"]), str(environment["env_id"])
    kwargs = dict(environment.get("env_kwargs") or {})
    api = str(environment.get("api_type") or "AEC")
    env = make_env(family, env_id, api, kwargs, None)
    try:
        agents = list(env.possible_agents)
        controllers = []
        for seating in seatings:
            missing = [a for a in agents if a not in seating]
            if missing:
                raise UserError(f"seats: {', '.join(missing)} of {env_id} have no player; agents: {', '.join(agents)}")
            for player in {id(p): p for p in seating.values()}.values():
                player.check_environment(family, env_id, kwargs)
            controllers.append(_Seating({a: seating[a] for a in agents}))
        result = MatchResult({"family": family, "env_id": env_id, "env_kwargs": kwargs, "api_type": api})
        for i in range(games):
            seating = controllers[i % len(controllers)]
            for player in seating.players():
                player.reset(seed + i)
            episodes, _ = play_episodes(env, [seating], 1, seed=seed + i, max_steps=max_steps)
            episode = episodes[0]
            result.games.append(Game(i, seed + i, {a: p.label for a, p in seating.seats.items()},
                                     dict(episode.returns), episode.length, episode.winner))
        return result
    finally:
        env.close()


@dataclass
class _Seating:
    seats: dict[str, PlayerProcess]

    def players(self) -> list[PlayerProcess]:
        return list({id(p): p for p in self.seats.values()}.values())

    def actor_for(self, agent: str) -> Any:
        player = self.seats.get(agent)
        if player is None:
            return None
        player.seat([agent])
        return player.actor_for(agent)


__all__ = ["BUILT_IN", "Game", "MatchResult", "PlayerError", "open_player", "play_match", "player_command"]
