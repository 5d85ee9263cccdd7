"""The terminal progress view: what a researcher sees while a run trains."""

from __future__ import annotations

import io

from mosaic.clients.cli.progress import ProgressView


def _lines(events: list[dict]) -> list[str]:
    stream = io.StringIO()  # not a TTY: one line per iteration
    view = ProgressView(stream)
    for event in events:
        view(event)
    return stream.getvalue().splitlines()


def test_iterations_show_steps_return_and_episodes():
    lines = _lines([{"type": "run_started", "run_id": "r1", "worker": "ray", "algorithm": "PPO",
                     "env": {"family": "mpe", "env_id": "simple_spread_v3"}, "total_timesteps": 400},
                    {"type": "metrics", "iteration": 1, "timesteps_total": 200, "env_steps_per_s": 150.0,
                     "episode_return_mean": -20.5, "num_episodes_lifetime": 8}])
    assert lines[0] == "run r1: ray PPO on mpe/simple_spread_v3"
    assert "50% 200/400" in lines[1] and "return -20.50" in lines[1] and "episodes 8" in lines[1]
    assert "pool" not in lines[1]


def test_self_play_runs_show_win_rate_pool_and_snapshots():
    lines = _lines([{"type": "metrics", "iteration": 3, "timesteps_total": 600, "total_timesteps": 900,
                     "self_play": {"window_win_rate": 0.8, "pool_size": 2}},
                    {"type": "log", "level": "info", "message": "self-play: snapshot main_v1 of main joined",
                     "self_play_event": "snapshot_added"},
                    {"type": "log", "level": "info", "message": "quiet"}])
    assert "win 0.80 | pool 2" in lines[0]
    assert lines[1] == "self-play: snapshot main_v1 of main joined"
    assert len(lines) == 2  # ordinary info logs stay out of the way


def test_learning_summary_compares_the_first_iterations_with_the_last():
    view = ProgressView(io.StringIO())
    assert view.learning_summary() is None  # nothing to compare yet
    for i, ret in enumerate([-40.0, -38.0, -36.0, -34.0, -33.0, -31.0, -30.0, -29.0], start=1):
        view({"type": "metrics", "iteration": i, "timesteps_total": 100 * i, "episode_return_mean": ret})
    summary = view.learning_summary()
    assert summary.startswith("mean episode return: -39.00 over the first 2 iterations, -29.50 over the last")
    assert "(+9.50; best iteration -29.00, 8 iterations)" in summary


def test_the_summary_counts_every_iteration_not_only_those_that_finished_an_episode():
    """An iteration without a finished episode (no episode_return_mean) is still an iteration."""
    view = ProgressView(io.StringIO())
    for i, ret in enumerate([-5.0, None, -3.0], start=1):
        view({"type": "metrics", "iteration": i, "timesteps_total": 100 * i,
              **({"episode_return_mean": ret} if ret is not None else {})})
    assert view.learning_summary().endswith("3 iterations, 2 with finished episodes)")


def test_a_zero_sum_game_shows_each_agents_return_not_their_sum():
    """In a zero-sum game the agents' returns cancel: their sum (episode_return_mean) is 0 whoever wins, so the
    listing's RETURN and the closing summary show each agent's mean instead; anything else keeps the sum."""
    from mosaic.clients.cli.common import return_text
    from mosaic.workerkit.episode_stats import episode_statistics, zero_sum_returns

    wins = episode_statistics([{"returns": {"player_0": 1.0, "player_1": -1.0}, "length": 9}] * 3
                              + [{"returns": {"player_0": -1.0, "player_1": 1.0}, "length": 7}])
    assert zero_sum_returns(wins) == {"player_0": 0.5, "player_1": -0.5}
    assert return_text(wins) == "player_0 +0.500, player_1 -0.500"
    shared = episode_statistics([{"returns": {"a": -2.0, "b": -2.0}, "length": 25}])  # cooperative: the sum
    draws = episode_statistics([{"returns": {"a": 0.0, "b": 0.0}, "length": 9}])  # nothing to tell apart
    alone = episode_statistics([{"returns": {"agent_0": 0.0}, "length": 9}])
    assert [zero_sum_returns(m) for m in (shared, draws, alone)] == [None, None, None]
    assert [return_text(m) for m in (shared, draws, alone, {})] == ["-4.000", "0.000", "0.000", "-"]

    view = ProgressView(io.StringIO())
    for i, p0 in enumerate([-0.5, -0.25, 0.25, 0.75], start=1):
        view({"type": "metrics", "iteration": i, "timesteps_total": 100 * i, "episode_return_mean": 0.0,
              "agent_episode_returns_mean": {"player_0": p0, "player_1": -p0}})
    assert view.learning_summary() == ("mean episode return per agent (they sum to 0: a zero-sum game), over the "
                                       "first iteration -> the last: player_0 -0.50 -> +0.75, player_1 +0.50 -> "
                                       "-0.75 (4 iterations)")


def test_mosaic_runs_shows_each_players_return_for_a_connect_four_run(home):
    """The random worker's default: connect four, random against random (player_0, who moves first, wins more)."""
    from cli_support import run_cli

    proc = run_cli("run", "--worker", "random", "--run-id", "c4", "--set", "total_timesteps=3000", home=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "mean episode return per agent (they sum to 0: a zero-sum game)" in proc.stderr
    listing = run_cli("runs", home=home)
    row = next(line for line in listing.stdout.splitlines() if line.startswith("c4 "))
    assert "player_0 " in row and "player_1 " in row and " 0.000" not in row, row
