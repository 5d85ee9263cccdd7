"""mosaic.scoring.stats against independent computations, against rliable 1.2.0 itself, and by simulation.

Monte-Carlo tolerances. An endpoint of a percentile interval is the p-quantile (p = 0.025 or 0.975)
of B bootstrap replicates. The empirical CDF of B draws at a fixed value has standard deviation
sqrt(p (1 - p) / B), so an estimated p-quantile sits at a true CDF level p ± that. Two independent
estimates (B1 and B2 replicates) differ in level by at most d = 4 sqrt(p (1 - p) (1/B1 + 1/B2))
except with probability about 6e-5. The check is therefore distribution-free: one estimate's endpoint
must lie between the other bootstrap distribution's quantiles at p - d and p + d.

Coverage. N simulated experiments give a coverage with binomial standard deviation
sqrt(c (1 - c) / N); we accept 3 of them. The percentile bootstrap is known to under-cover at a
few runs per task: its spread is that of the sample, (n - 1) / n of the variance, and it ignores
that the spread is itself estimated. To first order, a nominal 95% interval from n runs of each of
T tasks covers P(|t_{T(n-1)}| < 1.96 sqrt((n - 1) / n)): 0.926 at n = 10, T = 3, but only 0.839
at n = 3. So at 10 runs per task coverage is checked against that level; at 3 it must be clearly
lower: intervals from 3 seeds are not to be trusted at their stated level (the report says so).
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.stats as scipy_stats

from mosaic.scoring import stats

ROOT = Path(__file__).resolve().parents[1]
RLIABLE_ENV = ROOT / "var" / "cache" / "rliable-env"
#: Pinned whole: rliable's `library` import fails with pandas 3 (through arch), and an unpinned resolve could
#: change what is compared against.
RLIABLE_REQUIREMENTS = ("rliable==1.2.0", "pandas==2.3.3", "arch==7.2.0", "numpy==2.4.6", "scipy==1.17.1",
                        "statsmodels==0.15.0", "seaborn==0.13.2", "matplotlib==3.11.2", "absl-py==2.5.1")
Z95 = 1.959963984540054


def skewed(rng: np.random.Generator, runs: int, tasks: int = 3) -> np.ndarray:
    """Scores with different levels, spreads and skews per task (normal, lognormal, exponential)."""
    columns = [rng.normal(1.0, 0.5, runs), rng.lognormal(0.0, 0.75, runs), rng.exponential(2.0, runs)]
    return np.stack([columns[t % 3] + t for t in range(tasks)], axis=1)


def level_band(reference: np.ndarray, p: float, b_own: int, b_ref: int) -> tuple[float, float]:
    """The values between which an estimate of ``reference``'s p-quantile must fall (module docstring)."""
    d = 4.0 * math.sqrt(p * (1 - p) * (1.0 / b_own + 1.0 / b_ref))
    return float(np.quantile(reference, max(0.0, p - d))), float(np.quantile(reference, min(1.0, p + d)))


def assert_endpoints_agree(low: float, high: float, reference: np.ndarray, b_own: int, b_ref: int,
                           confidence: float = 0.95) -> None:
    tail = (1 - confidence) / 2
    for value, p in ((low, tail), (high, 1 - tail)):
        lo, hi = level_band(reference, p, b_own, b_ref)
        assert lo <= value <= hi, f"endpoint {value} for level {p} outside the Monte-Carlo band [{lo}, {hi}]"


def naive_replicates(matrices: list[np.ndarray], fn, reps: int, seed: int) -> np.ndarray:
    """A plain loop: each task column of each matrix resampled with Python's own RNG (not numpy's)."""
    rng = random.Random(seed)
    out = []
    for _ in range(reps):
        resampled = []
        for m in matrices:
            runs, tasks = m.shape
            columns = [[m[rng.randrange(runs), t] for _ in range(runs)] for t in range(tasks)]
            resampled.append(np.array(columns).T)
        out.append(fn(*resampled))
    return np.array(out, dtype=float)


# -- point estimates against independent computations -----------------------------------------------
@pytest.mark.parametrize("shape", [(10, 3), (7, 3), (5, 1), (13, 4), (2, 2), (1, 1)])
def test_iqm_is_scipys_trimmed_mean_of_all_scores(shape):
    x = skewed(np.random.default_rng(sum(shape)), *shape)
    assert stats.iqm(x) == pytest.approx(scipy_stats.trim_mean(x.ravel(), 0.25), abs=1e-12)


def test_metrics_take_a_stack_of_matrices():
    stack = skewed(np.random.default_rng(1), 6 * 9, 3).reshape(6, 9, 3)
    for name, fn in stats.METRICS.items():
        assert np.allclose(fn(stack), [fn(m) for m in stack], atol=1e-12), name


def test_mean_median_and_optimality_gap_by_their_definitions():
    x = skewed(np.random.default_rng(2), 8, 5) / 4
    per_task = [statistics.fmean(x[:, t]) for t in range(x.shape[1])]
    assert stats.mean(x) == pytest.approx(statistics.fmean(x.ravel().tolist()), abs=1e-12)
    assert stats.median(x) == pytest.approx(statistics.median(per_task), abs=1e-12)
    gap = statistics.fmean(max(1.0 - v, 0.0) for v in x.ravel().tolist())
    assert stats.optimality_gap(x) == pytest.approx(gap, abs=1e-12)
    assert stats.optimality_gap(x, threshold=2.0) == pytest.approx(
        statistics.fmean(max(2.0 - v, 0.0) for v in x.ravel().tolist()), abs=1e-12)
    assert set(stats.METRICS) == {"mean", "median", "iqm", "optimality_gap"}


@pytest.mark.parametrize("n_x,n_y,integer", [(10, 10, False), (6, 9, False), (8, 5, True)])
def test_probability_of_improvement_is_the_mann_whitney_statistic(n_x, n_y, integer):
    rng = np.random.default_rng(n_x * 100 + n_y)
    x, y = skewed(rng, n_x, 4), skewed(rng, n_y, 4) + 0.3
    if integer:  # many ties: each counts half
        x, y = np.round(x), np.round(y)
    expected = statistics.fmean(scipy_stats.mannwhitneyu(x[:, t], y[:, t]).statistic / (n_x * n_y)
                                for t in range(4))
    assert stats.probability_of_improvement(x, y) == pytest.approx(expected, abs=1e-12)
    assert stats.probability_of_improvement(x, y) + stats.probability_of_improvement(y, x) == pytest.approx(1.0)
    assert stats.probability_of_improvement(x, x) == pytest.approx(0.5)


def test_performance_profile_counts_runs_above_each_threshold():
    x = skewed(np.random.default_rng(3), 9, 3)
    taus = np.linspace(-1, 8, 37)
    expected = [statistics.fmean(sum(v > tau for v in x[:, t]) / 9 for t in range(3)) for tau in taus]
    assert np.allclose(stats.performance_profile(x, taus), expected)
    profile, low, high = stats.performance_profile_band(x, taus, reps=300)
    assert np.allclose(profile, expected) and np.all(low <= profile) and np.all(profile <= high)


def test_normalise_per_task():
    x = np.array([[0.0, 10.0], [5.0, 30.0]])
    assert np.allclose(stats.normalise(x, [0.0, 10.0], [10.0, 50.0]), [[0.0, 0.0], [0.5, 0.5]])
    assert np.allclose(stats.normalise(x, 10.0, 0.0), [[1.0, 0.0], [0.5, -2.0]])  # lower raw is better
    with pytest.raises(ValueError, match="reference"):
        stats.normalise(x, 1.0, 1.0)


# -- intervals against a naive bootstrap --------------------------------------------------------------
B_OURS, B_NAIVE = 4000, 4000


@pytest.mark.parametrize("name", sorted(stats.METRICS))
def test_interval_agrees_with_a_naive_loop_bootstrap(name):
    x = skewed(np.random.default_rng(4), 10, 3) / 3
    reference = naive_replicates([x], stats.METRICS[name], B_NAIVE, seed=99)
    iv = stats.interval(x, name, reps=B_OURS, seed=0)
    assert iv.point == stats.METRICS[name](x)
    assert (iv.n_runs, iv.n_tasks) == (10, 3)
    assert_endpoints_agree(iv.low, iv.high, reference, B_OURS, B_NAIVE)


def test_interval_resamples_within_tasks():
    """Tasks at very different levels: pooling them would widen the mean's interval several times."""
    rng = np.random.default_rng(5)
    x = np.stack([rng.normal(level, 0.1, 10) for level in (0.0, 10.0, 20.0)], axis=1)
    iv = stats.interval(x, "mean", reps=2000)
    stratified_sd = math.sqrt(sum(x[:, t].var() / 10 for t in range(3))) / 3
    assert iv.high - iv.low == pytest.approx(2 * Z95 * stratified_sd, rel=0.15)


def test_probability_of_improvement_interval_agrees_with_a_naive_loop_bootstrap():
    rng = np.random.default_rng(6)
    x, y = skewed(rng, 10, 3), skewed(rng, 8, 3) + 0.4
    reference = naive_replicates([x, y], stats.probability_of_improvement, B_NAIVE, seed=7)
    iv = stats.probability_of_improvement_interval(x, y, reps=B_OURS, seed=0)
    assert iv.point == pytest.approx(stats.probability_of_improvement(x, y))
    assert_endpoints_agree(iv.low, iv.high, reference, B_OURS, B_NAIVE)


def test_curve_intervals_resample_whole_runs():
    """A resample keeps each run's curve whole: at every x it is the interval of that x's matrix."""
    curves = np.cumsum(np.random.default_rng(8).normal(0.1, 1.0, size=(9, 2, 12)), axis=2)
    point, low, high = stats.curve_intervals(curves, stats.iqm, reps=500, seed=3)
    for k in range(12):
        iv = stats.interval(curves[:, :, k], stats.iqm, reps=500, seed=3)
        assert (point[k], low[k], high[k]) == pytest.approx((iv.point, iv.low, iv.high), abs=1e-12)


def test_on_shared_x_interpolates_inside_every_curves_range():
    a = ([0.0, 10.0, 20.0, 30.0], [0.0, 1.0, 2.0, 3.0])
    b = ([5.0, 15.0, 25.0], [10.0, 20.0, 30.0])
    x, values = stats.on_shared_x([a, b])
    assert x.tolist() == [5.0, 10.0, 15.0, 20.0, 25.0]
    assert values.tolist() == [[0.5, 1.0, 1.5, 2.0, 2.5], [10.0, 15.0, 20.0, 25.0, 30.0]]
    x, values = stats.on_shared_x([a, b], points=3)
    assert x.tolist() == [5.0, 15.0, 25.0] and values.shape == (2, 3)
    with pytest.raises(ValueError, match="share no x range"):
        stats.on_shared_x([a, ([40.0, 50.0], [1.0, 2.0])])
    with pytest.raises(ValueError):
        stats.on_shared_x([])


def test_vector_metric_and_a_metric_that_takes_one_matrix_at_a_time():
    x = skewed(np.random.default_rng(9), 10, 3)
    both = stats.interval(x, lambda s: np.stack([stats.mean(s), stats.iqm(s)], axis=-1), reps=800, seed=1)
    assert both.point.shape == (2,) and np.all(both.low <= both.point) and np.all(both.point <= both.high)
    one_at_a_time = stats.interval(x, lambda m: float(np.mean(m)), reps=800, seed=1)
    batched = stats.interval(x, stats.mean, reps=800, seed=1)
    assert (one_at_a_time.low, one_at_a_time.high) == pytest.approx((batched.low, batched.high), abs=1e-12)
    assert (both.low[0], both.high[0]) == pytest.approx((batched.low, batched.high), abs=1e-12)
    assert both.as_dict()["point"] == pytest.approx(list(both.point))


def test_an_interval_of_2000_resamples_is_fast():
    x = skewed(np.random.default_rng(10), 10, 3)
    started = time.perf_counter()
    for name in stats.METRICS:
        stats.interval(x, name, reps=2000)
    elapsed = time.perf_counter() - started
    assert elapsed < 1.0, f"4 intervals of 2000 resamples took {elapsed:.2f} s"


# -- determinism and validation ------------------------------------------------------------------------
def test_same_seed_same_interval_and_numpys_global_rng_untouched():
    x = skewed(np.random.default_rng(11), 10, 3)
    np.random.seed(123)
    state = np.random.get_state()[1].copy()
    first = stats.interval(x, "iqm", seed=5)
    assert np.array_equal(np.random.get_state()[1], state), "the global RNG was drawn from"
    np.random.seed(456)
    assert stats.interval(x, "iqm", seed=5) == first
    assert stats.interval(x, "iqm", seed=6) != first


def test_intervals_do_not_depend_on_the_dicts_order_or_contents():
    rng = np.random.default_rng(12)
    a, b = skewed(rng, 10, 3), skewed(rng, 10, 3)
    forward = stats.intervals({"a": a, "b": b}, "mean", reps=500, seed=3)
    backward = stats.intervals({"b": b, "a": a}, "mean", reps=500, seed=3)
    assert forward == backward
    assert stats.intervals({"a": a}, "mean", reps=500, seed=3)["a"] == forward["a"]
    # identical data under two labels: two independent resamplings
    twins = stats.intervals({"a": a, "b": a}, "mean", reps=500, seed=3)
    assert twins["a"].low != twins["b"].low


def test_derived_seeds_are_stable_across_processes():
    """SHA-256 of seed and label, never Python's salted hash: the same report in every process."""
    assert stats.derived_seed("a", 0) == 8348787342930090591
    code = "from mosaic.scoring import stats; print(stats.derived_seed('algorithm=mappo', 7))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONHASHSEED": "12345"}, check=True).stdout
    assert int(out) == stats.derived_seed("algorithm=mappo", 7) == 11071428658640399347


@pytest.mark.parametrize("bad,match", [
    (np.zeros((0, 3)), "empty"), (np.zeros((3, 0)), "empty"), ([[1.0, 2.0], [3.0]], "ragged"),
    ([[1.0, float("nan")]], "NaN"), ([[1.0, float("inf")]], "NaN"), ([1.0, 2.0], "matrix"),
    ([["a", "b"]], "numeric"),
])
def test_bad_matrices_are_refused_clearly(bad, match):
    with pytest.raises(ValueError, match=match):
        stats.interval(bad, "mean")


@pytest.mark.parametrize("kwargs,match", [
    ({"confidence": 0.0}, "confidence"), ({"confidence": 1.0}, "confidence"), ({"confidence": 95}, "confidence"),
    ({"reps": 0}, "reps"), ({"reps": -5}, "reps"), ({"reps": 2.5}, "reps"), ({"reps": True}, "reps"),
])
def test_bad_bootstrap_settings_are_refused(kwargs, match):
    x = np.ones((4, 2))
    with pytest.raises(ValueError, match=match):
        stats.interval(x, "mean", **kwargs)
    with pytest.raises(ValueError, match=match):
        stats.probability_of_improvement_interval(x, x, **kwargs)
    with pytest.raises(ValueError, match=match):
        stats.curve_intervals(np.ones((4, 2, 3)), **kwargs)


def test_other_refusals():
    with pytest.raises(ValueError, match="same tasks"):
        stats.probability_of_improvement_interval(np.ones((4, 2)), np.ones((4, 3)))
    with pytest.raises(ValueError, match="not one of"):
        stats.interval(np.ones((4, 2)), "mode")
    with pytest.raises(ValueError, match="NaN"):
        stats.curve_intervals(np.full((3, 1, 4), np.nan))
    with pytest.raises(ValueError, match="points"):
        stats.curve_intervals(np.ones((3, 4)))


# -- coverage by simulation ----------------------------------------------------------------------------
N_EXPERIMENTS, SIM_REPS = 400, 500


def population():
    """Three tasks of known distributions: normal, lognormal and gamma (the last two skewed)."""
    from scipy import integrate, optimize

    tasks = [scipy_stats.norm(1.0, 0.5), scipy_stats.lognorm(0.5), scipy_stats.gamma(4.0, scale=0.25)]
    mixture_cdf = lambda v: statistics.fmean(d.cdf(v) for d in tasks)  # noqa: E731
    q25 = optimize.brentq(lambda v: mixture_cdf(v) - 0.25, -10, 50)
    q75 = optimize.brentq(lambda v: mixture_cdf(v) - 0.75, -10, 50)
    # the IQM pools every run of every task: its estimand is the trimmed mean of the tasks' equal mixture
    true_iqm = statistics.fmean(integrate.quad(lambda v, d=d: v * d.pdf(v), q25, q75)[0] for d in tasks) / 0.5
    true_mean = statistics.fmean(d.mean() for d in tasks)
    return tasks, {"iqm": true_iqm, "mean": true_mean}


def coverage(tasks, truths: dict[str, float], runs: int, seed: int) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    hits = dict.fromkeys(truths, 0)
    for i in range(N_EXPERIMENTS):
        x = np.stack([d.rvs(size=runs, random_state=rng) for d in tasks], axis=1)
        for name, truth in truths.items():
            iv = stats.interval(x, name, reps=SIM_REPS, seed=i)
            hits[name] += iv.low <= truth <= iv.high
    return {name: count / N_EXPERIMENTS for name, count in hits.items()}


def first_order_coverage(runs: int, tasks: int, confidence: float = 0.95) -> float:
    z = scipy_stats.norm.ppf(0.5 + confidence / 2) * math.sqrt((runs - 1) / runs)
    return 2 * scipy_stats.t.cdf(z, tasks * (runs - 1)) - 1


def binomial_tolerance(level: float) -> float:
    return 3 * math.sqrt(level * (1 - level) / N_EXPERIMENTS)


def test_interval_coverage_by_simulation():
    tasks, truths = population()
    at10 = coverage(tasks, truths, runs=10, seed=20)
    at3 = coverage(tasks, truths, runs=3, seed=21)
    expected10 = first_order_coverage(10, 3)  # 0.926
    for name in truths:
        assert abs(at10[name] - expected10) <= binomial_tolerance(expected10), (name, at10[name], expected10)
        assert at10[name] <= 0.95 + binomial_tolerance(0.95), (name, at10[name])  # not wider than needed
        # when to distrust: at 3 runs per task a "95%" interval misses far more often
        assert at3[name] < at10[name] - 0.04 and at3[name] < 0.9, (name, at3[name], at10[name])


def test_probability_of_improvement_interval_coverage_by_simulation():
    shift = np.array([0.5, 0.2, 0.0])  # X ~ N(shift, 1), Y ~ N(0, 1) per task
    truth = statistics.fmean(scipy_stats.norm.cdf(shift / math.sqrt(2)))
    rng = np.random.default_rng(22)
    hits = 0
    for i in range(N_EXPERIMENTS):
        x, y = rng.normal(shift, 1.0, size=(10, 3)), rng.normal(0.0, 1.0, size=(10, 3))
        iv = stats.probability_of_improvement_interval(x, y, reps=SIM_REPS, seed=i)
        hits += iv.low <= truth <= iv.high
    assert abs(hits / N_EXPERIMENTS - 0.95) <= binomial_tolerance(0.95), hits / N_EXPERIMENTS


# -- against rliable 1.2.0 ------------------------------------------------------------------------------
RLIABLE_SCRIPT = r"""
import json, sys
import numpy as np
from rliable import library, metrics

data = np.load(sys.argv[1])
x, y, taus = data["x"], data["y"], data["taus"]
reps, poi_reps = int(data["reps"]), int(data["poi_reps"])
aggregate = lambda s: np.array([metrics.aggregate_mean(s), metrics.aggregate_median(s),
                                metrics.aggregate_iqm(s), metrics.aggregate_optimality_gap(s)])
out = {"points": {k: aggregate(v).tolist() for k, v in (("x", x), ("y", y))},
       "poi": float(metrics.probability_of_improvement(x, y))}
np.random.seed(0)  # rliable's bootstrap draws from numpy's global RNG, whatever random_state says
_, cis = library.get_interval_estimates({"x": x, "y": y}, aggregate, reps=reps)
out["intervals"] = {k: v.tolist() for k, v in cis.items()}
np.random.seed(1)
_, cis = library.get_interval_estimates({"xy": (x, y)}, metrics.probability_of_improvement, reps=poi_reps)
out["poi_interval"] = np.asarray(cis["xy"]).ravel().tolist()
profiles, _ = library.create_performance_profile({"x": x}, taus, reps=2)
out["profile"] = np.asarray(profiles["x"]).tolist()
print(json.dumps(out))
"""


def _build_rliable_env() -> Path:
    """A throwaway venv with rliable 1.2.0, kept under var/cache (built once per machine, under a lock)."""
    from mosaic.host.environments.uv import pip_sources, uv_binary

    python = RLIABLE_ENV / "bin" / "python"
    marker = RLIABLE_ENV / "mosaic-requirements.txt"
    wanted = "\n".join(RLIABLE_REQUIREMENTS) + "\n--compile-bytecode\n"
    RLIABLE_ENV.parent.mkdir(parents=True, exist_ok=True)
    with open(RLIABLE_ENV.parent / "rliable-env.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and marker.read_text() == wanted and python.exists():
            return python
        shutil.rmtree(RLIABLE_ENV, ignore_errors=True)
        sources = pip_sources()
        env = {**os.environ, **sources.uv_env(), "UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1"}
        env.pop("VIRTUAL_ENV", None)
        uv = uv_binary()
        steps = [[uv, "venv", "--python", sys.executable, str(RLIABLE_ENV)],
                 [uv, "pip", "install", "--python", str(python), "--compile-bytecode",  # imports 3x faster
                  *sources.uv_args(), *RLIABLE_REQUIREMENTS]]
        for step in steps:
            proc = subprocess.run(step, capture_output=True, text=True, env=env, timeout=600, stdin=subprocess.DEVNULL)
            if proc.returncode != 0:
                shutil.rmtree(RLIABLE_ENV, ignore_errors=True)
                raise RuntimeError(f"`{' '.join(step[1:3])}` failed: {proc.stderr.strip()[-1500:]}")
        marker.write_text(wanted)
    return python


@pytest.fixture(scope="module")
def rliable_python() -> Path:
    try:
        return _build_rliable_env()
    except Exception as exc:  # no network, no uv: say so (a skip would hide that nothing was compared)
        message = (f"could not build the rliable 1.2.0 environment in {RLIABLE_ENV}: {exc}. "
                   "It needs the package index pip is configured with; set MOSAIC_OFFLINE=1 to skip this test.")
        if os.environ.get("MOSAIC_OFFLINE") == "1":
            pytest.skip(message)
        pytest.fail(message)


@pytest.mark.xdist_group("rliable")
def test_matches_rliable_1_2_0(rliable_python, tmp_path):
    rng = np.random.default_rng(30)
    x, y = skewed(rng, 10, 3) / 4, skewed(rng, 7, 3) / 4 + 0.1
    taus = np.linspace(0.0, 2.0, 21)
    reps, poi_reps = 2000, 800
    np.savez(tmp_path / "scores.npz", x=x, y=y, taus=taus, reps=reps, poi_reps=poi_reps)
    (tmp_path / "script.py").write_text(RLIABLE_SCRIPT)
    proc = subprocess.run([str(rliable_python), str(tmp_path / "script.py"), str(tmp_path / "scores.npz")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    theirs = json.loads(proc.stdout.strip().splitlines()[-1])

    names = ["mean", "median", "iqm", "optimality_gap"]
    for label, m in (("x", x), ("y", y)):
        ours = [float(stats.METRICS[n](m)) for n in names]
        assert ours == pytest.approx(theirs["points"][label], abs=1e-9)
        for i, name in enumerate(names):  # their interval against our bootstrap distribution
            low, high = theirs["intervals"][label][0][i], theirs["intervals"][label][1][i]
            reference = stats.bootstrap_distribution(m, stats.METRICS[name], reps=20000, seed=1)
            assert_endpoints_agree(low, high, reference, reps, 20000)
    assert stats.probability_of_improvement(x, y) == pytest.approx(theirs["poi"], abs=1e-12)
    ours_poi = stats.probability_of_improvement_interval(x, y, reps=4000, seed=2)
    reference = naive_replicates([x, y], stats.probability_of_improvement, 4000, seed=3)
    assert_endpoints_agree(ours_poi.low, ours_poi.high, reference, 4000, 4000)
    assert_endpoints_agree(*theirs["poi_interval"], reference, poi_reps, 4000)
    assert stats.performance_profile(x, taus) == pytest.approx(theirs["profile"], abs=1e-12)
