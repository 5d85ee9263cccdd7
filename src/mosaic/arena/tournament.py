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
    adaptive: {width: 200, budget: 600, step: 2}   # optional: games_per_pairing is then the first round

Adaptive scheduling (``adaptive``, :mod:`mosaic.arena.schedule`): after the first round (``games_per_pairing``
games of every pairing) ``step`` more games at a time go to the pairing whose games narrow the widest rating
interval most, until every rating's interval is narrower than ``width`` Elo or ``budget`` games are played;
the decisions are kept in ``adaptive.jsonl`` (:meth:`Tournament.adapt`).

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

import dataclasses
import itertools
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar, Iterator, Mapping

from mosaic.configkit import from_dict, option, read_document
from mosaic.errors import ConfigError, UserError
from mosaic.runs import NAME_PATTERN, NAME_RULE, append_jsonl, mosaic_home, read_jsonl, write_json_atomic
from mosaic.workerkit.envs import API_TYPES

FORMATS = ("round_robin", "gauntlet")
#: an adaptive tournament's decisions, one line each (the pairings given more games)
ADAPTIVE_FILE = "adaptive.jsonl"
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
    #: adaptive scheduling's settings ``{width, budget, step}`` (None: every pairing plays games_per_pairing)
    adaptive: dict[str, Any] | None = None
    #: the games an adaptive schedule added to each pairing so far (pairing id -> games), from adaptive.jsonl
    extra: dict[str, int] = field(default_factory=dict)

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
            for game in range(self.games_per_pairing + self.extra.get(f"{a}~{b}", 0)):
                first, second = (a, b) if game % 2 == 0 else (b, a)
                # team games come in pairs on one env seed, sides swapped: each side's returns compare like for like
                yield f"{a}~{b}", game, first, second, self.seed + (game // 2 if self.sides else game)


# -- the spec as written ----------------------------------------------------------------------------------
_NOT_EMPTY = re.compile(".+", re.S)


@dataclass
class GameEnvironment:
    """The env a tournament's games are played on."""

    family: str = option(pattern=_NOT_EMPTY, what="an env family", allowed="the env's family, e.g. classic",
                         help="the env's family (classic, mpe, ...)")
    env_id: str = option(pattern=_NOT_EMPTY, what="an env id", allowed="the env's id, e.g. connect_four_v3",
                         help="the env's id within its family")
    env_kwargs: dict[str, Any] = option(default_factory=dict, help="keyword arguments for the env's constructor")
    api_type: str | None = option(None, choices=API_TYPES, help="the PettingZoo API the games step (default: "
                                                                "parallel where the env and the players have it)")


@dataclass
class Player:
    """A player given with options."""

    target: str = option(help="a run (id or folder) or a checkpoint, 'random' or 'scripted:MODULE:FUNCTION'")
    options: dict[str, Any] = option(default_factory=dict, help="the player's options (mosaic player --help)")


@dataclass
class AdaptiveSchedule:
    """Adaptive scheduling: after the first round, games where they narrow the widest interval most."""

    width: float = option(finite=True, allowed="a number > 0 (Elo)",
                          help="stop once every rating's 95% interval is narrower than this many Elo")
    budget: int = option(min=1, allowed="an integer >= one round (pairings x games_per_pairing)",
                         help="games in all at most, the first round's included")
    step: int = option(2, min=2, max=1000, allowed="an even integer from 2 to 1000",
                       help="games added to a chosen pairing at a time (even: the seats alternate)")


@dataclass
class TournamentReport:
    reps: int = option(1000, min=100, max=100_000, allowed="an integer from 100 to 100000",
                       help="bootstrap resamples of the ratings' and the population measures' intervals")
    confidence: float = option(0.95, min=0.5, max=0.999, finite=True, allowed="a number from 0.5 to 0.999",
                               help="the intervals' confidence level")
    seed: int = option(0, min=0, allowed="an integer >= 0", help="the bootstrap's seed")


_ENVIRONMENT = "{family, env_id[, env_kwargs, api_type]}"
_LABEL = Annotated[str, option(pattern=re.compile("[^~]+"), what="a player label",
                               allowed="non-empty text without '~' (it joins the two labels of a pairing)")]
_PLAYER = Annotated[str | Player, option(allowed="a target string or {target, options}")]
_GAME = Annotated[str, option(pattern=NAME_PATTERN, what="a valid game name", allowed=NAME_RULE)]
_SIDE = Annotated[list[str], option(min_items=1, allowed="a list of agent ids")]
#: what a game of a several-game spec may set as well as the tournament
_PER_PAIRING = {"min": 1, "max": 100_000, "allowed": "an integer from 1 to 100000"}
_OPENING = {"min": 0, "max": 1000, "allowed": "an integer from 0 to 1000 (random legal moves opening each game)"}
_MAX_STEPS = {"min": 1, "allowed": "an integer >= 1 or null"}
_SIDES = {"min_items": 2, "max_items": 2, "allowed": "two sides, each a list of agent ids, e.g. {adversaries: "
                                                     "[adversary_0], good: [agent_0, agent_1]}"}


@dataclass(kw_only=True)
class TournamentFields:
    """A tournament spec as written (the module's docstring says what each field means): one ``environment``,
    or several ``games``."""

    name: str = option(pattern=NAME_PATTERN, what="a valid tournament name", allowed=NAME_RULE,
                       help="the tournament's folder under MOSAIC_HOME/arena")
    description: str = option("", help="what the tournament is for")
    environment: GameEnvironment | None = option(None, allowed=_ENVIRONMENT, help="the env of every game")
    games: dict[_GAME, Annotated[dict[str, Any], option(allowed="{environment, players, ...}")]] | None = option(
        None, min_items=1, help="GAME -> its environment and what it sets otherwise (GameFields)",
        allowed="an object of at least one game (GAME -> {environment, players, ...})")
    players: dict[_LABEL, _PLAYER] = option(
        min_items=2, help="label -> what plays",
        allowed="an object of at least two players (label -> a run, 'random' or 'scripted:MODULE:FUNCTION', or "
                "{target, options})")
    format: str = option("round_robin", choices=FORMATS, what="a tournament format", help="round_robin or gauntlet")
    candidate: str | None = option(None, help="the gauntlet's player, against every other")
    games_per_pairing: int = option(10, **_PER_PAIRING, help="split between the two seatings")
    seed: int = option(0, min=0, allowed="an integer >= 0", help="game g of a pairing is seeded seed + g")
    max_steps: int | None = option(None, **_MAX_STEPS, help="a game's steps at most")
    opening_moves: int = option(0, **_OPENING, help="random legal moves opening each game")
    sides: dict[str, _SIDE] | None = option(None, **_SIDES, help="a team game's two sides")
    report: TournamentReport = option(default_factory=TournamentReport, allowed="{reps, confidence, seed}",
                                      help="the ratings' intervals")
    adaptive: AdaptiveSchedule | None = option(None, allowed="{width, budget[, step]}",
                                               help="stop early, spending games where the ratings are least certain")


@dataclass
class GameFields:
    """A game of a several-game spec: its env, the players that play it, and what it sets otherwise than the
    tournament (format, candidate, seed and report are the tournament's)."""

    #: said after the allowed keys of an unknown one (a tournament's key put in a game)
    UNKNOWN_FIELD_NOTE: ClassVar[str] = "format, candidate, seed and report are the tournament's"

    environment: GameEnvironment = option(allowed=_ENVIRONMENT, help="the game's env")
    players: list[Annotated[str, option(allowed="one of the spec's player labels")]] | None = option(
        None, allowed="a list of the spec's player labels",
        help="the labels of the players that play it (default: all)")
    games_per_pairing: int = option(10, **_PER_PAIRING)
    opening_moves: int = option(0, **_OPENING)
    sides: dict[str, _SIDE] | None = option(None, **_SIDES)
    max_steps: int | None = option(None, **_MAX_STEPS)


#: what a game takes from the tournament unless it sets it
_OVERRIDES = tuple(f.name for f in dataclasses.fields(GameFields) if f.name not in ("environment", "players"))


def _spec(fields: TournamentFields, source: Mapping[str, Any], environment: Mapping[str, Any],
          game: str | None = None, where: str = "") -> TournamentSpec:
    """The :class:`TournamentSpec` of checked ``fields`` (a game's: its own settings in them), once what one field
    says of another holds; errors name the field under ``where`` (``games.GAME.``)."""
    if fields.format == "gauntlet" and fields.candidate not in fields.players:
        raise UserError(f"candidate: {fields.candidate!r} is not a player; allowed: {', '.join(fields.players)}")
    if fields.sides and fields.opening_moves:
        raise UserError(f"{where}opening_moves: random openings are for two-player turn-based games, not with "
                        "sides; allowed: 0 with sides")
    if fields.sides and fields.games_per_pairing % 2:
        raise UserError(f"{where}games_per_pairing: {fields.games_per_pairing} with sides; allowed: an even number "
                        "(games come in pairs, sides swapped)")
    players = [PlayerSpec(label, value) if isinstance(value, str) else PlayerSpec(label, value.target, value.options)
               for label, value in fields.players.items()]
    adaptive = _adaptive(fields, len(players))
    spec = TournamentSpec(fields.name, dict(environment), players, fields.format, fields.candidate,
                          fields.games_per_pairing, fields.seed, fields.max_steps, dict(source.get("report", {})),
                          dict(source), fields.opening_moves,
                          {str(k): v for k, v in fields.sides.items()} if fields.sides else None, game)
    spec.adaptive = adaptive
    return spec


def _adaptive(fields: TournamentFields, players: int) -> dict[str, Any] | None:
    """The adaptive schedule's settings once they make sense with the rest of the spec (errors name them)."""
    adaptive = fields.adaptive
    if adaptive is None:
        return None
    if not adaptive.width > 0:
        raise UserError(f"adaptive.width: {adaptive.width:g}; allowed: a number > 0 (Elo)")
    if adaptive.step % 2:
        raise UserError(f"adaptive.step: {adaptive.step}; allowed: an even integer from 2 to 1000 (the seats "
                        "alternate)")
    pairings = players - 1 if fields.format == "gauntlet" else players * (players - 1) // 2
    one_round = pairings * fields.games_per_pairing
    if adaptive.budget < one_round:
        raise UserError(f"adaptive.budget: {adaptive.budget} is below one round ({pairings} pairings x "
                        f"{fields.games_per_pairing} games_per_pairing = {one_round}); allowed: an integer >= "
                        f"{one_round}")
    return {"width": float(adaptive.width), "budget": int(adaptive.budget), "step": int(adaptive.step)}


def _an_object(data: Any) -> Mapping[str, Any]:
    if not isinstance(data, Mapping):
        raise UserError("spec: expected an object (name, players, environment or games, ...)")
    return data


def parse_spec(data: Mapping[str, Any]) -> TournamentSpec:
    """A one-environment spec (also each game's spec of a several-game one, which carries ``game``, its key:
    :func:`parse_specs` reads a spec of either kind)."""
    game = _an_object(data).get("game")
    game = game if isinstance(game, str) else None
    if "games" in data:
        raise UserError("games: a spec lists its games or names one environment; allowed: games or environment, "
                        "not both")
    fields = from_dict(TournamentFields, {k: v for k, v in data.items() if game is None or k != "game"})
    if fields.environment is None:
        raise UserError(f"environment: is required; allowed: {_ENVIRONMENT}, or games instead of environment")
    return _spec(fields, data, data["environment"], game)


def parse_specs(data: Mapping[str, Any]) -> list[TournamentSpec]:
    """A spec of either kind as one :class:`TournamentSpec` per game: one for a spec naming an
    ``environment``; one per entry of ``games`` (each a tournament of its own under the spec's name, with the
    spec's fields and the game's own ``environment``, ``players`` (labels, default all) and overrides of
    ``games_per_pairing``, ``opening_moves``, ``sides`` and ``max_steps``). Every error names its field
    (``games.GAME.FIELD`` for a game's)."""
    if "games" not in _an_object(data):
        if "game" in data:
            raise UserError("game: MOSAIC writes it into each game's spec of a several-game spec; allowed: "
                            "games: {GAME: {environment, ...}} to list games")
        return [parse_spec(data)]
    if "environment" in data:
        raise UserError("environment: a spec names one environment or lists games, each with its own; allowed: "
                        "environment or games, not both")
    fields = from_dict(TournamentFields, data)
    _spec(fields, data, {})  # what the tournament's own fields say of each other, errors naming them
    everyone = list(fields.players)
    base = {k: v for k, v in data.items() if k != "games"}
    specs = []
    for key, given in (fields.games or {}).items():
        where = f"games.{key}"
        if key in RESERVED_GAMES:
            raise UserError(f"{where}: {key!r} is reserved (a folder of the tournament's); allowed: another name")
        try:
            game = from_dict(GameFields, {**{k: data[k] for k in _OVERRIDES if k in data}, **given}, where)
        except ConfigError as exc:  # a game's players, or one of them: the error names the spec's labels
            if exc.field != f"{where}.players" and not exc.field.startswith(f"{where}.players["):
                raise
            raise ConfigError(exc.field, f"{str(exc)[len(exc.field) + 2:]}: {', '.join(everyone)}") from None
        labels = everyone if game.players is None else game.players
        for label in labels:
            if label not in fields.players:
                raise UserError(f"{where}.players: {label!r} is not a player; allowed: {', '.join(everyone)}")
        if len(set(labels)) != len(labels) or len(labels) < 2:
            raise UserError(f"{where}.players: expected at least two different players; allowed: "
                            f"{', '.join(everyone)}")
        if fields.format == "gauntlet" and fields.candidate not in labels:
            raise UserError(f"{where}.players: the gauntlet's candidate {fields.candidate!r} plays every game; "
                            f"allowed: a list that includes it")
        merged = dataclasses.replace(fields, players={label: fields.players[label] for label in labels},
                                     **{k: getattr(game, k) for k in _OVERRIDES})
        source = {**base, **{k: v for k, v in given.items() if k != "players"},
                  "players": {label: data["players"][label] for label in labels}, "game": key}
        spec = _spec(merged, source, given["environment"], key, f"{where}.")
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
        for entry in read_jsonl(root / ADAPTIVE_FILE):  # the adaptive schedule's decisions so far
            for pairing in entry.get("pairings", []):
                self.spec.extra[pairing] = self.spec.extra.get(pairing, 0) + int(entry["games"])

    @classmethod
    def open(cls, spec: TournamentSpec, home: Path | str | None = None) -> "Tournament":
        """The tournament's folder: made for a new spec; the same spec again resumes it; another is refused.
        (A game of a several-game spec: open them all with :func:`open_tournaments`.)"""
        root = Path(home or mosaic_home()) / "arena" / spec.name
        if spec.game is not None:
            root = root / spec.game
        if (root / "spec.json").is_file():
            existing = json.loads((root / "spec.json").read_text(encoding="utf-8"))
            given = json.loads(json.dumps(spec.source))
            if existing != given:
                was, now = existing.get("players") or {}, given.get("players") or {}
                differs = [f"players added: {', '.join(sorted(set(now) - set(was)))}" if set(now) - set(was) else "",
                           f"players removed: {', '.join(sorted(set(was) - set(now)))}" if set(was) - set(now) else "",
                           *(f"{key} changed" for key in sorted(set(existing) | set(given))
                             if key != "players" and existing.get(key) != given.get(key)),
                           *(f"player {label} changed" for label in sorted(set(was) & set(now))
                             if was[label] != now[label])]
                raise UserError(f"name: a tournament named {spec.title!r} exists with another spec "
                                f"({'; '.join(d for d in differs if d)}); its games are kept in {root}. allowed: "
                                "another name for the new spec (a new tournament, its games played anew), or the "
                                "spec as it was to resume this one")
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

    def adapt(self, picks: int = 1) -> Any:
        """An adaptive tournament's next step once its scheduled games are all played: the
        :class:`mosaic.arena.schedule.Decision` (None: not adaptive, or games still to play). A decision to go
        on is kept in ``adaptive.jsonl`` and its games added to the schedule (``picks`` pairings at most)."""
        settings = self.spec.adaptive
        if settings is None or pending(self):
            return None
        decision = self.adaptive_decision(picks)
        if decision is None:
            return None
        if decision.pairings:
            ids = {tuple(sorted(pair)): f"{pair[0]}~{pair[1]}" for pair in self.spec.pairings()}
            chosen = [ids[pair] for pair in decision.pairings]
            append_jsonl(self.root / ADAPTIVE_FILE, {"pairings": chosen, "games": settings["step"],
                                                     "played": decision.played,
                                                     "widest": max(w for p, w in decision.widths.items()
                                                                   if p not in decision.unbounded)})
            for pairing in chosen:
                self.spec.extra[pairing] = self.spec.extra.get(pairing, 0) + settings["step"]
        return decision

    def adaptive_decision(self, picks: int = 1) -> Any:
        """Where the adaptive schedule stands on the games journaled so far (:func:`mosaic.arena.schedule.decide`;
        nothing is recorded); None when the tournament is not adaptive or a pairing has no game yet."""
        from mosaic.arena import schedule
        from mosaic.arena.games import rated_games

        settings = self.spec.adaptive
        rated = rated_games(self.games(), bool(self.spec.sides))
        pairs = [tuple(sorted(pair)) for pair in self.spec.pairings()]
        met = {tuple(sorted((g.a, g.b))) for g in rated}
        if settings is None or any(pair not in met for pair in pairs):
            return None
        players = sorted({p.label for p in self.spec.players})
        confidence = float(self.spec.report.get("confidence", 0.95))
        return schedule.decide(players, pairs, [(g.a, g.b, g.score_a) for g in rated], settings["width"],
                               settings["budget"], settings["step"], picks, confidence)


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

    def tell_environment(self, environment: Any) -> None:
        self.player.tell_environment(environment)

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
    adaptive = tournament.spec.adaptive is not None
    if not pending(tournament) and not adaptive:
        return 0
    seat_groups(tournament.spec)  # a game the arena cannot seat is refused before any player starts
    journal = journal_to(tournament, report)
    played = 0
    players: dict[str, Any] | None = {} if adaptive else None  # kept open across an adaptive schedule's steps
    try:
        while True:
            for shard in shards(pending(tournament), tournament.spec.games_per_pairing):
                played += len(play_shard(tournament.spec, shard, home, journal, players))
            decision = tournament.adapt()
            if decision is None or decision.done:
                if decision is not None and report:
                    report(adaptive_line(decision))
                return played
    finally:
        for player in (players or {}).values():
            player.close()


def adaptive_line(decision: Any) -> str:
    """What an adaptive schedule's end says."""
    widest = max(w for p, w in decision.widths.items() if p not in decision.unbounded)
    why = "every interval narrower than the width" if decision.done == "width" else "the budget spent"
    unbounded = (f"; not counted, having won or lost every game: {', '.join(decision.unbounded)}"
                 if decision.unbounded else "")
    return (f"adaptive schedule: stopped after {decision.played} games ({why}; widest interval {widest:.0f} Elo"
            f"{unbounded}); a round robin at the same width: {decision.uniform} games, {decision.saved} saved")


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
