"""A PettingZoo classic game through Tianshou's multi-agent algorithm: one seat learns (DQN), the other plays
random legal moves; trained, tested with the learner's return, evaluated with win rates."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

GAME = {"environment": {"family": "classic", "env_id": "tictactoe_v3"}, "learner_seat": "player_1", "total_timesteps": 1256,
        "num_envs": 4, "collect_steps": 8, "update_per_step": 0.25, "learning_starts": 256,
        "hidden_sizes": [128, 128], "reporting": {"every_timesteps": 500}, "test_every_timesteps": 500,
        "test_episodes": 20, "algo_params": {"gamma": 0.9, "n_step_return_horizon": 3, "target_update_freq": 320,
                                            "eps_training": 0.1}}


@pytest.fixture(scope="module")
def game_run(module_home):
    proc = module_home.cli("run", str(module_home.config("ttt", algorithm="dqn", seed=0, **GAME)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return module_home.runs()[-1]


def test_one_seat_of_tic_tac_toe_learns_against_random_legal_play(module_home, game_run):
    home, run = module_home, game_run
    (started,) = home.events(run, "run_started")
    assert started["env"] == {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC", "env_kwargs": {}}
    assert started["modules"] == {"player_1": "policy", "player_2": "random"}
    assert started["tianshou_algorithm"] == "MultiAgentOffPolicyAlgorithm"
    episodes = home.events(run, "episode")
    assert episodes and all(set(e["returns"]) == {"player_1", "player_2"} for e in episodes)
    # zero-sum, a winner named where one scored more, and no game ended by an illegal move (a win takes 5+ moves)
    assert all(sum(e["returns"].values()) == 0 and e["length"] >= 5 for e in episodes)
    assert all(e["winner"] == max(e["returns"], key=e["returns"].get) if e["winner"] else
               e["returns"]["player_1"] == 0 for e in episodes)
    metrics = home.events(run, "metrics")
    assert {"policy", "random"} <= set(metrics[-1]["module_episode_returns_mean"])
    assert "loss" in metrics[-1]["learner"]["policy"]
    tests = [e["test"] for e in home.events(run, "log") if "test" in e]  # scored by the learner's return
    assert len(tests) == 3 and all(-1 <= t["return_mean"] <= 1 for t in tests)
    assert tests[-1]["return_mean"] > tests[0]["return_mean"]

    played = home.cli("eval", run.name, "--episodes", "50", "--seed", "100", "--json")
    assert played.returncode == 0, played.stderr[-3000:]
    result = json.loads(played.stdout[played.stdout.index("{"):])
    outcomes = result["outcomes"]
    assert outcomes["policy"]["games"] == outcomes["random"]["games"] == 50
    assert all(e["players"] == {"player_1": "policy", "player_2": "random"} and e["length"] >= 5
               for e in result["episodes"])
    # random play wins about 58% of games as the first player; the trained seat wins far more
    assert outcomes["policy"]["win_rate"] >= 0.8, outcomes


def test_a_game_without_what_tianshous_wrapper_needs_is_refused(module_home):
    """Rock-paper-scissors has no legal-move mask: refused before any run, naming env_id."""
    runs = len(module_home.runs())
    proc = module_home.cli("run", str(module_home.config("rps", algorithm="dqn",
                                                         environment={"family": "classic", "env_id": "rps_v2"})))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("mosaic: error: environment.env_id: rps_v2 observes") and "action_mask" in proc.stderr
    assert len(module_home.runs()) == runs


def test_same_seed_same_games_and_weights_as_tianshou_run_directly(module_home, game_run, tmp_path):
    """The shim observes and never changes what is learned: Tianshou's multi-agent algorithm used directly
    (tianshou_game_direct.py) with the run's settings plays the same training games and ends with the same
    learner weights, tensor for tensor. The envs' games interleave, so games are compared sorted."""
    import torch

    config = json.loads((game_run / "config.json").read_text())
    algo = config["algo_params"]
    options = {"n_step": algo["n_step_return_horizon"], "test_every": config["test_every_timesteps"],
               **{k: algo[k] for k in ("gamma", "target_update_freq", "eps_training")},
               **{k: config[k] for k in ("seed", "learner_seat", "hidden_sizes", "learning_rate", "batch_size",
                                         "buffer_size", "num_envs", "test_episodes", "learning_starts",
                                         "total_timesteps", "collect_steps", "update_per_step")}}
    script = Path(__file__).with_name("tianshou_game_direct.py")
    weights = tmp_path / "direct.pt"
    direct = subprocess.run([module_home.python, str(script), json.dumps(options), str(weights)],
                            capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert direct.returncode == 0, direct.stderr[-3000:]
    upstream = json.loads(direct.stdout.strip().splitlines()[-1])
    games = sorted([[e["returns"]["player_1"], e["returns"]["player_2"]], e["length"]]
                   for e in module_home.events(game_run, "episode"))
    assert len(games) > 50
    assert upstream == games
    (saved,) = module_home.events(game_run, "checkpoint_saved")
    ours = torch.load(Path(saved["path"]) / "tianshou_algorithm.pt", weights_only=False)
    theirs = torch.load(weights, weights_only=False)
    assert list(ours) == list(theirs) and sum(isinstance(v, torch.Tensor) for v in ours.values()) >= 6
    assert all(same(v, theirs[k]) for k, v in ours.items())


def same(a, b) -> bool:
    """Equal, tensor for tensor, through the lists and dicts of a state dict (an optimiser's state)."""
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b
