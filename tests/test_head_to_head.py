"""``mosaic eval RUN --opponent X`` for any worker: a run and an opponent that its worker cannot load (a
scripted heuristic, another library's run, a language model) meet as players in a match MOSAIC plays
(mosaic.host.head_to_head); the results land where every evaluation's do."""

from __future__ import annotations

import json

import pytest

from cli_support import REPO, run_cli, write_config

HEURISTIC = "scripted:mosaic.arena.heuristics:first_legal"


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory):
    """A real (tiny) Ray PPO run on tic-tac-toe, one module per seat."""
    home = tmp_path_factory.mktemp("h2h")
    config = write_config(home / "ray.json", {
        "worker": "ray", "algorithm": "ppo", "total_timesteps": 400, "rllib": {"num_env_runners": 0},
        "environment": {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"},
        "policy_configuration": "INDEPENDENT",
        "algo_params": {"train_batch_size_per_learner": 200, "minibatch_size": 100, "num_epochs": 1,
                        "fcnet_hiddens": [32, 32]}})
    done = run_cli("run", str(config), "--run-id", "ttt-ray", home=home, timeout=600,
                   env={"RAY_AUTH_MODE": "disabled"})
    assert done.returncode == 0, done.stderr[-2000:]
    from mosaic.runs import RunStore

    return home, RunStore(home).resolve("ttt-ray").root


def _eval(home, *args):
    return run_cli("eval", *args, "--json", home=home, timeout=300)


def test_a_run_meets_a_scripted_heuristic_as_a_match_and_the_result_is_kept(ray_run):
    home, run = ray_run
    first = _eval(home, "ttt-ray", "--opponent", HEURISTIC, "--episodes", "4", "--seed", "3")
    assert first.returncode == 0, first.stderr[-2000:]
    results = json.loads(first.stdout)
    assert results["num_episodes"] == 4
    players = [e["players"] for e in results["episodes"]]
    assert players[0]["player_1"] == "ttt-ray" and players[0]["player_2"] == HEURISTIC
    assert players[1]["player_1"] == HEURISTIC and players[1]["player_2"] == "ttt-ray"  # seats alternate
    assert set(results["outcomes"]) == {"ttt-ray", HEURISTIC}
    for e in results["episodes"]:
        assert sum(e["returns"].values()) == 0  # legal play only: nobody forfeits a tic-tac-toe game
    manifest = json.loads((run / "analytics.json").read_text())
    kept = manifest["evaluations"][-1]
    assert (run / kept["path"] / "summary.json").is_file() and kept["num_episodes"] == 4
    again = json.loads(_eval(home, "ttt-ray", "--opponent", HEURISTIC, "--episodes", "4", "--seed", "3").stdout)
    assert [e["returns"] for e in again["episodes"]] == [e["returns"] for e in results["episodes"]]


def test_seats_name_agents_of_the_env(ray_run):
    home, _run = ray_run
    bad = _eval(home, "ttt-ray", "--opponent", HEURISTIC, "--seats", "player_9", "--episodes", "1")
    assert bad.returncode == 2 and "--seats" in bad.stderr and "player_1" in bad.stderr, bad.stderr


def test_a_worker_that_serves_no_player_is_refused_naming_it(tmp_path):
    from mosaic.testing.worker_homes import WorkerHome, worker_env_for_tests

    WorkerHome.create(tmp_path, "cleanrl", worker_env_for_tests("cleanrl", REPO, lambda: tmp_path / "scratch"))
    run = tmp_path / "runs" / "cartpole"
    run.mkdir(parents=True)
    (run / "analytics.json").write_text(json.dumps({"run_id": "cartpole", "worker": "cleanrl",
                                                    "config": {"worker": "cleanrl"}}))
    done = run_cli("eval", str(run), "--opponent", "random", "--episodes", "1", home=tmp_path, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "cleanrl" in done.stderr and "cannot serve a player" in done.stderr
