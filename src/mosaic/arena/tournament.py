"""A tournament: every pairing of players plays its games on one env, journaled game by game, then rated.

A spec (YAML or JSON)::

    name: c4-league
    environment: {family: classic, env_id: connect_four_v3}
    players:                        # label -> what plays (mosaic.host.match.player_command)
      ppo: RUN_ID                   # a run (id or folder) or a checkpoint, served by the worker that trained it
      random: random
      heuristic: scripted:mosaic.arena.heuristics:connect_four
      dqn: {target: RUN_ID, options: {deterministic: true}}
    format: round_robin             # or gauntlet: `candidate` against every other player
    candidate: ppo
    games_per_pairing: 20           # split evenly between the two seatings (who moves first)
    seed: 0                         # game g of a pairing is seeded seed + g
    report: {reps: 1000, confidence: 0.95, seed: 0}

``MOSAIC_HOME/arena/NAME/`` keeps the spec and ``games.jsonl``: one line per finished game (pairing, game
number, seed, seats, returns). Running the tournament again (or after a crash) plays only the games not in
it, so an interrupted tournament resumes without replaying a finished game; the games are seeded, so the
result is the one an uninterrupted run gives.
"""

from __future__ import annotations

import itertools
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from mosaic.configkit import read_document
from mosaic.errors import UserError, one_of
from mosaic.runs import mosaic_home, write_json_atomic

FORMATS = ("round_robin", "gauntlet")
SPEC_KEYS = ("name", "description", "environment", "players", "format", "candidate", "games_per_pairing",
             "seed", "max_steps", "opening_moves", "sides", "report")


@dataclass(frozen=True)
class PlayerSpec:
    label: str
    target: str
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class TournamentSpec:
    name: str
    environment: dict[str, Any]
    players: list[PlayerSpec]
    format: str = "round_robin"
    candidate: str | None = None
    games_per_pairing: int = 10
    seed: int = 0
    max_steps: int | None = None
    report: dict[str, Any] = field(default_factory=dict)
    source: dict[str, Any] = field(default_factory=dict)
    #: the first moves of every game played uniformly at random among the legal ones, the same for the two games
    #: of a pair (game 2k and 2k+1, seats swapped): deterministic players then meet in varied positions
    opening_moves: int = 0
    #: a team game: two sides, each a list of agents, one player per side (None: a two-agent game, one seat each)
    sides: dict[str, list[str]] | None = None

    def pairings(self) -> list[tuple[str, str]]:
        labels = [p.label for p in self.players]
        if self.format == "gauntlet":
            return [(self.candidate, other) for other in labels if other != self.candidate]
        return list(itertools.combinations(labels, 2))

    def schedule(self) -> Iterator[tuple[str, int, str, str, int]]:
        """``(pairing id, game, first mover, second mover, seed)`` for every game, in order."""
        for a, b in self.pairings():
            for game in range(self.games_per_pairing):
                first, second = (a, b) if game % 2 == 0 else (b, a)
                # team games come in pairs on one env seed, sides swapped: each side's returns compare like for like
                yield f"{a}~{b}", game, first, second, self.seed + (game // 2 if self.sides else game)


def parse_spec(data: Mapping[str, Any]) -> TournamentSpec:
    import re

    for key in data:
        if key not in SPEC_KEYS:
            raise UserError(f"{key}: unknown field; allowed: {', '.join(SPEC_KEYS)}")
    name = data.get("name")
    if not isinstance(name, str) or not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", name):
        raise UserError(f"name: {name!r} is not a valid tournament name; allowed: letters, digits, '.', '_', '-'")
    env = data.get("environment")
    if not isinstance(env, dict) or not env.get("family") or not env.get("env_id"):
        raise UserError("environment: expected {family, env_id[, env_kwargs]}")
    players_in = data.get("players")
    if not isinstance(players_in, dict) or len(players_in) < 2:
        raise UserError("players: expected an object of at least two players (label -> run, 'random' or "
                        "'scripted:MODULE:FUNCTION')")
    players = []
    for label, value in players_in.items():
        if "~" in label or not label:
            raise UserError(f"players.{label}: a label may not contain '~'")
        if isinstance(value, str):
            players.append(PlayerSpec(label, value))
        elif isinstance(value, dict) and isinstance(value.get("target"), str):
            options = value.get("options", {})
            if not isinstance(options, dict):
                raise UserError(f"players.{label}.options: expected an object")
            players.append(PlayerSpec(label, value["target"], dict(options)))
        else:
            raise UserError(f"players.{label}: expected a target string or {{target, options}}")
    fmt = data.get("format", "round_robin")
    if fmt not in FORMATS:
        raise UserError(f"format: {one_of(fmt, FORMATS)}; allowed: {', '.join(FORMATS)}")
    candidate = data.get("candidate")
    if fmt == "gauntlet" and candidate not in players_in:
        raise UserError(f"candidate: {candidate!r} is not a player; allowed: {', '.join(players_in)}")
    games = data.get("games_per_pairing", 10)
    if isinstance(games, bool) or not isinstance(games, int) or not 1 <= games <= 100_000:
        raise UserError(f"games_per_pairing: {games!r}; allowed: an integer from 1")
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise UserError(f"seed: {seed!r}; allowed: an integer >= 0")
    max_steps = data.get("max_steps")
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1):
        raise UserError(f"max_steps: {max_steps!r}; allowed: an integer >= 1 or null")
    report = data.get("report", {})
    if not isinstance(report, dict):
        raise UserError("report: expected {reps, confidence, seed}")
    opening = data.get("opening_moves", 0)
    if isinstance(opening, bool) or not isinstance(opening, int) or not 0 <= opening <= 1000:
        raise UserError(f"opening_moves: {opening!r}; allowed: an integer >= 0 (random legal moves opening each game)")
    sides = data.get("sides")
    if sides is not None:
        if not isinstance(sides, dict) or len(sides) != 2 or not all(
                isinstance(v, list) and v and all(isinstance(a, str) for a in v) for v in sides.values()):
            raise UserError("sides: expected two sides, each a list of agent ids, e.g. {adversaries: [adversary_0], "
                            "good: [agent_0, agent_1]}")
        if opening:
            raise UserError("opening_moves: random openings are for two-player turn-based games, not with sides; "
                            "allowed: 0 with sides")
        if games % 2:
            raise UserError(f"games_per_pairing: {games} with sides; allowed: an even number (games come in pairs, "
                            "sides swapped)")
    return TournamentSpec(name, dict(env), players, fmt, candidate, games, seed, max_steps, dict(report), dict(data),
                          opening, {str(k): list(v) for k, v in sides.items()} if sides else None)


def read_spec(path: str | Path) -> TournamentSpec:
    return parse_spec(read_document(path, "spec"))


# -- the folder ------------------------------------------------------------------------------------------
class Tournament:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.name = root.name
        self.spec = parse_spec(json.loads((root / "spec.json").read_text(encoding="utf-8")))

    @classmethod
    def open(cls, spec: TournamentSpec, home: Path | str | None = None) -> "Tournament":
        """The tournament's folder: made for a new spec; the same spec again resumes it; another is refused."""
        root = Path(home or mosaic_home()) / "arena" / spec.name
        if (root / "spec.json").is_file():
            existing = json.loads((root / "spec.json").read_text(encoding="utf-8"))
            if existing != json.loads(json.dumps(spec.source)):
                raise UserError(f"name: a tournament named {spec.name!r} exists with another spec; allowed: another "
                                "name, or the same spec to resume it")
        else:
            root.mkdir(parents=True, exist_ok=True)
            write_json_atomic(root / "spec.json", spec.source)
        return cls(root)

    @classmethod
    def get(cls, name: str, home: Path | str | None = None) -> "Tournament":
        root = Path(home or mosaic_home()) / "arena" / name
        if not (root / "spec.json").is_file():
            raise UserError(f"tournament: no tournament named {name!r} in {root.parent}")
        return cls(root)

    @property
    def games_path(self) -> Path:
        return self.root / "games.jsonl"

    def games(self) -> list[dict[str, Any]]:
        """Every finished game (a torn last line from a crash is skipped; a game recorded twice counts once)."""
        seen: dict[tuple[str, int], dict[str, Any]] = {}
        try:
            lines = self.games_path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        for line in lines:
            try:
                game = json.loads(line)
            except ValueError:
                continue
            seen.setdefault((game["pairing"], int(game["game"])), game)
        return list(seen.values())

    def record(self, game: Mapping[str, Any]) -> None:
        fd = os.open(self.games_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, (json.dumps(dict(game)) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)




@dataclass(frozen=True)
class Shard:
    """Games of one seating (``first`` moves first), played by one pair of player processes."""

    first: str
    second: str
    games: tuple[tuple[str, int, int], ...]  # (pairing id, game, seed)


def pending(tournament: Tournament) -> list[tuple[str, int, str, str, int]]:
    """The schedule's games not in the journal yet."""
    done = {(g["pairing"], int(g["game"])) for g in tournament.games()}
    return [item for item in tournament.spec.schedule() if (item[0], item[1]) not in done]


def shards(todo: list[tuple[str, int, str, str, int]], size: int) -> list[Shard]:
    """``todo`` grouped by seating, in chunks of at most ``size`` games, the schedule's order kept."""
    groups: dict[tuple[str, str], list[tuple[str, int, int]]] = {}
    for pairing, game, first, second, seed in todo:
        groups.setdefault((first, second), []).append((pairing, game, seed))
    return [Shard(first, second, tuple(games[i:i + size]))
            for (first, second), games in groups.items() for i in range(0, len(games), size)]


def play_game(spec: TournamentSpec, players: Mapping[str, Any], first: str, second: str, pairing: str, game: int,
              seed: int, groups: tuple[list[str], list[str]] | None = None) -> dict[str, Any]:
    """One game as its journal line (``moves`` too where the match records them; in a team game each player's
    side and ``teams``, its agents' summed returns)."""
    from mosaic.host.match import play_match

    started = time.perf_counter()
    one, two = groups or seat_groups(spec)
    seats = {**{a: players[first] for a in one}, **{a: players[second] for a in two}}
    if spec.opening_moves:
        book = Opening(spec.opening_moves, spec.seed + game // 2)
        seats = {agent: Opened(player, book) for agent, player in seats.items()}
    result = play_match(spec.environment, [seats], games=1, seed=seed, max_steps=spec.max_steps).games[0]
    line = {"pairing": pairing, "game": game, "seed": seed, "first": first, "second": second,
            "seats": result.seats, "returns": result.returns, "length": result.length,
            "duration_s": round(time.perf_counter() - started, 4)}
    if spec.sides:
        side_one, side_two = spec.sides
        line["sides"] = {first: side_one, second: side_two}
        line["teams"] = dict(result.teams)
    moves = getattr(result, "moves", None)
    if moves is not None:
        line["moves"] = moves
    return line


class Opening:
    """A game's first ``plies`` moves, uniformly random among the legal ones, drawn from ``seed``; shared by
    the game's two seats (one ply each call, whoever moves)."""

    def __init__(self, plies: int, seed: int) -> None:
        import numpy as np

        self.plies, self.played, self.rng = plies, 0, np.random.default_rng(seed)

    def move(self, observation: Any) -> Any:
        from mosaic.workerkit.player import legal_random_action

        if self.played >= self.plies:
            return None
        self.played += 1
        return legal_random_action(self.rng, observation)


class Opened:
    """A player whose first moves of a game the :class:`Opening` makes (the match sees the player itself)."""

    def __init__(self, player: Any, book: Opening) -> None:
        self.player, self.book = player, book
        self.label, self.agents, self.environment = player.label, player.agents, player.environment

    def check_environment(self, *args: Any, **kwargs: Any) -> None:
        self.player.check_environment(*args, **kwargs)

    def reset(self, seed: int) -> None:
        self.player.reset(seed)

    def seat(self, agents: Any) -> "Opened":
        self.player.seat(agents)
        return self

    def actor_for(self, agent: str) -> Any:
        return _OpenedActor(self, agent)


@dataclass
class _OpenedActor:
    opened: Opened
    agent: str

    @property
    def module_id(self) -> str:
        return self.opened.label

    def compute_action(self, observation: Any) -> Any:
        move = self.opened.book.move(observation)
        return self.opened.player.act(self.agent, observation) if move is None else move

    def compute_actions(self, observations: Any) -> list[Any]:
        return [self.compute_action(o) for o in observations]


def _open(spec: TournamentSpec, label: str, home: Path | str | None) -> Any:
    from mosaic.host.match import open_player

    by_label = {p.label: p for p in spec.players}
    player = open_player(by_label[label].target, by_label[label].options, home)
    player.label = label
    return player


def play_shard(spec: TournamentSpec, shard: Shard, home: Path | str | None = None,
               record: Callable[[dict[str, Any]], None] | None = None, players: dict[str, Any] | None = None,
               stop: Any = None) -> list[dict[str, Any]]:
    """Play a shard's games (each handed to ``record`` as it ends); ``players`` is a cache of open players by
    label that the caller closes (none given: the shard opens and closes its own)."""
    own = players is None
    players = {} if players is None else players
    lines = []
    groups = seat_groups(spec)
    try:
        for label in (shard.first, shard.second):
            if label not in players:
                players[label] = _open(spec, label, home)
        for pairing, game, seed in shard.games:
            if stop is not None and stop.is_set():
                break
            line = play_game(spec, players, shard.first, shard.second, pairing, game, seed, groups)
            lines.append(line)
            if record is not None:
                record(line)
        return lines
    finally:
        if own:
            for player in players.values():
                player.close()


def journal_to(tournament: Tournament, report: Callable[[str], None] | None = None) -> Callable[[dict[str, Any]], None]:
    """What to do with each finished game: journal it, and say so when ``report`` is given."""
    def journal(line: dict[str, Any]) -> None:
        tournament.record(line)
        if report:
            report(f"{line['pairing']} game {line['game']}: {line['first']} vs {line['second']} -> "
                   f"{line['returns']}")
    return journal


def run(tournament: Tournament, report: Callable[[str], None] | None = None, home: Path | str | None = None,
        parallel: int = 1) -> int:
    """Play every game not yet journaled, ``parallel`` shards at a time on threads of this process (each with
    its own player processes); returns how many games were played now. (On a Ray cluster:
    :func:`mosaic.arena.cluster.run`.)"""
    if isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1:
        raise UserError(f"--parallel: {parallel!r}; allowed: an integer >= 1")
    todo = pending(tournament)
    if not todo:
        return 0
    seat_groups(tournament.spec)  # a game the arena cannot seat is refused before any player starts
    size = max(1, -(-len(todo) // parallel)) if parallel > 1 else len(todo)
    return _run_local(tournament.spec, shards(todo, min(size, tournament.spec.games_per_pairing)),
                      journal_to(tournament, report), parallel, home)


def _run_local(spec: TournamentSpec, work: list[Shard], journal: Callable[[dict[str, Any]], None], parallel: int,
               home: Path | str | None) -> int:
    """Shards on ``parallel`` threads; each thread keeps the players it opened for its next shards (the
    schedule groups a pairing's seatings, so a thread mostly reuses them) and closes them at the end. The
    first failure stops the others after their current game and is raised."""
    import queue
    import threading

    jobs: "queue.Queue[Shard]" = queue.Queue()
    for shard in work:
        jobs.put(shard)
    stop = threading.Event()
    errors: list[BaseException] = []
    played = [0]
    lock = threading.Lock()

    def counted(line: dict[str, Any]) -> None:
        with lock:
            journal(line)
            played[0] += 1

    def worker() -> None:
        players: dict[str, Any] = {}
        try:
            while not stop.is_set():
                try:
                    shard = jobs.get_nowait()
                except queue.Empty:
                    return
                for label in [k for k in players if k not in (shard.first, shard.second)]:
                    players.pop(label).close()  # at most one pairing's players open per thread
                play_shard(spec, shard, home, counted, players, stop)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            errors.append(exc)
            stop.set()
        finally:
            for player in players.values():
                player.close()

    threads = [threading.Thread(target=worker, name=f"arena-shard-{i}", daemon=True)
               for i in range(min(parallel, len(work)))]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    if errors:
        raise errors[0]
    return played[0]


def seat_groups(spec: TournamentSpec) -> tuple[list[str], list[str]]:
    """The agents the first and the second player of a game play: one each in a two-agent game, else the
    spec's two ``sides``, which must split the env's agents between them."""
    from mosaic.workerkit.envs import make_env

    environment = spec.environment
    env = make_env(environment["family"], environment["env_id"], str(environment.get("api_type") or "AEC"),
                   dict(environment.get("env_kwargs") or {}), None)
    try:
        agents = list(env.possible_agents)
    finally:
        env.close()
    if spec.sides:
        one, two = spec.sides.values()
        named = [*one, *two]
        if sorted(named) != sorted(agents):
            raise UserError(f"sides: {spec.sides} must split {environment['env_id']}'s agents between two sides, "
                            f"each once; allowed agents: {', '.join(agents)}")
        return list(one), list(two)
    if len(agents) != 2:
        raise UserError(f"sides: {environment['env_id']} has {len(agents)} agents; name the two sides a player each "
                        f"plays (sides: {{NAME: [agents], NAME: [agents]}}); agents: {', '.join(agents)}")
    return [agents[0]], [agents[1]]
