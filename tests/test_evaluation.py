"""MOSAIC's evaluation loop with real PettingZoo envs and simple scripted actors (no RL library)."""

from __future__ import annotations

import csv
import json

import numpy as np

from mosaic.workerkit.envs import make_env
from mosaic.workerkit.evaluation import EvaluationResults, play_episodes, print_results, save_results
from mosaic.runs import RunStore


class FirstLegal:
    """Plays the lowest legal move: deterministic, mask-respecting."""

    module_id = "first_legal"

    def compute_action(self, obs):
        return int(np.flatnonzero(obs["action_mask"])[0])

    def compute_actions(self, observations):
        return [self.compute_action(o) for o in observations]


class Seats:
    def __init__(self, actors):
        self.actors = actors

    def actor_for(self, agent):
        return self.actors.get(agent)


def test_a_two_player_game_is_scored_per_player_with_alternating_seats(tmp_path):
    env = make_env("classic", "tictactoe_v3", "AEC", render_mode="rgb_array")
    first, second = env.possible_agents
    seatings = [Seats({first: FirstLegal()}), Seats({second: FirstLegal()})]
    try:
        episodes, videos = play_episodes(env, seatings, num_episodes=6, seed=3, video_episodes=2)
    finally:
        env.close()
    assert [e.seed for e in episodes] == [3, 4, 5, 6, 7, 8]
    assert [e.players[first] for e in episodes[:2]] == ["first_legal", "random"]  # seats alternate
    assert len(videos) == 2 and all(len(v) == e.length for v, e in zip(videos, episodes))
    for e in episodes:
        assert e.winner in (None, first, second) and 5 <= e.length <= 9
        assert (e.winner is None) == (e.returns[first] == e.returns[second])
    results = EvaluationResults(episodes, {"family": "classic", "env_id": "tictactoe_v3"}, "ckpt")
    outcomes = results.outcomes
    assert outcomes["first_legal"]["games"] == 6 and outcomes["random"]["games"] == 6
    for player in ("first_legal", "random"):
        rates = outcomes[player]
        assert abs(rates["win_rate"] + rates["draw_rate"] + rates["loss_rate"] - 1) < 1e-9
    assert abs(outcomes["first_legal"]["win_rate"] - outcomes["random"]["loss_rate"]) < 1e-9
    stats = results.per_agent[first]
    assert stats["n"] == 6 and stats["ci95_low"] <= stats["mean"] <= stats["ci95_high"]


def test_results_land_in_the_run_folder_and_its_manifest(tmp_path, capsys):
    run = RunStore(tmp_path).create("eval-run", {"worker": "x"}, {"worker": "x", "status": "completed"})
    checkpoint = run.root / "checkpoints" / "checkpoint_000001"
    checkpoint.mkdir(parents=True)
    env = make_env("mpe", "simple_spread_v3", "PARALLEL", {"N": 2, "max_cycles": 10}, render_mode="rgb_array")
    try:
        episodes, videos = play_episodes(env, [Seats({})], num_episodes=3, seed=0, video_episodes=1)
    finally:
        env.close()
    results = EvaluationResults(episodes, {"family": "mpe", "env_id": "simple_spread_v3"}, str(checkpoint))
    folder = save_results(results, checkpoint, None, videos)
    assert folder.parent == run.root / "eval"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["num_episodes"] == 3 and summary["outcomes"] is None  # not a 2-player game
    rows = list(csv.DictReader((folder / "episodes.csv").open()))
    assert [int(r["length"]) for r in rows] == [10, 10, 10]
    assert (folder / "videos" / "episode_000.gif").stat().st_size > 0
    (entry,) = run.read_manifest()["evaluations"]
    assert entry["num_episodes"] == 3 and entry["videos"] == [str((folder / "videos" / "episode_000.gif")
                                                                   .relative_to(run.root))]
    # what `mosaic eval` prints says where they went: the folder and each GIF, in the table and in the JSON
    gif = str(folder / "videos" / "episode_000.gif")
    print_results(results, as_json=False)
    assert capsys.readouterr().out.splitlines()[-2:] == [f"saved to {folder}", f"video: {gif}"]
    print_results(results, as_json=True)
    printed = json.loads(capsys.readouterr().out)
    assert printed["saved_to"] == str(folder) and printed["videos"] == [gif]
