"""Team games across libraries: a XuanCe run and a Ray run, each served by its own worker in its own environment,
play simple_adversary's two sides in a match MOSAIC runs (mosaic.host.match); games are recorded move by move
and replay in a fresh env."""

from __future__ import annotations

import dataclasses
import json

import pytest

from cli_support import REPO, run_cli
from mosaic.errors import UserError
from mosaic.host.match import open_player, play_match, replay

ADVERSARY = {"family": "mpe", "env_id": "simple_adversary_v3", "env_kwargs": {"max_cycles": 25}}
GOOD = ("agent_0", "agent_1")
CONNECT_FOUR = {"family": "classic", "env_id": "connect_four_v3"}


def test_a_recorded_connect_four_game_replays_to_its_returns():
    """AEC moves are ``[agent, action]`` pairs in the order taken; a fresh env seeded with the game's seed and
    stepped through them ends with the recorded returns."""
    with open_player("random") as rnd, open_player("scripted:mosaic.arena.heuristics:connect_four") as heuristic:
        result = play_match(CONNECT_FOUR, [{"player_0": heuristic, "player_1": rnd},
                                           {"player_0": rnd, "player_1": heuristic}], games=4, seed=21)
    assert result.environment["api_type"] == "AEC"
    for game in result.games:
        assert len(game.moves) == game.length and all(isinstance(a, str) and isinstance(x, int)
                                                      for a, x in game.moves)
        assert [a for a, _ in game.moves[:2]] == ["player_0", "player_1"]
        json.dumps(game.moves)  # JSON-able as it is
        assert replay(result.environment, game) == game.returns
        assert sorted(game.teams.values()) == sorted(game.returns.values())  # one agent per player
    # moves out of their order are not this game: the replay says which agent moved out of turn
    game = result.games[0]
    swapped = [game.moves[1], game.moves[0], *game.moves[2:]]
    with pytest.raises(UserError, match="moves: player_1 moved where the env expects player_0"):
        replay(result.environment, dataclasses.replace(game, moves=swapped))
    assert result.scores(rnd.label) == [1.0 - s for s in result.scores(heuristic.label)]


# -- XuanCe against Ray ----------------------------------------------------------------------------------------
def _xuance_env_or_skip():
    from mosaic.host import environments as worker_envs

    source = worker_envs.scan().get("xuance")
    if source is None:
        pytest.skip("the xuance worker is not in this checkout")
    if worker_envs.status(source, REPO / "var").status != "ok":
        pytest.skip("the xuance worker's environment is not installed (mosaic envs build xuance)")
    return worker_envs.envs_root(REPO / "var") / "xuance"


@pytest.fixture(scope="module")
def teams(tmp_path_factory):
    """A home with the XuanCe worker's environment; a tiny XuanCe MAPPO and a tiny Ray PPO (a module per agent)
    trained on simple_adversary, through ``mosaic run``."""
    from mosaic.host.discovery import discover_workers

    if "ray" not in discover_workers(only="ray").names():
        pytest.skip("the ray worker is not installed")
    env = _xuance_env_or_skip()
    root = tmp_path_factory.mktemp("arena-mpe")
    home = root / "home"
    (home / "envs").mkdir(parents=True)
    (home / "envs" / "xuance").symlink_to(env, target_is_directory=True)
    environment = {**ADVERSARY, "api_type": "PARALLEL"}
    configs = {
        "xuance": {"worker": "xuance", "algorithm": "mappo", "seed": 1, "total_timesteps": 1000, "num_envs": 2,
                   "batch_size": 200, "environment": environment, "algo_params": {"use_parameter_sharing": False}},
        "ray": {"worker": "ray", "algorithm": "ppo", "seed": 2, "total_timesteps": 400,
                "policy_configuration": "INDEPENDENT", "rllib": {"num_env_runners": 0}, "resources": {"cpus": 1},
                "environment": environment,
                "algo_params": {"train_batch_size_per_learner": 200, "minibatch_size": 100, "num_epochs": 1,
                                "fcnet_hiddens": [32, 32]}}}
    runs = {}
    for name, config in configs.items():
        path = root / f"{name}.json"
        path.write_text(json.dumps({**config, "run_id": f"{name}-adversary"}))
        proc = run_cli("run", str(path), home=home, timeout=900)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = home / "trainer" / "runs" / f"{name}-adversary"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MOSAIC_HOME", str(home))
        players = {name: open_player(str(run)) for name, run in runs.items()}
    yield players
    for player in players.values():
        player.close()


@pytest.mark.slow
def test_a_xuance_team_and_a_ray_team_play_both_sides_of_simple_adversary(teams):
    xc, ray = teams["xuance"], teams["ray"]
    assert sorted(xc.agents) == sorted(ray.agents) == ["adversary_0", *GOOD]
    seatings = [{"adversary_0": ray, **{a: xc for a in GOOD}}, {"adversary_0": xc, **{a: ray for a in GOOD}}]
    result = play_match(ADVERSARY, seatings, games=4, seed=7)
    assert result.environment["api_type"] == "PARALLEL"  # both trained on the parallel env, which MPE has
    for game in result.games:
        good, bad = (xc, ray) if game.game % 2 == 0 else (ray, xc)  # the seatings alternate
        assert game.seats == {"adversary_0": bad.label, "agent_0": good.label, "agent_1": good.label}
        assert game.length == 25 and len(game.moves) == 25
        assert all(sorted(step) == ["adversary_0", *GOOD] for step in game.moves)  # each step: every seat asked
        # per team: the summed returns of the agents it played
        assert game.teams == {bad.label: pytest.approx(game.returns["adversary_0"]),
                              good.label: pytest.approx(game.returns["agent_0"] + game.returns["agent_1"])}
        assert replay(result.environment, game) == game.returns
    assert len(result.team_returns(xc.label)) == len(result.team_returns(ray.label)) == 4
    sides = result.teams()
    assert set(sides[xc.label]) == set(sides[ray.label]) == {"adversary_0", "agent_0+agent_1"}
    assert all(side["games"] == 2 for by_side in sides.values() for side in by_side.values())
    # the same seed, the same match: move for move
    again = play_match(ADVERSARY, seatings, games=4, seed=7)
    assert [(g.moves, g.returns) for g in again.games] == [(g.moves, g.returns) for g in result.games]
    # another seed, other games
    other = play_match(ADVERSARY, seatings[:1], games=1, seed=8)
    assert other.games[0].moves != result.games[0].moves
