"""Several games in one tournament spec: one tournament per game under one name, each rated on its own;
played with real player processes, killed and resumed without replaying a game, reported per game."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from cli_support import run_cli
from mosaic.arena.tournament import parse_specs
from mosaic.errors import UserError
from mosaic.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("arena")

CONNECT_FOUR = {"family": "classic", "env_id": "connect_four_v3"}
TICTACTOE = {"family": "classic", "env_id": "tictactoe_v3"}
FIELD = {"random": "random", "lowest": "scripted:mosaic.arena.heuristics:first_legal",
         "heuristic": "scripted:mosaic.arena.heuristics:connect_four"}


def league(**extra):
    """Connect four (every player, 30 games a pairing) and tic-tac-toe (random and the lowest legal move,
    10 games, one random opening move)."""
    return {"name": "league", "players": FIELD, "games_per_pairing": 20, "seed": 4, "report": {"reps": 200},
            "games": {"connect_four": {"environment": CONNECT_FOUR},
                      "tictactoe": {"environment": TICTACTOE, "players": ["random", "lowest"],
                                    "games_per_pairing": 10, "opening_moves": 1}}, **extra}


def journal(home, game):
    path = home / "arena" / "league" / game / "games.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def test_each_game_of_a_spec_is_a_tournament_of_its_own():
    specs = parse_specs(league())
    assert [(s.game, s.title, s.environment["env_id"]) for s in specs] == [
        ("connect_four", "league/connect_four", "connect_four_v3"), ("tictactoe", "league/tictactoe", "tictactoe_v3")]
    c4, ttt = specs
    assert [p.label for p in c4.players] == list(FIELD) and c4.games_per_pairing == 20 and c4.opening_moves == 0
    assert [p.label for p in ttt.players] == ["random", "lowest"] and ttt.pairings() == [("random", "lowest")]
    assert ttt.games_per_pairing == 10 and ttt.opening_moves == 1 and ttt.seed == c4.seed == 4
    assert ttt.report == c4.report == {"reps": 200}
    from cli_support import REPO
    from mosaic.arena.tournament import read_specs

    example = read_specs(REPO / "examples" / "arena" / "classic_league.yaml")
    assert [s.title for s in example] == ["classic-league/connect_four", "classic-league/tictactoe"]
    one = parse_specs({"name": "one", "environment": CONNECT_FOUR, "players": FIELD})
    assert len(one) == 1 and one[0].game is None and one[0].title == "one"  # a one-environment spec as before


@pytest.mark.parametrize("change, message", [
    ({"games": {}}, "games: needs at least 1 item(s), got 0; allowed: an object of at least one game"),
    ({"games": []}, "games: must be an object, got list; allowed: an object of at least one game"),
    ({"environment": CONNECT_FOUR}, "environment: a spec names one environment or lists games"),
    ({"game": "x"}, "game: unknown field"),
    ({"games": {"ttt": {"environment": TICTACTOE, "players": ["random", "x"]}}},
     "games.ttt.players: 'x' is not a player; allowed: random, lowest, heuristic"),
    ({"games": {"ttt": {"environment": TICTACTOE, "players": ["random"]}}}, "games.ttt.players: expected at least two"),
    ({"games": {"ttt": {"environment": TICTACTOE, "players": "random"}}},
     "games.ttt.players: must be an array, got str; allowed: a list of the spec's player labels: random, lowest, "
     "heuristic"),
    ({"games": {"ttt": {"environment": TICTACTOE, "players": ["random", 3]}}},
     "games.ttt.players[1]: must be a string, got 3; allowed: one of the spec's player labels: random, lowest, "
     "heuristic"),
    ({"games": {"ttt": {"environment": {"family": "classic"}}}}, "games.ttt.environment.env_id: is required;"),
    ({"games": {"ttt": {}}}, "games.ttt.environment: is required; allowed: {family, env_id"),
    ({"games": {"ttt": {"environment": TICTACTOE, "seed": 1}}},
     "games.ttt.seed: unknown field; allowed: environment, players, games_per_pairing, opening_moves, sides, "
     "max_steps (format, candidate, seed and report are the tournament's)"),
    ({"games": {"ttt": {"environment": TICTACTOE, "games_per_pairing": 0}}},
     "games.ttt.games_per_pairing: 0 is below the minimum 1; allowed: an integer from 1"),
    ({"games": {"ttt": {"environment": TICTACTOE, "opening_moves": -2}}},
     "games.ttt.opening_moves: -2 is below the minimum 0; allowed: an integer from 0"),
    ({"games": {"report": {"environment": TICTACTOE}}}, "games.report: 'report' is reserved"),
    ({"games": {"a b": {"environment": TICTACTOE}}}, "games.a b: 'a b' is not a valid game name"),
    ({"games": {"ttt": "tictactoe_v3"}}, "games.ttt: must be an object, got str; allowed: {environment, players"),
    ({"format": "gauntlet", "candidate": "heuristic",
      "games": {"ttt": {"environment": TICTACTOE, "players": ["random", "lowest"]}}},
     "games.ttt.players: the gauntlet's candidate 'heuristic' plays every game"),
    ({"format": "swiss"}, "format: 'swiss' is not a tournament format; allowed: round_robin"),
    ({"games_per_pairing": "many"}, "games_per_pairing: must be an integer, got 'many'; allowed: an integer"),
    ({"players": {"a": "random"}}, "players: needs at least 2 item(s), got 1; allowed: an object of at least two "
                                 "players"),
])
def test_a_bad_several_game_spec_is_refused_naming_the_field(change, message):
    with pytest.raises(UserError) as err:
        parse_specs({**league(), **change})
    assert str(err.value).startswith(message), str(err.value)


@pytest.mark.parametrize("game, message", [
    ({"environment": {"family": "mpe", "env_id": "simple_adversary_v3"}}, "games.bad.sides: simple_adversary_v3 has 3"),
    ({"environment": {"family": "classic", "env_id": "nope_v0"}}, "games.bad.environment.env_id: 'nope_v0'"),
])
def test_a_game_that_cannot_be_seated_is_refused_before_anything_is_written(tmp_path, game, message):
    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps({**league(), "games": {"fine": {"environment": TICTACTOE}, "bad": game}}))
    proc = run_cli("arena", "run", str(spec), home=tmp_path / "home", timeout=300)
    assert proc.returncode == 2 and f"mosaic: error: {message}" in proc.stderr, proc.stderr
    assert not (tmp_path / "home" / "arena").exists()  # not even the game that could be seated


def test_a_two_game_tournament_resumes_after_a_kill_and_reports_each_game(tmp_path):
    spec = tmp_path / "league.json"
    spec.write_text(json.dumps(league()))
    home = tmp_path / "home"
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "arena", "run", str(spec)],
                            env={**os.environ, "MOSAIC_HOME": str(home)}, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: len(journal(home, "connect_four")) >= 5, 120, "five games", proc=proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    before = {game: len(journal(home, game)) for game in ("connect_four", "tictactoe")}
    assert before["connect_four"] < 60 and before["tictactoe"] == 0, before  # killed in the first game's games
    resumed = run_cli("arena", "run", str(spec), home=home, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"league/connect_four: {home / 'arena' / 'league' / 'connect_four'}; {before['connect_four']} of 60 " \
           "games already played" in resumed.stderr
    assert "league/tictactoe" in resumed.stderr and "0 of 10 games already played" in resumed.stderr
    after = {game: journal(home, game) for game in ("connect_four", "tictactoe")}
    for game, total in (("connect_four", 60), ("tictactoe", 10)):
        keys = [(g["pairing"], g["game"]) for g in after[game]]
        assert len(keys) == len(set(keys)) == total, game  # every game once: none replayed
    assert {g["pairing"] for g in after["tictactoe"]} == {"random~lowest"}  # only the game's own players
    # the games of an uninterrupted run (each game is seeded)
    fresh = tmp_path / "fresh"
    assert run_cli("arena", "run", str(spec), home=fresh, timeout=600).returncode == 0
    for game in after:
        assert {(g["pairing"], g["game"]): g["returns"] for g in after[game]} == \
            {(g["pairing"], g["game"]): g["returns"] for g in journal(fresh, game)}

    status = run_cli("arena", "status", "league", home=home, timeout=300)
    assert status.returncode == 0, status.stderr
    rows = [line.split() for line in status.stdout.splitlines()[2:]]
    assert ["tictactoe", "random", "vs", "lowest", "10", "10"] in rows and len(rows) == 4
    assert ["connect_four", "lowest", "vs", "heuristic", "20", "20"] in rows
    report = run_cli("arena", "report", "league", home=home, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    folder = home / "arena" / "league" / "report"
    text = (folder / "report.md").read_text()
    assert text.index("## Game: connect_four") < text.index("## Game: tictactoe") and "not pooled" in text
    for game, players in (("connect_four", set(FIELD)), ("tictactoe", {"random", "lowest"})):
        ratings = json.loads((folder / game / "ratings.json").read_text())
        assert set(ratings["ratings"]) == players  # rated on its own: only the game's players, from its games
        assert ratings["games"] == len(after[game]) and (folder / game / "ratings.png").stat().st_size > 5000
        assert (folder / game / "games.csv").read_text().count("\n") == len(after[game]) + 1
    c4 = json.loads((folder / "connect_four" / "ratings.json").read_text())["ratings"]
    assert max(c4, key=lambda p: c4[p]["elo"]) == "heuristic"
    # one game alone: its own folder's report
    alone = run_cli("arena", "report", "league/tictactoe", home=home, timeout=300)
    assert alone.returncode == 0 and (home / "arena" / "league" / "tictactoe" / "report" / "ratings.csv").is_file()
    # the same name with another spec is refused, a one-environment spec too
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**league(), "games_per_pairing": 2}))
    refused = run_cli("arena", "run", str(other), home=home, timeout=300)
    assert refused.returncode == 2 and "name: a tournament named 'league' exists with another spec" in refused.stderr
    other.write_text(json.dumps({"name": "league", "environment": CONNECT_FOUR, "players": FIELD}))
    refused = run_cli("arena", "run", str(other), home=home, timeout=300)
    assert refused.returncode == 2 and "exists with another spec" in refused.stderr, refused.stderr
    asked = run_cli("arena", "report", "nope", home=home, timeout=300)
    assert asked.returncode == 2 and "tournament: no tournament named 'nope'" in asked.stderr
