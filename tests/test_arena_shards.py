"""A tournament's shards as runs of the local daemon (`mosaic arena run --parallel N`): a shard whose player
crashes is retried with only its unplayed games, its cause kept; a killed driver is resumed, following the
shard runs it had submitted, without replaying a finished game."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import REPO, run_cli
from mosaic.host.daemon.endpoint import stop_daemon
from mosaic.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("arena")

CONNECT_FOUR = {"family": "classic", "env_id": "connect_four_v3"}
CRASH_VAR = "MOSAIC_TEST_CRASH_MARKER"
CALLS = {"n": 0}
#: PYTHONPATH with this folder first: shard runs import their scripted players from this module
TESTS_IMPORTABLE = os.pathsep.join([str(REPO / "tests"), os.environ.get("PYTHONPATH", "")])


def crash_once(agent, observation):
    """The lowest legal move; on its 12th move (a few games into its shard) it crashes, once per marker."""
    from mosaic.arena.heuristics import first_legal

    CALLS["n"] += 1
    if CALLS["n"] == 12:
        try:  # created here or not at all: of two shards at their 12th move at once, only one crashes
            fd = os.open(os.environ[CRASH_VAR], os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            pass
        else:
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
            raise RuntimeError("crashed on purpose")
    return first_legal(agent, observation)


HOLD_VAR = "MOSAIC_TEST_HOLD"
BEGUN = {"n": 0}


def _held(play, agent, observation):
    """``play``'s move; but while the file $MOSAIC_TEST_HOLD names exists, a player process that has begun two
    games waits at the start of its next one (writing ``<hold>.held-<pid>``) until the file is removed: a shard
    run the test holds cannot end, whatever the machine's speed."""
    import numpy as np

    board = np.asarray(observation["observation"])
    hold = Path(os.environ.get(HOLD_VAR, "/nonexistent"))
    if board.sum() <= 1:  # this player's first move of a game: an empty board, or the opening piece
        BEGUN["n"] += 1
        if BEGUN["n"] > 2 and hold.exists():
            Path(f"{hold}.held-{os.getpid()}").touch()
            wait_until(lambda: not hold.exists(), 600, "the test to lift its hold")
    return play(agent, observation)


def held_lowest(agent, observation):
    from mosaic.arena.heuristics import first_legal

    return _held(first_legal, agent, observation)


def held_heuristic(agent, observation):
    from mosaic.arena.heuristics import connect_four

    return _held(connect_four, agent, observation)


def test_a_shard_holds_both_seatings_of_one_pairing():
    """Shards group the pending games by pairing (one pair of player processes plays both seatings), in
    chunks of at most ``size``, the schedule's order kept; each game names who moves first."""
    from mosaic.arena.tournament import Shard, parse_spec, shards

    spec = parse_spec({"name": "t", "environment": CONNECT_FOUR, "games_per_pairing": 4,
                       "players": {"a": "random", "b": "random", "c": "random"}})
    todo = list(spec.schedule())
    whole = shards(todo, 4)
    assert [(s.first, s.second) for s in whole] == [("a", "b"), ("a", "c"), ("b", "c")]
    assert whole[0].games == (("a~b", 0, 0, "a"), ("a~b", 1, 1, "b"), ("a~b", 2, 2, "a"), ("a~b", 3, 3, "b"))
    assert [whole[0].seating(g[3]) for g in whole[0].games] == [("a", "b"), ("b", "a")] * 2
    halves = shards(todo, 3)
    assert [len(s.games) for s in halves] == [3, 1] * 3
    assert [g for s in halves for g in s.games] == [g for s in whole for g in s.games]
    assert Shard("a", "b", ()).seating("b") == ("b", "a")


def test_a_shard_config_names_its_movers_among_the_pairing():
    """A shard's games name their first mover, one of the pairing's players; a game of three items (a shard
    an older driver wrote in ``shards.jsonl``) is moved first by ``first``."""
    from mosaic.arena.shard_worker import ShardConfig, shard_of
    from mosaic.errors import UserError

    source = {"name": "t", "environment": CONNECT_FOUR, "players": {"a": "random", "b": "random", "c": "random"}}

    def config(games):
        return ShardConfig.from_dict({"run_id": "x", "tournament": source, "environment": CONNECT_FOUR,
                                      "shard": {"first": "a", "second": "b", "games": games}})

    _, shard = shard_of(config([["a~b", 0, 5, "b"], ["a~b", 1, 6]]))
    assert shard.games == (("a~b", 0, 5, "b"), ("a~b", 1, 6, "a"))
    with pytest.raises(UserError, match=r"shard.games: mover 'c' of game 0 is not in the pairing; allowed: a, b"):
        shard_of(config([["a~b", 0, 5, "c"]]))


def journal(home, name):
    path = home / "arena" / name / "games.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def shard_log(home, name):
    return [json.loads(x) for x in (home / "arena" / name / "shards.jsonl").read_text().splitlines()]


def played_in_process(tmp_path, spec, name, env=None):
    home = tmp_path / "sequential"
    proc = run_cli("arena", "run", str(spec), home=home, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return {(g["pairing"], g["game"]): g["returns"] for g in journal(home, name)}


def test_a_shard_whose_player_crashes_is_retried_with_its_unplayed_games(tmp_path):
    spec = tmp_path / "crash.json"
    spec.write_text(json.dumps({"name": "crash", "environment": CONNECT_FOUR, "games_per_pairing": 8, "seed": 3,
                                "players": {"random": "random", "crashy": "scripted:test_arena_shards:crash_once"}}))
    home = tmp_path / "home"
    env = {CRASH_VAR: str(tmp_path / "crashed"), "PYTHONPATH": TESTS_IMPORTABLE}
    try:
        proc = run_cli("arena", "run", str(spec), "--parallel", "2", home=home, timeout=600, env=env)
    finally:
        stop_daemon(home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "crashed").exists()  # it did crash
    log = shard_log(home, "crash")
    (failed,) = [e for e in log if e.get("state") == "failed"]
    assert "crashed on purpose" in failed["cause"] and failed["unplayed"] >= 1  # the cause is kept
    assert "crashed on purpose" in proc.stderr and "retry 1 of 2" in proc.stderr
    submitted = {e["run_id"]: e for e in log if e.get("state") == "submitted"}
    first = submitted[failed["run_id"]]
    (retry,) = [e for e in submitted.values() if e["attempt"] == 1]
    games = journal(home, "crash")
    done_by_failed = {(g["pairing"], g["game"]) for g in games if g["run_id"] == failed["run_id"]}
    assert done_by_failed, "the crash came a few games into its shard"
    # the retry plays only what the failed run had not finished: a finished game is never played again
    assert {(p, g) for p, g, *_ in retry["config"]["shard"]["games"]} == \
        {(p, g) for p, g, *_ in first["config"]["shard"]["games"]} - done_by_failed
    keys = [(g["pairing"], g["game"]) for g in games]
    assert len(keys) == len(set(keys)) == 8
    from mosaic.runs import RunStore

    assert RunStore(home).get(failed["run_id"]).read_manifest()["status"] == "failed"
    # the same games as a tournament played in-process, without any crash
    assert {(g["pairing"], g["game"]): g["returns"] for g in games} == played_in_process(tmp_path, spec, "crash", env)


def _driver(spec, home, env=None):
    return subprocess.Popen([sys.executable, "-m", "mosaic", "arena", "run", str(spec), "--parallel", "2"],
                            env={**os.environ, "MOSAIC_HOME": str(home), **(env or {})}, stderr=subprocess.PIPE,
                            text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_an_interrupted_then_killed_driver_resumes_without_replaying_a_game(tmp_path):
    """Ctrl-C cancels the shards in flight; a SIGKILL leaves them playing, and the next driver follows them.

    A hold the test lifts (``_held``) stops each shard run at the start of its third game: the first driver is
    interrupted with most of the tournament left, and the second is killed while its shards are sure to have
    games to play (games take milliseconds: without it a fast machine ended them before the kill)."""
    from mosaic.experiments.backends import status_from_run_store

    spec = tmp_path / "kill.json"
    spec.write_text(json.dumps({"name": "kill", "environment": CONNECT_FOUR, "games_per_pairing": 16, "seed": 6,
                                "players": {"random": "random", "lowest": "scripted:test_arena_shards:held_lowest",
                                            "heuristic": "scripted:test_arena_shards:held_heuristic"}}))
    home, hold = tmp_path / "home", tmp_path / "hold"
    env = {HOLD_VAR: str(hold), "PYTHONPATH": TESTS_IMPORTABLE}
    try:
        hold.touch()
        proc = _driver(spec, home, env)
        wait_until(lambda: len(journal(home, "kill")) >= 3, 300, "three games", proc=proc)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(120) == 130
        hold.unlink()  # the cancelled shards end after the game they were holding at
        cancelled = [e for e in shard_log(home, "kill") if e.get("state") == "cancelled"]
        assert cancelled and all("KeyboardInterrupt" in e["cause"] for e in cancelled)
        # nothing plays on for a driver that stopped: each shard run it cancelled has ended
        wait_until(lambda: all(status_from_run_store(home, e["run_id"]) is not None for e in cancelled), 60,
                   "the cancelled shard runs to end")
        assert len(journal(home, "kill")) <= 6  # two shards, each held at its third game, which the cancel ended
        logged = len(shard_log(home, "kill"))
        for marker in tmp_path.glob("hold.held-*"):
            marker.unlink()
        hold.touch()
        proc = _driver(spec, home, env)

        def by_second_driver() -> int:
            runs = {e["run_id"] for e in shard_log(home, "kill")[logged:] if e.get("state") == "submitted"}
            return sum(1 for g in journal(home, "kill") if g["run_id"] in runs)

        wait_until(lambda: by_second_driver() >= 2 and any(tmp_path.glob("hold.held-*")), 300,
                   "two games of the second driver's shards, and one of them held", proc=proc)
        proc.send_signal(signal.SIGKILL)  # no chance to cancel its shards: they play on in the daemon
        proc.wait(30)
        before, killed_log = journal(home, "kill"), shard_log(home, "kill")
        assert len(before) < 48, "the tournament finished before it could be interrupted"
        hold.unlink()  # on with no driver
        resumed = run_cli("arena", "run", str(spec), "--parallel", "2", home=home, timeout=600, env=env)
    finally:
        hold.unlink(missing_ok=True)
        stop_daemon(home)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    games = journal(home, "kill")
    # the killed driver's shard runs played on: their games after the kill were journaled from their telemetry
    # (followed to their end, or found ended), and no shard the resumed driver submitted plays one of them
    orphans = {e["run_id"] for e in killed_log[logged:] if e.get("state") == "submitted"}
    assert orphans and not any(e.get("state") == "cancelled" for e in killed_log[logged:])
    by_orphans = {(g["pairing"], g["game"]) for g in games if g["run_id"] in orphans}
    theirs = {(p, g) for e in killed_log[logged:] if e["run_id"] in orphans and e.get("state") == "submitted"
              for p, g, *_ in e["config"]["shard"]["games"]}
    assert by_orphans == theirs  # every game of theirs, played by them
    # a shard held at the kill played its games after it
    assert any(sum(g["run_id"] == r for g in games) > sum(g["run_id"] == r for g in before) for r in orphans)
    resubmitted = {(p, g) for e in shard_log(home, "kill")[len(killed_log):] if e.get("state") == "submitted"
                   for p, g, *_ in e["config"]["shard"]["games"]}
    assert not by_orphans & resubmitted
    keys = [(g["pairing"], g["game"]) for g in games]
    assert len(keys) == len(set(keys)) == 48  # every game once: none replayed
    runs = {e["run_id"] for e in shard_log(home, "kill") if e.get("state") == "submitted"}
    assert {g["run_id"] for g in games} <= runs
    assert {(g["pairing"], g["game"]): g["returns"] for g in games} == played_in_process(tmp_path, spec, "kill", env)
