"""mosaic.curves: metric keys, smoothing as TensorBoard does it, and mean ± 95% bands over runs."""

from __future__ import annotations

import math
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mosaic.curves import RunCurves, ema, flatten, interpolate, mean_band, t95


def metrics(seq, steps, ret, ts, **extra):
    return {"v": 1, "type": "metrics", "run_id": "r", "seq": seq, "ts": ts, "iteration": seq,
            "timesteps_total": steps, "episode_return_mean": ret, **extra}


def test_flatten_keeps_numbers_under_dotted_keys():
    event = metrics(3, 300, -5.0, 10.0, learner={"shared": {"loss": 0.5, "note": "x"}},
                    agent_episode_returns_mean={"a": 1, "b": float("nan")}, done=True)
    assert flatten(event) == {"iteration": 3.0, "timesteps_total": 300.0, "episode_return_mean": -5.0,
                              "learner.shared.loss": 0.5, "agent_episode_returns_mean.a": 1.0}


def test_run_curves_collects_points_in_order_and_skips_replayed_events():
    curves = RunCurves("r")
    for event in (metrics(1, 100, -9.0, 100.0), {"type": "episode", "seq": 2, "returns": {"a": 1}},
                  metrics(3, 200, -7.0, 102.5), metrics(3, 200, -7.0, 102.5),
                  {"type": "log", "seq": 4, "level": "info", "message": "hi"}):
        curves.add(event)
    assert curves.series("episode_return_mean") == ([100.0, 200.0], [-9.0, -7.0])
    assert curves.series("episode_return_mean", "wall_time_s") == ([0.0, 2.5], [-9.0, -7.0])
    assert curves.series("episode_return_mean", "iteration") == ([1.0, 3.0], [-9.0, -7.0])
    assert curves.keys()[0] == "episode_return_mean" and "wall_time_s" not in curves.keys()
    assert len(curves.episodes) == 1 and len(curves.logs) == 1


def test_ema_is_tensorboards_debiased_smoothing():
    assert ema([1.0, 2.0, 3.0], 0.0) == [1.0, 2.0, 3.0]
    smoothed = ema([4.0, 4.0, 4.0], 0.9)
    assert all(math.isclose(v, 4.0) for v in smoothed)  # debiased: a constant stays itself
    two = ema([0.0, 10.0], 0.5)
    assert two[0] == 0.0 and math.isclose(two[1], (0.5 * 0 * 0.5 + 0.5 * 10) / (1 - 0.25))
    with pytest.raises(ValueError):
        ema([1.0], 1.0)


@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=50), st.floats(0, 0.99))
def test_ema_stays_within_the_values_seen(values, weight):
    out = ema(values, weight)
    for i, v in enumerate(out):
        assert min(values[: i + 1]) - 1e-6 * (1 + abs(v)) <= v <= max(values[: i + 1]) + 1e-6 * (1 + abs(v))


def test_mean_band_uses_the_shared_x_range_and_students_t():
    a = ([0.0, 10.0, 20.0], [0.0, 10.0, 20.0])
    b = ([5.0, 15.0, 25.0], [5.0, 5.0, 5.0])
    band = mean_band([a, b])
    assert band.x == [5.0, 10.0, 15.0, 20.0] and band.runs == 2
    values = [interpolate(*a, 15.0), interpolate(*b, 15.0)]
    assert values == [15.0, 5.0]
    half = t95(1) * statistics.stdev(values) / math.sqrt(2)
    i = band.x.index(15.0)
    assert math.isclose(band.mean[i], 10.0) and math.isclose(band.high[i] - band.mean[i], half)
    assert t95(2) == 4.303 and t95(100) == 1.96
    single = mean_band([a])
    assert single.mean == a[1] and single.low == single.high == a[1]
    assert mean_band([]).x == []
