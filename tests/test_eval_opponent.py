"""``mosaic eval RUN --opponent X`` says who the opponent was and which seats it played: on the terminal, in the
evaluation's summary.json and in the run's manifest, whether the run's worker plays the opponent itself (the Ray
worker against ``random``) or MOSAIC plays a match (a scripted heuristic: mosaic.host.head_to_head). A run with
no policy to play is refused in the words of ``mosaic eval``, not of an internal player command. Real runs
through the real command line: a tiny Ray PPO run on tic-tac-toe (the cheapest worker that serves a policy), a
run of the random worker.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli, write_config

HEURISTIC = "scripted:mosaic.arena.heuristics:first_legal"
RAY_ENV = {"RAY_AUTH_MODE": "disabled"}


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory) -> tuple[Path, Path]:
    """A real (tiny) Ray PPO run on tic-tac-toe, one module per seat."""
    home = tmp_path_factory.mktemp("eval-opponent")
    config = write_config(home / "ray.json", {
        "worker": "ray", "algorithm": "ppo", "total_timesteps": 400, "rllib": {"num_env_runners": 0},
        "environment": {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"},
        "policy_configuration": "INDEPENDENT",
        "algo_params": {"train_batch_size_per_learner": 200, "minibatch_size": 100, "num_epochs": 1,
                        "fcnet_hiddens": [32, 32]}})
    done = run_cli("run", str(config), "--run-id", "ttt", home=home, timeout=600, env=RAY_ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    from mosaic.runs import RunStore

    return home, RunStore(home).resolve("ttt").root


def _newest_evaluation(run: Path) -> tuple[dict, dict]:
    """The run's newest evaluation: its manifest entry and its summary.json."""
    entry = json.loads((run / "analytics.json").read_text())["evaluations"][-1]
    return entry, json.loads((run / entry["path"] / "summary.json").read_text())


def _seats(summary: dict) -> list[tuple[dict, list, int]]:
    return [(s["players"], s["opponent_agents"], s["episodes"]) for s in summary["seats"]]


def test_the_workers_own_evaluation_records_the_opponent_and_its_seats(ray_run):
    home, run = ray_run
    done = run_cli("eval", "ttt", "--opponent", "random", "--episodes", "4", home=home, timeout=300, env=RAY_ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "4 episodes of classic/tictactoe_v3 against random", done.stdout
    assert "seats in 2 episodes: the opponent plays player_2; the run plays player_1" in lines, done.stdout
    assert "seats in 2 episodes: the opponent plays player_1; the run plays player_2" in lines, done.stdout
    entry, summary = _newest_evaluation(run)
    assert entry["opponent"] == summary["opponent"] == "random"
    assert _seats(summary) == [({"player_1": "player_1", "player_2": "random"}, ["player_2"], 2),
                               ({"player_1": "random", "player_2": "player_1"}, ["player_1"], 2)]


def test_a_run_of_the_same_worker_is_recorded_as_the_opponent_in_its_seats(ray_run):
    """Ray against a Ray run (played by the worker itself): the opponent's seat names the opponent as the
    command line gave it to the worker (the run's folder), not the module id the two runs share."""
    home, run = ray_run
    done = run_cli("eval", "ttt", "--opponent", "ttt", "--episodes", "2", home=home, timeout=300, env=RAY_ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "seats in 2 episodes: the opponent plays player_2; the run plays player_1" in done.stdout.splitlines()
    entry, summary = _newest_evaluation(run)
    assert entry["opponent"] == summary["opponent"] == str(run.resolve())
    assert _seats(summary) == [({"player_1": "player_1", "player_2": str(run.resolve())}, ["player_2"], 2)]


def test_a_match_records_the_opponent_and_its_seats(ray_run):
    home, run = ray_run
    done = run_cli("eval", "ttt", "--opponent", HEURISTIC, "--episodes", "3", "--json", home=home, timeout=300,
                   env=RAY_ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    printed = json.loads(done.stdout)
    _entry, summary = _newest_evaluation(run)
    for said in (printed, summary):
        assert said["opponent"] == HEURISTIC
        assert _seats(said) == [({"player_1": "ttt", "player_2": HEURISTIC}, ["player_2"], 2),
                                ({"player_1": HEURISTIC, "player_2": "ttt"}, ["player_1"], 1)]


def test_an_evaluation_without_an_opponent_says_none(ray_run):
    home, run = ray_run
    done = run_cli("eval", "ttt", "--episodes", "2", home=home, timeout=300, env=RAY_ENV)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == "2 episodes of classic/tictactoe_v3", done.stdout
    assert "seats" not in done.stdout
    entry, summary = _newest_evaluation(run)
    assert entry["opponent"] is None and summary["opponent"] is None
    assert [s["opponent_agents"] for s in summary["seats"]] == [[]] * len(summary["seats"])


def test_a_run_with_no_policy_is_refused_in_the_words_of_eval(tmp_path):
    home = tmp_path / "home"
    config = write_config(tmp_path / "ttt.json", {"worker": "random", "run_id": "ttt-random",
                                                  "environment": {"family": "classic", "env_id": "tictactoe_v3"},
                                                  "total_timesteps": 50})
    assert run_cli("run", str(config), home=home).returncode == 0
    done = run_cli("eval", "ttt-random", "--opponent", "random", "--episodes", "2", home=home)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.count("mosaic: error:") == 1 and "--player" not in line, line
    assert line.startswith("mosaic: error: RUN|CHECKPOINT: 'ttt-random' is a run of the random worker, which "
                           "cannot evaluate (it trains no policies)"), line
    assert not any((home / "trainer" / "runs" / "ttt-random" / "eval").iterdir())  # a run's own folder, empty


# -- progress on a terminal ---------------------------------------------------------------------------------
def test_eval_shows_its_episodes_on_a_terminal_and_nothing_elsewhere(ray_run):
    """The worker's own evaluation draws the line (in the worker's process, whose stderr is the terminal);
    piped, the same command draws none."""
    from mosaic.testing.terminal import run_on_terminal

    home, _run = ray_run
    done = run_on_terminal(["eval", "ttt", "--opponent", "random", "--episodes", "6"], home, env=RAY_ENV)
    assert done.returncode == 0, done.terminal[-2000:]
    assert "\r\033[Keval ttt [####################] 6/6 episodes · " in done.terminal, done.terminal[-2000:]
    assert " · ETA 0s" in done.terminal and "/s · ETA" in done.terminal
    assert "6 episodes of classic/tictactoe_v3 against random" in done.stdout  # the results stay on stdout
    piped = run_cli("eval", "ttt", "--episodes", "2", home=home, timeout=300, env=RAY_ENV)
    assert piped.returncode == 0 and "episodes · " not in piped.stderr and "ETA" not in piped.stderr, piped.stderr


def test_a_match_shows_its_episodes_on_a_terminal(ray_run):
    from mosaic.testing.terminal import run_on_terminal

    home, _run = ray_run
    done = run_on_terminal(["eval", "ttt", "--opponent", HEURISTIC, "--episodes", "3"], home, env=RAY_ENV)
    assert done.returncode == 0, done.terminal[-2000:]
    assert f"eval ttt vs {HEURISTIC} [####################] 3/3 episodes · " in done.terminal, done.terminal
