"""Episode statistics and winners, shared by every worker's metrics."""

from __future__ import annotations

import pytest

from mosaic.workerkit.episode_stats import episode_statistics, winner


def test_statistics_over_the_episodes_of_an_iteration():
    episodes = [
        {"returns": {"a": 1.0, "b": -1.0}, "length": 10, "modules": {"a": "main", "b": "main_v1"}},
        {"returns": {"a": 3.0, "b": 0.0}, "length": 20, "modules": {"a": "main", "b": "main_v1"},
         "illegal_actions": 2},
    ]
    stats = episode_statistics(episodes)
    assert stats["num_episodes"] == 2 and stats["illegal_actions"] == 2
    assert (stats["episode_return_mean"], stats["episode_return_min"], stats["episode_return_max"]) == (1.5, 0.0, 3.0)
    assert stats["episode_len_mean"] == 15
    assert stats["agent_episode_returns_mean"] == {"a": 2.0, "b": -0.5}
    assert stats["module_episode_returns_min"] == {"main": 1.0, "main_v1": -1.0}
    assert episode_statistics([]) == {"num_episodes": 0}


@pytest.mark.parametrize("returns, structure, expected", [
    ({"p0": 1.0, "p1": -1.0}, "competitive", "p0"),
    ({"p0": 0.0, "p1": 0.0}, "competitive", None),  # a draw
    ({"p0": -3.0, "p1": -1.0}, None, "p1"),  # unclassified env: the scores decide
    ({"p0": -3.0, "p1": -1.0}, "cooperative", None),  # one team: nobody wins
    ({"p0": 1.0, "p1": 0.0, "p2": 0.0}, "competitive", None),  # not a two-player game
])
def test_winner(returns, structure, expected):
    assert winner(returns, structure) == expected
