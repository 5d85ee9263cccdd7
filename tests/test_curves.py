"""mosaic.scoring.curves: metric keys, smoothing as TensorBoard does it; the band of runs' curves
(mosaic.scoring.stats.curve_band) and Student's t interval of a mean (mosaic.scoring.interval)."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mosaic.scoring import stats
from mosaic.scoring.curves import RunCurves, ema, flatten, increasing, interpolate
from mosaic.scoring.interval import Interval, t95, t_interval


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


def test_increasing_keeps_the_later_point_of_an_x_logged_again():
    assert increasing([1.0, 2.0, 3.0, 2.0, 4.0], [10.0, 20.0, 30.0, 21.0, 40.0]) == ([1.0, 2.0, 4.0],
                                                                                    [10.0, 21.0, 40.0])


def test_curve_band_uses_the_shared_x_range_and_resamples_whole_runs():
    a = ([0.0, 10.0, 20.0], [0.0, 10.0, 20.0])
    b = ([5.0, 15.0, 25.0], [5.0, 5.0, 5.0])
    band = stats.curve_band([a, b], stats.mean, reps=500, seed=4)
    assert isinstance(band, Interval) and band.x.tolist() == [5.0, 10.0, 15.0, 20.0] and band.n_runs == 2
    assert [interpolate(*a, 15.0), interpolate(*b, 15.0)] == [15.0, 5.0]
    i = band.x.tolist().index(15.0)
    assert math.isclose(band.point[i], 10.0)
    # the band is curve_intervals on the runs' values at those x values: whole runs resampled
    grid, values = stats.on_shared_x([a, b])
    point, low, high = stats.curve_intervals(values[:, None, :], stats.mean, 500, 0.95, 4)
    assert np.array_equal(band.low, low) and np.array_equal(band.high, high) and np.array_equal(band.point, point)
    assert band.low[i] == 5.0 and band.high[i] == 15.0  # two runs: resamples of both, one or the other
    single = stats.curve_band([a], stats.mean)
    assert single.point.tolist() == a[1] and single.low.tolist() == single.high.tolist() == a[1]
    # at most max_points x values: the logged ones when fewer, else evenly spaced
    assert stats.curve_band([a, b], max_points=4).x.tolist() == [5.0, 10.0, 15.0, 20.0]
    assert stats.curve_band([a, b], max_points=3).x.tolist() == [5.0, 12.5, 20.0]
    for curves in ([], [a, ([30.0, 40.0], [1.0, 2.0])]):
        with pytest.raises(ValueError):
            stats.curve_band(curves)


def test_t_interval_is_students_t_around_the_mean():
    assert t95(1) == 12.706 and t95(2) == 4.303 and t95(100) == 1.96 and math.isnan(t95(0))
    values = [1.0, 2.0, 4.0, 7.0]
    iv = t_interval(values)
    half = t95(3) * statistics.stdev(values) / math.sqrt(4)
    assert (iv.point, iv.n_runs, iv.confidence) == (3.5, 4, 0.95)
    assert math.isclose(iv.low, 3.5 - half) and math.isclose(iv.high, 3.5 + half)
    assert t_interval([2.5]) == Interval(2.5, 2.5, 2.5, n_runs=1)  # one value: no spread to measure
    with pytest.raises(ValueError):
        t_interval([])


def test_an_interval_as_a_dict_has_plain_values():
    assert Interval(1.0, 0.5, 2.0, 3, 2).as_dict() == {"point": 1.0, "low": 0.5, "high": 2.0, "n_runs": 3,
                                                         "n_tasks": 2, "confidence": 0.95}
    band = Interval(np.array([1.0, 2.0]), np.array([0.0, 1.0]), np.array([2.0, 3.0]), 2, 1, x=np.array([5.0, 6.0]))
    assert band.as_dict() == {"point": [1.0, 2.0], "low": [0.0, 1.0], "high": [2.0, 3.0], "n_runs": 2, "n_tasks": 1,
                              "confidence": 0.95, "x": [5.0, 6.0]}
