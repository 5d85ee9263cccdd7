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

Several games: ``games: {GAME: {environment, players: [labels], games_per_pairing, opening_moves, sides,
max_steps}}`` instead of ``environment`` (:func:`parse_specs`), one tournament per game under one name, each
rated on its own; ``MOSAIC_HOME/arena/NAME/spec.json`` keeps the whole spec and ``NAME/GAME/`` each game's
folder, as a one-game tournament's.

``MOSAIC_HOME/arena/NAME/`` keeps the spec and ``games.jsonl``: one line per finished game (pairing, game
number, seed, seats, returns). Running the tournament again (or after a crash) plays only the games not in
it, so an interrupted tournament resumes without replaying a finished game; the games are seeded, so the
result is the one an uninterrupted run gives.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from mosaic.configkit import read_document
from mosaic.errors import UserError
from mosaic.runs import NAME_PATTERN, append_jsonl, mosaic_home, read_jsonl, write_json_atomic

FORMATS = ("round_robin", "gauntlet")
SPEC_KEYS = ("name", "description", "environment", "players", "format", "candidate", "games_per_pairing",
             "seed", "max_steps", "opening_moves", "sides", "report")
#: a several-game spec: ``games`` instead of ``environment``
LEAGUE_KEYS = tuple(k for k in SPEC_KEYS if k != "environment") + ("games",)
#: what a game of a several-game spec may set (the rest is the tournament's: format, candidate, seed, report)
GAME_KEYS = ("environment", "players", "games_per_pairing", "opening_moves", "sides", "max_steps")
#: names a game may not take (a sub-folder of the tournament's folder has that name)
RESERVED_GAMES = ("report", "shards")


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
    #: the game's key in a several-game spec (``games``); None: a one-environment spec
    game: str | None = None
    #: a several-game spec's whole source (what ``MOSAIC_HOME/arena/NAME/spec.json`` keeps); None: one game
    league: dict[str, Any] | None = None

    @property
    def title(self) -> str:
        """``NAME``, or ``NAME/GAME`` for a game of a several-game spec (``mosaic arena report NAME/GAME``)."""
        return f"{self.name}/{self.game}" if self.game else self.name

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
    """A one-environment spec (also each game's spec of a several-game one, which carries ``game``, its key:
    :func:`parse_specs` reads a spec of either kind)."""
    game_key = data.get("game")
    for key in data:
        if key not in SPEC_KEYS and not (key == "game" and isinstance(game_key, str)):
            if key == "games":
                raise UserError("games: a spec lists its games or names one environment; allowed: games or "
                                "environment, not both")
            raise UserError(f"{key}: unknown field; allowed: {', '.join(SPEC_KEYS)}, or games instead of "
                            "environment")
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
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
        raise UserError(f"format: {fmt!r} is not a tournament format; allowed: {', '.join(FORMATS)}")
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
                          opening, {str(k): list(v) for k, v in sides.items()} if sides else None,
                          game_key if isinstance(game_key, str) else None)


def parse_specs(data: Mapping[str, Any]) -> list[TournamentSpec]:
    """A spec of either kind as one :class:`TournamentSpec` per game: one for a spec naming an
    ``environment``; one per entry of ``games`` (each a tournament of its own under the spec's name, with the
    spec's fields and the game's own ``environment``, ``players`` (labels, default all) and overrides of
    ``games_per_pairing``, ``opening_moves``, ``sides`` and ``max_steps``). Every error names its field
    (``games.GAME.FIELD`` for a game's)."""
    if not isinstance(data, Mapping):
        raise UserError("spec: expected an object (name, players, environment or games, ...)")
    if "games" not in data:
        if "game" in data:
            raise UserError("game: MOSAIC writes it into each game's spec of a several-game spec; allowed: "
                            "games: {GAME: {environment, ...}} to list games")
        return [parse_spec(data)]
    if "environment" in data:
        raise UserError("environment: a spec names one environment or lists games, each with its own; allowed: "
                        "environment or games, not both")
    for key in data:
        if key not in LEAGUE_KEYS:
            raise UserError(f"{key}: unknown field; allowed: {', '.join(LEAGUE_KEYS)}")
    games = data["games"]
    if not isinstance(games, Mapping) or not games:
        raise UserError("games: expected an object of at least one game (GAME -> {environment, players, ...})")
    base = {k: v for k, v in data.items() if k != "games"}
    # the tournament's own fields, once, errors naming them (a placeholder env: each game's is checked below)
    parse_spec({**base, "environment": {"family": "-", "env_id": "-"}})
    everyone = list(data["players"])
    specs = []
    for key, game in games.items():
        where = f"games.{key}"
        if not isinstance(key, str) or not NAME_PATTERN.match(key):
            raise UserError(f"{where}: {key!r} is not a valid game name; allowed: letters, digits, '.', '_', '-'")
        if key in RESERVED_GAMES:
            raise UserError(f"{where}: {key!r} is reserved (a folder of the tournament's); allowed: another name")
        if not isinstance(game, Mapping):
            raise UserError(f"{where}: expected an object {{environment, players, ...}}")
        for field_name in game:
            if field_name not in GAME_KEYS:
                raise UserError(f"{where}.{field_name}: unknown field for a game; allowed: {', '.join(GAME_KEYS)} "
                                "(format, candidate, seed and report are the tournament's)")
        labels = game.get("players", everyone)
        if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
            raise UserError(f"{where}.players: expected a list of player labels; allowed: {', '.join(everyone)}")
        for label in labels:
            if label not in data["players"]:
                raise UserError(f"{where}.players: {label!r} is not a player; allowed: {', '.join(everyone)}")
        if len(set(labels)) != len(labels) or len(labels) < 2:
            raise UserError(f"{where}.players: expected at least two different players; allowed: "
                            f"{', '.join(everyone)}")
        if data.get("format") == "gauntlet" and data.get("candidate") not in labels:
            raise UserError(f"{where}.players: the gauntlet's candidate {data.get('candidate')!r} plays every game; "
                            f"allowed: a list that includes it")
        source = {**base, **{k: v for k, v in game.items() if k != "players"},
                  "players": {label: data["players"][label] for label in labels}, "game": key}
        try:
            spec = parse_spec(source)
        except UserError as exc:
            raise UserError(f"{where}.{exc}") from None
        spec.league = json.loads(json.dumps(dict(data)))
        specs.append(spec)
    return specs


def read_specs(path: str | Path) -> list[TournamentSpec]:
    """The spec file's games (:func:`parse_specs`)."""
    return parse_specs(read_document(path, "spec"))


def read_spec(path: str | Path) -> TournamentSpec:
    """A one-environment spec file (a several-game one is refused: :func:`read_specs` reads both)."""
    specs = read_specs(path)
    if specs[0].game is not None:
        raise UserError(f"games: {path} lists several games; allowed here: one environment")
    return specs[0]


def check_seating(specs: list[TournamentSpec]) -> None:
    """Every game's seats (:func:`seat_groups`), before anything is written; a game's error names it."""
    for spec in specs:
        try:
            seat_groups(spec)
        except UserError as exc:
            if spec.game is None:
                raise
            raise UserError(f"games.{spec.game}.{exc}") from None


def check_players(specs: list[TournamentSpec]) -> None:
    """Every player can be served (a run that exists, a worker that serves players, a scripted function that
    imports), before anything is written; the error names the player (and the game of a several-game spec)."""
    from mosaic.host.match import player_command
    from mosaic.workerkit.player import scripted

    for spec in specs:
        where = f"games.{spec.game}.players" if spec.game is not None else "players"
        for player in spec.players:
            try:
                if player.target.startswith("scripted:"):
                    scripted(player.target[len("scripted:"):])  # loads its function, as the player will
                else:
                    player_command(player.target, player.options)
            except UserError as exc:
                message = str(exc)
                message = message[len("player: "):] if message.startswith("player: ") else message
                raise UserError(f"{where}.{player.label}: {message}") from None


# -- the folder ------------------------------------------------------------------------------------------
class Tournament:
    """One game's tournament: ``MOSAIC_HOME/arena/NAME/`` for a one-environment spec; for a several-game spec,
    ``MOSAIC_HOME/arena/NAME/GAME/`` under the folder keeping the whole spec (:func:`open_tournaments`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.spec = parse_spec(json.loads((root / "spec.json").read_text(encoding="utf-8")))
        self.name = self.spec.title

    @classmethod
    def open(cls, spec: TournamentSpec, home: Path | str | None = None) -> "Tournament":
        """The tournament's folder: made for a new spec; the same spec again resumes it; another is refused.
        (A game of a several-game spec: open them all with :func:`open_tournaments`.)"""
        root = Path(home or mosaic_home()) / "arena" / spec.name
        if spec.game is not None:
            root = root / spec.game
        if (root / "spec.json").is_file():
            existing = json.loads((root / "spec.json").read_text(encoding="utf-8"))
            if existing != json.loads(json.dumps(spec.source)):
                raise UserError(f"name: a tournament named {spec.title!r} exists with another spec; allowed: "
                                "another name, or the same spec to resume it")
        else:
            root.mkdir(parents=True, exist_ok=True)
            write_json_atomic(root / "spec.json", spec.source)
        return cls(root)

    @classmethod
    def get(cls, name: str, home: Path | str | None = None) -> "Tournament":
        """A one-environment tournament ``NAME``, or a game of a several-game one, ``NAME/GAME``."""
        arena = Path(home or mosaic_home()) / "arena"
        root = arena / name
        if not (root / "spec.json").is_file() or ".." in Path(name).parts:
            raise UserError(f"tournament: no tournament named {name!r} in {arena}")
        league = _league_games(root)
        if league is not None:
            raise UserError(f"tournament: {name!r} has several games; allowed: "
                            + ", ".join(f"{name}/{game}" for game in league))
        return cls(root)

    @property
    def games_path(self) -> Path:
        return self.root / "games.jsonl"

    def games(self) -> list[dict[str, Any]]:
        """Every finished game (a torn last line from a crash is skipped; a game recorded twice counts once)."""
        seen: dict[tuple[str, int], dict[str, Any]] = {}
        for game in read_jsonl(self.games_path):
            seen.setdefault((game["pairing"], int(game["game"])), game)
        return list(seen.values())

    def record(self, game: Mapping[str, Any]) -> None:
        append_jsonl(self.games_path, dict(game))




def _league_games(root: Path) -> list[str] | None:
    """The game keys of the several-game spec kept in ``root`` (None: a one-environment tournament)."""
    try:
        source = json.loads((root / "spec.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    games = source.get("games") if isinstance(source, dict) else None
    return list(games) if isinstance(games, dict) else None


def open_tournaments(specs: list[TournamentSpec], home: Path | str | None = None) -> list[Tournament]:
    """Every game's tournament of a spec (:func:`parse_specs`), made or resumed. A several-game spec keeps its
    whole source in ``arena/NAME/spec.json`` and each game in ``arena/NAME/GAME/``; another spec under the
    name is refused (before any game's folder is touched)."""
    if specs[0].game is None:
        return [Tournament.open(specs[0], home)]
    root = Path(home or mosaic_home()) / "arena" / specs[0].name
    league = specs[0].league
    if (root / "spec.json").is_file():
        if json.loads((root / "spec.json").read_text(encoding="utf-8")) != league:
            raise UserError(f"name: a tournament named {specs[0].name!r} exists with another spec; allowed: "
                            "another name, or the same spec to resume it")
    else:
        root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(root / "spec.json", league)
    return [Tournament.open(spec, home) for spec in specs]


def get_tournaments(name: str, home: Path | str | None = None) -> list[Tournament]:
    """A tournament's games by name: one for a one-environment tournament (or ``NAME/GAME``), every game's
    for a several-game one."""
    arena = Path(home or mosaic_home()) / "arena"
    root = arena / name
    games = _league_games(root) if "/" not in name else None
    if games is None:
        return [Tournament.get(name, home)]
    missing = [game for game in games if not (root / game / "spec.json").is_file()]
    if missing:  # the spec was kept, the games' folders not yet (killed between the two)
        raise UserError(f"tournament: {name!r} has not started its game(s) {', '.join(missing)} yet; run it "
                        "first (mosaic arena run SPEC)")
    return [Tournament(root / game) for game in games]


def listed_names(home: Path | str | None = None) -> list[str]:
    """Every tournament in the home by name, a several-game one's games as ``NAME/GAME`` (what the GUI lists)."""
    arena = Path(home or mosaic_home()) / "arena"
    names = []
    try:
        folders = sorted(p for p in arena.iterdir() if not p.name.startswith(".") and (p / "spec.json").is_file())
    except OSError:
        return []
    for folder in folders:
        games = _league_games(folder)
        if games is None:
            names.append(folder.name)
        else:
            names += [f"{folder.name}/{game}" for game in games if (folder / game / "spec.json").is_file()]
    return names


@dataclass(frozen=True)
class Shard:
    """Games of one pairing, played by one pair of player processes (``first`` and ``second``, the pairing's
    two players, each opened once): each game names who moves first, so both seatings share the processes."""

    first: str
    second: str
    games: tuple[tuple[str, int, int, str], ...]  # (pairing id, game, seed, the player who moves first)

    @classmethod
    def of(cls, first: str, second: str, games: Any) -> "Shard":
        """A shard from its config's lists: ``[pairing, game, seed, mover]`` each, or ``[pairing, game, seed]``
        as older drivers wrote them in ``shards.jsonl`` (``first`` moves first)."""
        return cls(first, second, tuple((g[0], g[1], g[2], g[3] if len(g) == 4 else first) for g in games))

    def seating(self, mover: str) -> tuple[str, str]:
        """``(first mover, second mover)`` of a game whose first mover is ``mover``."""
        return (self.first, self.second) if mover == self.first else (self.second, self.first)


def pending(tournament: Tournament) -> list[tuple[str, int, str, str, int]]:
    """The schedule's games not in the journal yet."""
    done = {(g["pairing"], int(g["game"])) for g in tournament.games()}
    return [item for item in tournament.spec.schedule() if (item[0], item[1]) not in done]


def shards(todo: list[tuple[str, int, str, str, int]], size: int) -> list[Shard]:
    """``todo`` grouped by pairing (both seatings in one shard: one pair of player processes), in chunks of at
    most ``size`` games, the schedule's order kept."""
    groups: dict[str, tuple[tuple[str, str], list[tuple[str, int, int, str]]]] = {}
    for pairing, game, first, second, seed in todo:
        groups.setdefault(pairing, ((first, second), []))[1].append((pairing, game, seed, first))
    return [Shard(first, second, tuple(games[i:i + size]))
            for (first, second), games in groups.values() for i in range(0, len(games), size)]


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
        for pairing, game, seed, mover in shard.games:
            if stop is not None and stop.is_set():
                break
            line = play_game(spec, players, *shard.seating(mover), pairing, game, seed, groups)
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


def run(tournament: Tournament, report: Callable[[str], None] | None = None, home: Path | str | None = None) -> int:
    """Play every game not yet journaled, one after another in this process (one pair of player processes
    per pairing, kept for its games); returns how many games were played now. (Shards as runs on the
    daemon or a cluster, several at once: :func:`mosaic.arena.driver.run`.)"""
    todo = pending(tournament)
    if not todo:
        return 0
    seat_groups(tournament.spec)  # a game the arena cannot seat is refused before any player starts
    journal = journal_to(tournament, report)
    played = 0
    for shard in shards(todo, tournament.spec.games_per_pairing):
        played += len(play_shard(tournament.spec, shard, home, journal))
    return played


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
