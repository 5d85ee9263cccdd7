"""The worker's pure pieces, alone: when an iteration is reported, how the budget becomes Tianshou epochs,
the epsilon schedule. They import MOSAIC only, so they run here without Tianshou."""

from __future__ import annotations

import io
import json
import sys
from types import SimpleNamespace

from ts_support import REPO

sys.path.insert(0, str(REPO / "workers" / "tianshou_worker"))

from mosaic.workerkit.telemetry import TelemetryEmitter  # noqa: E402
from tianshou_worker.config import EpsilonSchedule  # noqa: E402
from tianshou_worker.telemetry import Reporter  # noqa: E402


def collect(steps: int, returns: list = ()) -> SimpleNamespace:
    return SimpleNamespace(n_collected_steps=steps, returns=list(returns), lens=[5] * len(returns))


def test_steps_past_the_budget_are_reported_once_not_at_every_collection_step():
    """Tianshou's epochs collect whole collection steps, so a run may end a little past its budget."""
    out = io.StringIO()
    rep = Reporter(TelemetryEmitter("r", stream=out), total_timesteps=100, report_every=50)
    for _ in range(13):  # 130 env steps, a report checked before each collection step as the safe point does
        if rep.due():
            rep.report()
        rep.collected(collect(10, [1.0]))
    rep.flush()
    metrics = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [m["timesteps_total"] for m in metrics if m["type"] == "metrics"] == [50, 100, 130]


def test_a_games_returns_are_reported_per_agent_with_the_winner():
    out = io.StringIO()
    rep = Reporter(TelemetryEmitter("r", stream=out), total_timesteps=100, report_every=50,
                   modules={"player_1": "policy", "player_2": "random"})
    rep.collected(collect(12, [[1.0, -1.0], [0.0, 0.0]]))
    episodes = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(e["returns"], e["winner"]) for e in episodes] == [({"player_1": 1.0, "player_2": -1.0}, "player_1"),
                                                              ({"player_1": 0.0, "player_2": 0.0}, None)]
    event = rep.report()
    assert event["module_episode_returns_mean"] == {"policy": 0.5, "random": -0.5}


def test_the_budget_splits_into_epochs_of_at_most_the_test_interval():
    from tianshou_worker.config import epochs

    assert epochs(99_360, 0) == (1, 99_360)  # no tests: one epoch
    assert epochs(99_360, 5000) == (20, 4968)
    assert epochs(1000, 500) == (2, 500)


def test_the_epsilon_schedule_is_flat_then_linear_then_flat():
    s = EpsilonSchedule(start=0.1, end=0.01, begin_at=10_000, end_at=50_000)
    assert [round(s.at(t), 6) for t in (0, 10_000, 30_000, 50_000, 90_000)] == [0.1, 0.1, 0.055, 0.01, 0.01]
