"""Players over the wire: real player processes seated in a match the core runs (mosaic.workerkit.player,
mosaic.host.match)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from cli_support import REPO
from mosaic.host.match import open_player, play_match
from mosaic.workerkit.player import PlayerError, PlayerProcess, from_wire, to_wire

TICTACTOE = {"family": "classic", "env_id": "tictactoe_v3"}
FIXTURES = {"PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "fixtures"), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.parametrize("value", [
    np.arange(12, dtype=np.float32).reshape(3, 4), np.array([True, False]), np.int8(-3), np.zeros((0, 2)),
    {"observation": np.ones((3, 3, 2), dtype=np.int8), "action_mask": np.array([1, 0, 1], dtype=np.int8)},
    [1, 2.5, "x", None], np.array([1.0, np.inf, -0.0]),
])
def test_values_cross_the_wire_exactly(value):
    back = from_wire(__import__("json").loads(__import__("json").dumps(to_wire(value))))
    if isinstance(value, dict):
        for key in value:
            assert back[key].dtype == value[key].dtype and np.array_equal(back[key], value[key])
    elif isinstance(value, np.ndarray):
        assert back.dtype == value.dtype and back.shape == value.shape and np.array_equal(back, value)
    elif isinstance(value, np.generic):
        assert back == value.item()
    else:
        assert back == value


def _scripted(name: str) -> PlayerProcess:
    env = {**os.environ, **FIXTURES}
    return PlayerProcess([sys.executable, "-m", "mosaic.workerkit.player", "scripted", f"heuristics:{name}"],
                         env=env, label=name)


def test_two_player_processes_play_a_repeatable_match():
    with open_player("random") as a, open_player("random") as b:
        a.label, b.label = "random-a", "random-b"
        seatings = [{"player_1": a, "player_2": b}, {"player_1": b, "player_2": a}]
        first = play_match(TICTACTOE, seatings, games=6, seed=11)
        again = play_match(TICTACTOE, seatings, games=6, seed=11)
    assert [g.returns for g in first.games] == [g.returns for g in again.games]
    assert [g.seats["player_1"] for g in first.games] == ["random-a", "random-b"] * 3  # seats alternate
    for g in first.games:
        assert sum(g.returns.values()) == 0 and 5 <= g.length <= 9  # legal play only: nobody forfeits
    scores = first.scores("random-a")
    assert len(scores) == 6 and all(s in (0.0, 0.5, 1.0) for s in scores)


def test_a_scripted_heuristic_plays_against_random():
    with _scripted("first_legal") as heuristic, open_player("random") as rnd:
        result = play_match(TICTACTOE, [{"player_1": heuristic, "player_2": rnd}], games=3, seed=0)
    assert len(result.games) == 3
    assert all(g.seats == {"player_1": "first_legal", "player_2": "random"} for g in result.games)


def test_a_player_that_fails_ends_the_match_naming_it():
    with _scripted("broken") as broken, open_player("random") as rnd:
        with pytest.raises(PlayerError, match="player 'broken': RuntimeError: this heuristic has a bug"):
            play_match(TICTACTOE, [{"player_1": broken, "player_2": rnd}], games=1)


def test_a_player_trained_on_another_env_is_refused_naming_the_difference():
    with open_player("random") as rnd:
        rnd.environment = {"family": "classic", "env_id": "connect_four_v3"}
        with pytest.raises(PlayerError, match="trained on classic/connect_four_v3, not classic/tictactoe_v3"):
            play_match(TICTACTOE, [{"player_1": rnd, "player_2": rnd}], games=1)
        rnd.environment = {"family": "classic", "env_id": "tictactoe_v3", "env_kwargs": {"x": 1}}
        with pytest.raises(PlayerError, match="differ in x"):
            play_match(TICTACTOE, [{"player_1": rnd, "player_2": rnd}], games=1)


def test_a_player_that_dies_or_speaks_no_protocol_is_named():
    with pytest.raises(PlayerError, match="exited"):
        PlayerProcess([sys.executable, "-c", "import sys; sys.exit(3)"], timeout_s=30)
    with pytest.raises(PlayerError, match="expected a protocol 1 hello"):
        PlayerProcess([sys.executable, "-c", "print('{\"type\": \"nonsense\"}')"], timeout_s=30)
    with pytest.raises(PlayerError, match="not MODULE:FUNCTION|exited"):
        PlayerProcess([sys.executable, "-m", "mosaic.workerkit.player", "scripted", "nocolon"], timeout_s=30)


def test_a_worker_that_cannot_serve_a_player_says_so(tmp_path):
    """Through the worker's own command line: exit 2 naming the flag (no worker serves one yet but the built-in
    players; each worker's describe document says whether it can)."""
    import subprocess

    from mosaic.host.discovery import discover_workers
    from mosaic.host.launcher import worker_command

    worker = discover_workers(only="random").get("random")
    proc = subprocess.run([*worker_command(worker), "--player", str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "--player: the random worker cannot serve a player" in proc.stderr
