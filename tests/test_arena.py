"""Tournaments: real player processes, a journal per game, resume after a kill, ratings in the report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from cli_support import run_cli
from mosaic.arena.tournament import parse_spec
from mosaic.errors import UserError
from mosaic.host.daemon.endpoint import stop_daemon
from mosaic.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("arena")

CONNECT_FOUR = {"family": "classic", "env_id": "connect_four_v3"}
FIELD = {"random": "random", "lowest": "scripted:mosaic.arena.heuristics:first_legal",
         "heuristic": "scripted:mosaic.arena.heuristics:connect_four"}


def _spec(tmp_path, name, games, **extra):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps({"name": name, "environment": CONNECT_FOUR, "players": FIELD,
                                "games_per_pairing": games, "seed": 5, "report": {"reps": 300}, **extra}))
    return path


@pytest.mark.parametrize("fields, field", [
    ({"format": "swiss"}, "format:"), ({"format": "gauntlet", "candidate": "nobody"}, "candidate:"),
    ({"games_per_pairing": 0}, "games_per_pairing:"), ({"players": {"a": "random"}}, "players:"),
    ({"colour": 1}, "colour:"), ({"environment": {"family": "classic"}}, "environment.env_id:"),
    ({"opening_moves": -1}, "opening_moves:"),
])
def test_a_bad_tournament_spec_is_refused_naming_the_field(fields, field):
    with pytest.raises(UserError) as err:
        parse_spec({"name": "t", "environment": CONNECT_FOUR, "players": FIELD, **fields})
    assert str(err.value).startswith(field)


def test_a_tournament_spec_is_refused_in_the_words_of_a_run_config():
    """The spec is read by the config kit, as a run config is: the same mistake is worded the same way. An
    unknown key names the nearest and every allowed key; a value of the wrong type names its field and the
    type wanted (a spec's field then says what it allows)."""
    from dataclasses import fields

    from mosaic.arena.tournament import TournamentFields, TournamentReport
    from mosaic.workerkit.run_fields import Checkpointing, RunConfig

    def refusal(parse, data):
        with pytest.raises(UserError) as err:
            parse(data)
        return str(err.value)

    def run(data):
        return RunConfig.from_dict({"run_id": "r", **data})

    def spec(data):
        return parse_spec({"name": "t", "environment": CONNECT_FOUR, "players": FIELD, **data})

    def keys(cls):
        return ", ".join(f.name for f in fields(cls))

    assert refusal(run, {"seeds": 3}) == f"seeds: unknown field (did you mean 'seed'?); allowed: {keys(RunConfig)}"
    assert refusal(spec, {"seeds": 3}) == \
        f"seeds: unknown field (did you mean 'seed'?); allowed: {keys(TournamentFields)}"
    assert refusal(run, {"checkpoint": {"kep": 1}}) == \
        f"checkpoint.kep: unknown field (did you mean 'keep'?); allowed: {keys(Checkpointing)}"
    assert refusal(spec, {"report": {"rep": 1}}) == \
        f"report.rep: unknown field (did you mean 'reps'?); allowed: {keys(TournamentReport)}"
    assert refusal(run, {"seed": "two"}) == "seed: must be an integer, got 'two'"
    assert refusal(spec, {"seed": "two"}) == "seed: must be an integer, got 'two'; allowed: an integer >= 0"
    assert refusal(run, {"seed": -1}) == "seed: -1 is below the minimum 0"
    assert refusal(spec, {"seed": -1}) == "seed: -1 is below the minimum 0; allowed: an integer >= 0"


def test_a_round_robin_is_played_rated_and_reported(tmp_path):
    home = tmp_path / "home"
    proc = run_cli("arena", "run", str(_spec(tmp_path, "c4", 8)), home=home, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    games = [json.loads(x) for x in (home / "arena" / "c4" / "games.jsonl").read_text().splitlines()]
    assert len(games) == 3 * 8
    assert {g["first"] for g in games if g["pairing"] == "random~lowest"} == {"random", "lowest"}  # seats alternate
    report = run_cli("arena", "report", "c4", home=home, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    folder = home / "arena" / "c4" / "report"
    ratings = json.loads((folder / "ratings.json").read_text())["ratings"]
    # the heuristic (win, block, centre) beats random play: its rating is the highest, its interval above random's
    assert max(ratings, key=lambda p: ratings[p]["elo"]) == "heuristic"
    assert ratings["heuristic"]["low"] > ratings["random"]["elo"]
    text = (folder / "report.md").read_text()
    assert "## Crosstable" in text and "do not support" in text and "Few games" in text
    assert (folder / "ratings.png").stat().st_size > 5000 and (folder / "games.csv").read_text().count("\n") == 25


def test_an_interrupted_tournament_resumes_without_replaying_a_game(tmp_path):
    spec = _spec(tmp_path, "long", 40)
    home = tmp_path / "home"
    journal = home / "arena" / "long" / "games.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "arena", "run", str(spec)],
                            env={**os.environ, "MOSAIC_HOME": str(home)}, stderr=subprocess.PIPE, text=True)
    wait_until(lambda: journal.exists() and len(journal.read_text().splitlines()) >= 5, 120, "five games",
               proc=proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    before = journal.read_text().splitlines()
    assert len(before) < 120, "the tournament finished before it could be interrupted"
    resumed = run_cli("arena", "run", str(spec), home=home, timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert f"{len(before)} of 120 games already played" in resumed.stderr
    after = [json.loads(x) for x in journal.read_text().splitlines() if x.strip()]
    keys = [(g["pairing"], g["game"]) for g in after]
    assert len(keys) == len(set(keys)) == 120  # every game once, none replayed
    # the same games an uninterrupted tournament plays (each game is seeded)
    fresh = tmp_path / "fresh"
    assert run_cli("arena", "run", str(spec), home=fresh, timeout=600).returncode == 0
    again = {(g["pairing"], g["game"]): g["returns"] for g in
             map(json.loads, (fresh / "arena" / "long" / "games.jsonl").read_text().splitlines())}
    assert {(g["pairing"], g["game"]): g["returns"] for g in after} == again




def test_games_in_parallel_are_the_games_played_one_after_another(tmp_path):
    """--parallel 2: shards as runs of the daemon (started for the home, as the local experiment backend does),
    two at once (a rendezvous player proves they overlap); the journal holds exactly the games, with the
    results, of the same tournament played sequentially in-process, and each shard is a run in the store."""
    from cli_support import REPO
    from mosaic.runs import RunStore

    players = {**FIELD, "meet": "scripted:heuristics:rendezvous"}
    spec = tmp_path / "par.json"
    spec.write_text(json.dumps({"name": "par", "environment": CONNECT_FOUR, "players": players,
                                "games_per_pairing": 4, "seed": 2}))
    meet = tmp_path / "meet"
    meet.mkdir()
    env = {"MOSAIC_RENDEZVOUS": str(meet),
           "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "fixtures"), os.environ.get("PYTHONPATH", "")])}
    results = {}
    for parallel in ("2", "1"):
        home = tmp_path / f"home{parallel}"
        try:
            proc = run_cli("arena", "run", str(spec), "--parallel", parallel, home=home, timeout=600, env=env)
        finally:
            stop_daemon(home)
        assert proc.returncode == 0, proc.stderr[-2000:]
        games = [json.loads(x) for x in (home / "arena" / "par" / "games.jsonl").read_text().splitlines()]
        results[parallel] = {(g["pairing"], g["game"]): (g["first"], g["returns"], g["length"]) for g in games}
        assert len(games) == len(results[parallel]) == 6 * 4
        if parallel == "2":
            assert "started one for MOSAIC_HOME" in proc.stderr  # no daemon ran: one was started, and said so
            assert len(list(meet.iterdir())) >= 2  # two rendezvous players met: their games overlapped
            store = RunStore(home)
            runs = {g["run_id"] for g in games}  # each game names the shard run that played it
            assert len(runs) >= 6 and all(store.get(r).read_manifest()["status"] == "completed" for r in runs)
            assert all(store.get(r).read_manifest()["worker"] == "arena" for r in runs)
            for marker in meet.iterdir():
                marker.unlink()
            meet.rmdir()  # sequential play must not need a partner: any rendezvous now fails loudly
            meet.mkdir()
            (meet / "partner").touch()
        else:
            assert not (home / "trainer").exists()  # in-process: no daemon, no runs
    assert results["2"] == results["1"]


def test_random_openings_vary_games_between_deterministic_players(tmp_path):
    """opening_moves: the first plies of each game are random legal moves, the same for the two games of a pair
    (seats swapped); without them two deterministic players play one game over and over."""
    players = {"lowest": FIELD["lowest"], "heuristic": FIELD["heuristic"]}
    journals = {}
    for opening in (0, 4):
        spec = tmp_path / f"open{opening}.json"
        spec.write_text(json.dumps({"name": f"open{opening}", "environment": CONNECT_FOUR, "players": players,
                                    "games_per_pairing": 6, "seed": 9, "opening_moves": opening}))
        home = tmp_path / f"home{opening}"
        proc = run_cli("arena", "run", str(spec), home=home, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        journals[opening] = sorted((json.loads(x) for x in (home / "arena" / f"open{opening}" / "games.jsonl")
                                    .read_text().splitlines()), key=lambda g: g["game"])
    plain = journals[0]
    assert plain[0]["moves"] == plain[2]["moves"] == plain[4]["moves"]  # the same game three times
    opened = journals[4]
    openings = [[tuple(m) for m in g["moves"][:4]] for g in opened]
    assert openings[0] == openings[1] and openings[2] == openings[3] and openings[4] == openings[5]
    assert len({tuple(o) for o in openings}) == 3  # three pairs, three openings
    assert [g["first"] for g in opened[:2]] == ["lowest", "heuristic"]  # the pair swaps seats
    for g in opened:
        assert sum(g["returns"].values()) == 0 and g["length"] >= 7  # nobody forfeits: the random plies are legal


def test_a_team_tournament_rates_paired_sides(tmp_path):
    """sides: on simple_adversary (an adversary against two good agents) each player plays a side, games come in
    pairs on one env seed with the sides swapped, and each pair rates one comparison per side."""
    from cli_support import REPO
    from mosaic.arena.games import rated_games
    from mosaic.arena.tournament import Tournament

    env = {"family": "mpe", "env_id": "simple_adversary_v3", "env_kwargs": {"max_cycles": 10}}
    sides = {"adversary": ["adversary_0"], "good": ["agent_0", "agent_1"]}
    spec = tmp_path / "teams.json"
    spec.write_text(json.dumps({"name": "teams", "environment": env, "sides": sides, "games_per_pairing": 4,
                                "seed": 3, "report": {"reps": 100},
                                "players": {"still": "scripted:heuristics:mpe_still",
                                            "toward": "scripted:heuristics:mpe_toward_first"}}))
    home = tmp_path / "home"
    fixtures = {"PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "fixtures"), os.environ.get("PYTHONPATH", "")])}
    proc = run_cli("arena", "run", str(spec), home=home, timeout=300, env=fixtures)
    assert proc.returncode == 0, proc.stderr[-2000:]
    games = sorted((json.loads(x) for x in (home / "arena" / "teams" / "games.jsonl").read_text().splitlines()),
                   key=lambda g: g["game"])
    assert [g["seed"] for g in games] == [3, 3, 4, 4]  # pairs share the env's seed
    assert games[0]["sides"] == {"still": "adversary", "toward": "good"}
    assert games[1]["sides"] == {"toward": "adversary", "still": "good"}  # and swap sides
    assert games[0]["seats"] == {"adversary_0": "still", "agent_0": "toward", "agent_1": "toward"}
    for g in games:
        assert g["length"] == 10 and set(g["teams"]) == {"still", "toward"}
        assert g["teams"]["toward"] == pytest.approx(sum(r for a, r in g["returns"].items()
                                                         if g["seats"][a] == "toward"))
    rated = rated_games(Tournament.get("teams", home).games(), teams=True)
    assert len(rated) == 2 * 2 and all(r.seat_a is None for r in rated)
    first = games[0]["teams"]["still"], games[1]["teams"]["toward"]  # the adversary side of the first pair
    expected = 1.0 if first[0] > first[1] else 0.0 if first[0] < first[1] else 0.5
    assert next(r for r in rated if r.a == "still" and r.b == "toward").score_a == expected
    report = run_cli("arena", "report", "teams", home=home, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "Team games: sides adversary" in (home / "arena" / "teams" / "report" / "report.md").read_text()
    for bad, field in (({"sides": {"adversary": ["adversary_0"], "good": ["agent_0"]}}, "sides:"),
                       ({"sides": None}, "sides:")):
        spec.write_text(json.dumps({"name": "bad-teams", "environment": env, "games_per_pairing": 2,
                                    "players": {"a": "random", "b": "random"}, **bad}))
        refused = run_cli("arena", "run", str(spec), home=tmp_path / "bad", timeout=300)
        assert refused.returncode == 2 and field in refused.stderr and "agent_1" in refused.stderr, refused.stderr
        assert not (tmp_path / "bad" / "arena" / "bad-teams").exists()  # refused before anything is written


def test_another_spec_under_the_same_name_is_refused(tmp_path):
    home = tmp_path / "home"
    assert run_cli("arena", "run", str(_spec(tmp_path, "same", 1)), home=home, timeout=300).returncode == 0
    other = run_cli("arena", "run", str(_spec(tmp_path, "same", 2)), home=home, timeout=300)
    assert other.returncode == 2 and "exists with another spec" in other.stderr


@pytest.mark.parametrize("player, words", [
    ("nosuchrun", "players.b: run 'nosuchrun' not found"),
    ("scripted:mosaic.arena.heuristics:nosuchfn", "players.b: 'scripted:mosaic.arena.heuristics:nosuchfn' names no "
                                                  "function; allowed: scripted:MODULE:FUNCTION"),
    ("scripted:no_such_module:f", "players.b: cannot import 'no_such_module'"),
])
def test_a_player_that_cannot_play_is_refused_before_the_tournament_folder_is_made(tmp_path, player, words):
    """It was written first (its spec.json, listed by `arena status`), and the error came from the player's
    process, two lines deep."""
    spec = tmp_path / "t.json"
    spec.write_text(json.dumps({"name": "unplayable", "environment": CONNECT_FOUR, "games_per_pairing": 1,
                                "players": {"a": "random", "b": player}}))
    refused = run_cli("arena", "run", str(spec), home=tmp_path / "home", timeout=300)
    assert refused.returncode == 2, refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line.startswith("mosaic: error: ") and words in line, line
    assert not (tmp_path / "home" / "arena").exists()
