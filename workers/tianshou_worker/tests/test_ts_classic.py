"""A PettingZoo classic game through Tianshou's multi-agent algorithm: one seat learns (DQN), the other plays
random legal moves; trained, tested with the learner's return, evaluated with win rates."""

from __future__ import annotations

import json

import pytest

GAME = {"env_family": "classic", "env_id": "tictactoe_v3", "learner_seat": "player_1", "total_timesteps": 1256,
        "num_envs": 4, "collect_steps": 8, "update_per_step": 0.25, "learning_starts": 256,
        "hidden_sizes": [128, 128], "report_every_timesteps": 500, "test_every_timesteps": 500,
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
    proc = module_home.cli("run", str(module_home.config("rps", algorithm="dqn", env_family="classic",
                                                         env_id="rps_v2")))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("mosaic: error: env_id: rps_v2 observes") and "action_mask" in proc.stderr
    assert len(module_home.runs()) == runs
