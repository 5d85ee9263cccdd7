"""Players over the wire: real player processes seated in a match the core runs (mosaic.workerkit.player,
mosaic.host.match)."""

from __future__ import annotations

import json
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


# -- random play where the env masks no moves (MPE) -------------------------------------------------------
TAG = {"family": "mpe", "env_id": "simple_tag_v3", "env_kwargs": {"max_cycles": 8}}
TAG_AGENTS = ["adversary_0", "adversary_1", "adversary_2", "agent_0"]


def _in_process_random(environment, game):
    """The moves ``mosaic eval --opponent random`` draws in the match's own process (no actor at any seat:
    mosaic.workerkit.evaluation.play_episodes) in ``game``'s episode, on the API the match played."""
    from mosaic.host.match import Seating
    from mosaic.workerkit.envs import make_env
    from mosaic.workerkit.evaluation import play_episodes

    env = make_env(environment["family"], environment["env_id"], environment["api_type"], environment["env_kwargs"])
    moves = []
    try:
        play_episodes(env, [Seating({})], 1, seed=game.seed, on_actions=lambda _i, actions: moves.append(
            {a: to_wire(x) for a, x in actions.items()}))
    finally:
        env.close()
    return moves


@pytest.mark.parametrize("continuous", [False, True])
def test_the_random_player_process_draws_from_the_action_spaces_of_an_env_that_masks_no_moves(continuous):
    """MPE's observations carry no action mask: the random player's hello needs the match's environment, the match
    tells it, and each move is drawn from the agent's action space, seeded by the game's reset: the same seed
    plays the same moves, another seed others, and they are the moves `mosaic eval --opponent random` draws in
    its own process with that seed."""
    environment = {**TAG, "env_kwargs": {**TAG["env_kwargs"], "continuous_actions": continuous}}
    with open_player("random") as rnd:
        assert rnd.needs == ["environment"], "the random player's hello must ask for the match's environment"
        seating = [{a: rnd for a in TAG_AGENTS}]
        first = play_match(environment, seating, games=3, seed=5)
        again = play_match(environment, seating, games=3, seed=5)
        other = play_match(environment, seating, games=3, seed=6)
    assert first.environment["api_type"] == "PARALLEL"
    for game in first.games:
        assert game.length == 8 and len(game.moves) == 8, "every game plays max_cycles steps"
        assert all(sorted(step) == sorted(TAG_AGENTS) for step in game.moves), "every agent moves every step"
        for action in (from_wire(x) for step in game.moves for x in step.values()):
            if continuous:  # Box(0, 1, (5,), float32)
                assert action.dtype == np.float32 and action.shape == (5,) and 0 <= action.min() <= action.max() <= 1
            else:  # Discrete(5)
                assert isinstance(action, int) and 0 <= action < 5
    assert [g.moves for g in again.games] == [g.moves for g in first.games], "the same seed must replay the moves"
    assert [g.returns for g in again.games] == [g.returns for g in first.games]
    assert all(o.moves != f.moves for o, f in zip(other.games, first.games)), "another seed must draw other moves"
    assert len({json.dumps(g.moves) for g in first.games}) == 3, "game i is seeded seed + i: no two alike"
    for game in first.games:
        assert _in_process_random(first.environment, game) == game.moves, \
            "the process must draw what mosaic eval --opponent random draws in process with the same seed"


def test_the_random_player_refuses_an_unmasked_move_without_an_environment_naming_why():
    """Over the wire, without the match's environment (or with one that is not an env, or an agent it lacks):
    an error that names the reason, not a move."""
    with open_player("random") as rnd:
        rnd.reset(0)
        with pytest.raises(PlayerError, match="the observation of agent_0 carries no action_mask and the match "
                                              "named no environment"):
            rnd.act("agent_0", np.zeros(14, dtype=np.float32))
        with pytest.raises(PlayerError, match=r"environment: \{'family': 'mpe'\} is not an env; allowed: "
                                              r"\{family, env_id, env_kwargs, api_type\}"):
            rnd.request({"op": "environment", "environment": {"family": "mpe"}})
        rnd.tell_environment({**TAG, "api_type": "PARALLEL"})
        with pytest.raises(PlayerError, match="simple_tag_v3 has no agent 'agent_9'; its agents: adversary_0"):
            rnd.act("agent_9", np.zeros(14, dtype=np.float32))
        assert isinstance(rnd.act("agent_0", np.zeros(14, dtype=np.float32)), int)  # told: it moves
        # a masked observation is drawn from its mask as before, whatever env it was told
        assert rnd.act("player_0", {"observation": np.zeros(2), "action_mask": np.array([0, 0, 1], np.int8)}) == 2
