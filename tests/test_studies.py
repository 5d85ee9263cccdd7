"""Tuning studies (a spec's ``tuning`` section): what is refused before anything runs, the study driver's wiring of
Optuna's sampler to the experiment's cells on a known objective, selection by the tuning seeds only, and TPE against
random search on a known function.

The driver is tested in process over a real experiment folder: a test backend "runs" each cell by writing its run
folder (manifest, telemetry) at once, its score a known function of the cell's config and seed, so no worker
trains and every number the driver tells Optuna is known in advance.
"""

from __future__ import annotations

import copy
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from mosaic.experiments.backends import Backend, status_from_run_store
from mosaic.experiments.coordinator import run as run_experiment
from mosaic.experiments.plan import make_plan
from mosaic.experiments.spec import parse_spec
from mosaic.experiments.store import ExperimentStore
from mosaic.runs import RunStore

ENV = {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL"}


def _study_spec(**changes: Any) -> dict[str, Any]:
    """The issue's working example: a random-play study over max_episode_steps (runs in seconds)."""
    return {"name": "s1", "seeds": [0, 1, 2, 3, 4],
            "base": {"random": {"environment": dict(ENV), "total_timesteps": 200,
                                "reporting": {"every_timesteps": 25}}},
            "tuning": {"space": {"max_episode_steps": {"type": "int", "low": 5, "high": 25}}, "trials": 3,
                       "seeds": [10, 11], "sampler": {"name": "random", "seed": 1}},
            **changes}


def _bad(edit: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    spec = _study_spec()
    edit(spec)
    return spec


def _space(**params: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda s: s["tuning"]["space"].update(params)


# -- A. every bad input: exit 2, one line naming the field, nothing created ------------------------------------
BAD_INPUTS = [
    pytest.param(lambda s: s["tuning"].update(space={}), "tuning.space: the space is empty", id="empty-space"),
    pytest.param(lambda s: s["tuning"].update(extra={"random": {
        "algo_params.no_such_knob": {"type": "uniform", "low": 0.0, "high": 1.0}}}),
        "tuning.extra.random.algo_params.no_such_knob: worker 'random' has no setting 'algo_params.no_such_knob'",
        id="extra-param-the-worker-lacks"),
    pytest.param(lambda s: (_space(knob={"type": "uniform", "low": 0.0, "high": 1.0})(s),
                            s.update(translate={"knob": {"random": "no_such_section.knob"}})),
                 "tuning.space.knob: worker 'random' has no setting 'no_such_section.knob'",
                 id="shared-name-translated-to-a-path-the-worker-lacks"),
    pytest.param(lambda s: (_space(knob={"type": "uniform", "low": 0.0, "high": 1.0})(s),
                            s.update(translate={"knob": {"random": None}})),
                 "tuning.space.knob: worker 'random' has no such setting (translate.knob.random is null)",
                 id="shared-name-the-worker-has-not"),
    pytest.param(_space(lr={"type": "uniform", "low": 0.5, "high": 0.5}),
                 "tuning.space.lr: low (0.5) must be below high (0.5)", id="low-equals-high"),
    pytest.param(_space(lr={"type": "uniform", "low": 0.7, "high": 0.1}),
                 "tuning.space.lr: low (0.7) must be below high (0.1)", id="low-above-high"),
    pytest.param(_space(lr={"type": "log_uniform", "low": 0.0, "high": 1.0}),
                 "tuning.space.lr.low: a log scale needs bounds above 0, got 0", id="log-uniform-from-0"),
    pytest.param(_space(n={"type": "int", "low": -2, "high": 8, "log": True}),
                 "tuning.space.n.low: a log scale needs bounds above 0, got -2", id="log-int-below-0"),
    pytest.param(_space(c={"type": "categorical", "choices": []}),
                 "tuning.space.c.choices: a categorical needs at least one choice", id="categorical-no-choices"),
    pytest.param(lambda s: (s.update(axes={"total_timesteps": [200, 201]}),
                            s["tuning"].update(trials={"total_timesteps=200": 3, "total_timesteps=201": 4})),
                 "tuning.trials: unequal trials across contenders (total_timesteps=200: 3, total_timesteps=201: 4)",
                 id="unequal-trials"),
    pytest.param(lambda s: s.update(axes={"total_timesteps": [200, 400]}),
                 "settings.total_timesteps: unequal budgets across contenders (total_timesteps=200: 200 env steps, "
                 "total_timesteps=400: 400 env steps)", id="unequal-budgets"),
    pytest.param(lambda s: s["tuning"].update(seeds=[4, 10]),
                 "tuning.seeds: seed(s) 4 are also test seeds (seeds)", id="test-seeds-overlap-tuning-seeds"),
    pytest.param(lambda s: s.update(seeds=[0, 1, 2, 3]),
                 "seeds: a study tests each contender's best configuration on held-out seeds; 4 given; allowed: at "
                 "least 5", id="fewer-than-5-test-seeds"),
    pytest.param(lambda s: s.update(score={"metric": "no_such_metric"}),
                 "score.metric: 'no_such_metric' is not a metric every contender's worker reports",
                 id="score-metric-not-reported"),
]


def _cli(home: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mosaic", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "MOSAIC_HOME": str(home)})


def _stop_daemon(home: Path) -> None:
    from mosaic.testing.daemon import stop_home_daemon

    stop_home_daemon(home)  # a spec wrongly taken would have started one


@pytest.mark.parametrize("edit, message", BAD_INPUTS)
def test_a_bad_study_is_refused_by_plan_and_run_naming_the_field_and_creating_nothing(tmp_path, edit, message):
    """Rule: every bad input of a study (an empty space; a parameter a contender's worker does not have, as
    ``mosaic workers show`` lists its settings; low >= high; a log scale with a bound <= 0; a categorical with no
    choices; unequal trials or budgets across contenders; test seeds that are also tuning seeds; fewer than 5 test
    seeds; a score metric the workers do not report) makes ``mosaic experiment plan SPEC`` and ``mosaic experiment
    run SPEC`` exit 2 with ONE line on stderr that names the field, no traceback, and creates nothing: no
    ``MOSAIC_HOME/experiments/NAME`` folder, no run folder."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_bad(edit)))
    homes = {cmd: tmp_path / f"home-{cmd}" for cmd in ("plan", "run")}
    procs = {cmd: _cli(home, "experiment", cmd, str(spec)) for cmd, home in homes.items()}  # both at once
    try:
        outputs = {cmd: proc.communicate(timeout=300) for cmd, proc in procs.items()}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        _stop_daemon(homes["run"])  # a spec wrongly taken would have started one
    for cmd, proc in procs.items():
        out, err = outputs[cmd]
        assert proc.returncode == 2, (cmd, proc.returncode, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, (cmd, err)
        assert lines[0].startswith(f"mosaic: error: {message}"), (cmd, lines[0])
        assert "allowed: " in lines[0], (cmd, lines[0])
        assert "Traceback" not in err, (cmd, err)
        home = homes[cmd]
        assert not (home / "experiments" / "s1").exists(), cmd
        runs = home / "trainer" / "runs"
        assert not runs.exists() or not any(runs.iterdir()), (cmd, list(runs.iterdir()))


def test_the_working_example_plans(tmp_path):
    """Rule: the good spec the bad inputs are edits of plans (exit 0), so each refusal above is its edit's alone."""
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(_study_spec()))
    proc = _cli(tmp_path / "home", "experiment", "plan", str(spec))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "tuning.space.max_episode_steps: integer from 5 to 25" in out, out
    # what the worker is given at the space's middle point, and the budget, trials x seeds x env steps
    assert "    max_episode_steps -> max_episode_steps: 15\n" in out, out
    assert ("  default: 3 trials × 2 seeds × 200 env steps = 1200 env steps to tune, + 5 × 200 = 1000 to test; "
            in out), out
    assert not (tmp_path / "home" / "experiments" / "s1").exists()
    proc = _cli(tmp_path / "home", "experiment", "plan", str(spec), "--json")
    out, err = proc.communicate(timeout=300)
    study = json.loads(out)["study"]
    assert (study["trials"], study["tuning_seeds"], study["test_seeds"]) == (3, [10, 11], [0, 1, 2, 3, 4])
    assert [c["sample"]["max_episode_steps"] for c in study["contenders"]] == [15]


# -- the in-process backend: a cell's score is a known function of its config and seed -------------------------
class KnownObjective(Backend):
    """Runs each submitted cell at once, in this process: its run folder holds a manifest and telemetry whose
    ``episode_return_mean`` is ``score(config)`` at every report (so the run's final score is exactly that). A run id
    ``fail(run_id)`` says yes to ends failed (its message ``injected failure in RUN_ID``)."""

    name = "known"

    def __init__(self, home: Path, score: Callable[[dict[str, Any]], float],
                 fail: Callable[[str], bool] = lambda run_id: False, steps: int = 100, every: int = 25) -> None:
        self.store = RunStore(home)
        self.home = home
        self.score = score
        self.fail = fail
        self.steps, self.every = steps, every
        self.submitted: list[tuple[str, dict[str, Any]]] = []

    def describe(self) -> str:
        return "in process, a known objective"

    def submit(self, run_id: str, config: dict[str, Any]) -> None:
        if self.store.exists(run_id):
            return
        self.submitted.append((run_id, copy.deepcopy(config)))
        failed = self.fail(run_id)
        run = self.store.create(run_id, config, {"worker": config["worker"], "status": "running"})
        value = self.score(config)
        for t in range(self.every, self.steps + 1, self.every):
            if failed and t > self.steps // 2:
                break
            _event(run.telemetry_path, {"type": "metrics", "timesteps_total": t, "episode_return_mean": value})
        if failed:
            _event(run.telemetry_path, {"type": "run_failed", "message": f"injected failure in {run_id}"})
            run.update_manifest(status="failed")
        else:
            _event(run.telemetry_path, {"type": "run_completed", "summary": {"episode_return_mean": value}})
            run.update_manifest(status="completed")

    def status(self, run_ids: list[str]) -> dict[str, Any]:
        return {run_id: status_from_run_store(self.home, run_id) for run_id in run_ids}

    def cancel(self, run_id: str, reason: str) -> None:  # every run has ended by the time it could be asked
        pass


def _event(path: Path, event: dict[str, Any]) -> None:
    """One telemetry line, compact as the daemon writes them (``RunDir.last_event`` looks for ``"type":"..."``)."""
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(event, separators=(",", ":")) + "\n")


def _experiment(home: Path, data: dict[str, Any]):
    spec = parse_spec(data)
    return spec, ExperimentStore(home).create(make_plan(spec, validate=False), spec.source)


def _driver_spec(name: str, space: dict[str, Any], trials: int, sampler: str, seed: int, parallel: int,
                 axes: dict[str, Any] | None = None, retries: int = 0) -> dict[str, Any]:
    return {"name": name, "seeds": [0, 1, 2, 3, 4], "retries": retries,
            "base": {"random": {"environment": dict(ENV), "total_timesteps": 100,
                                "reporting": {"every_timesteps": 25}}},
            **({"axes": axes} if axes else {}),
            "tuning": {"space": space, "trials": trials, "seeds": [10, 11],
                       "sampler": {"name": sampler, "seed": seed}, "parallel": parallel}}


def _bowl(config: dict[str, Any]) -> float:
    """-(x - 0.3)^2, moved a little by the seed (so a trial's value is a real mean over its seeds)."""
    return -(config["x"] - 0.3) ** 2 + 0.001 * (config["seed"] - 10.5)


def _replay(optuna: Any, sampler: str, seed: int, dims: list, trials: list) -> list[dict[str, Any]]:
    """The params an independent Optuna study with the project's sampler and per-trial seeds suggests, told the
    same outcomes in the same order."""
    from mosaic.experiments.study.driver import distributions, per_trial_seed, sampler_for

    study = optuna.create_study(direction="maximize")
    asked = []
    for t in sorted(trials, key=lambda t: t.number):
        study.sampler = sampler_for(sampler, per_trial_seed(seed, t.number))
        mine = study.ask(fixed_distributions=distributions(dims))
        assert mine.number == t.number
        asked.append(dict(mine.params))
        if t.state.name == "COMPLETE":
            study.tell(mine, t.value)
        else:
            study.tell(mine, state=t.state)
    return asked


# -- B. the sampler's wiring on a known objective ---------------------------------------------------------------
@pytest.mark.parametrize("sampler, trials, parallel", [("random", 6, 3), ("tpe", 12, 1)])
def test_the_driver_asks_what_the_sampler_suggests_and_tells_the_mean_over_tuning_seeds(tmp_path, sampler, trials,
                                                                                        parallel):
    """Rule: over a real experiment folder and a backend whose every run scores a known function of its config
    (-(x-0.3)^2, plus a small seed term), each contender's Optuna study (in the experiment's storage) holds exactly
    ``trials`` trials; their params are exactly what an independent Optuna study with the same sampler and per-trial
    seeds (``per_trial_seed``, ``sampler_for``, ``distributions``) suggests, told the same outcomes (random search:
    and so the two contenders try the same points, a paired design); each trial's value is the mean of its tuning
    seeds' scores; trials are COMPLETE; the best trial is Optuna's ``best_trial``; and the test cells (c000...) run
    the best trial's params on the test seeds only. With TPE and one trial at a time, trials past TPE's 10 startup
    trials come from its model, and still match."""
    from mosaic.experiments.study.driver import StudyDriver, quiet_optuna, trial_cell_id

    optuna = quiet_optuna()
    home = tmp_path / "home"
    data = _driver_spec("wiring", {"x": {"type": "uniform", "low": 0.0, "high": 1.0}}, trials, sampler, 7, parallel,
                        axes={"variant": ["p", "q"]})
    spec, exp = _experiment(home, data)
    backend = KnownObjective(home, _bowl)
    assert run_experiment(exp, backend, poll_s=0.0) == 0
    driver = StudyDriver(exp)
    dims = driver.study.for_worker("random")
    tuning_seeds, test_seeds = [10, 11], [0, 1, 2, 3, 4]
    params_by_contender = []
    for i in range(2):
        study = optuna.load_study(study_name=driver.study_name(i), storage=driver.storage)
        got = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
        assert [t.number for t in got] == list(range(trials)), i
        assert {t.state.name for t in got} == {"COMPLETE"}, i
        assert [dict(t.params) for t in got] == _replay(optuna, sampler, 7, dims, got), i
        for t in got:
            scores = [_bowl({"x": t.params["x"], "seed": s}) for s in tuning_seeds]
            assert t.value == pytest.approx(math.fsum(scores) / 2, rel=1e-12, abs=1e-15), (i, t.number)
            assert t.user_attrs["seed_scores"] == pytest.approx(scores, rel=1e-12, abs=1e-15)
            cells = [exp.plan.cell(trial_cell_id(i, t.number, k)) for k in range(2)]
            assert [c.seed for c in cells] == tuning_seeds and all(c.config["x"] == t.params["x"] for c in cells)
        best = max(got, key=lambda t: t.value)
        assert study.best_trial.number == best.number
        tests = [exp.plan.cell(f"c{i * 5 + k:03d}") for k in range(5)]
        assert [c.seed for c in tests] == test_seeds and all(c.trial is None for c in tests)
        assert all(c.config["x"] == best.params["x"] and c.config["variant"] == "pq"[i] for c in tests), i
        params_by_contender.append([dict(t.params) for t in got])
    if sampler == "random":
        assert params_by_contender[0] == params_by_contender[1]
    # only the tuning seeds ran before the best was chosen; the test seeds ran the best configurations only
    seeds_run = [c["seed"] for _, c in backend.submitted]
    first_test = next(n for n, (run_id, _) in enumerate(backend.submitted) if "-c0" in run_id)
    assert set(seeds_run[:first_test]) == set(tuning_seeds) and set(seeds_run[first_test:]) == set(test_seeds)
    assert len(backend.submitted) == 2 * trials * 2 + 2 * 5


def test_a_trial_whose_cell_fails_for_good_fails_counts_and_the_study_goes_on(tmp_path):
    """Rule: a cell that fails for good (its retries used) makes its trial FAIL with the cause kept
    (``user_attrs['cause']``, naming the cell and the run's own message); the failed trial counts as one of the
    contender's ``trials``, the other trials complete, and the best completed trial still runs on the test seeds."""
    from mosaic.experiments.study.driver import StudyDriver, quiet_optuna

    optuna = quiet_optuna()
    home = tmp_path / "home"
    data = _driver_spec("failing", {"x": {"type": "uniform", "low": 0.0, "high": 1.0}}, 5, "random", 3, 2,
                        retries=1)
    spec, exp = _experiment(home, data)
    backend = KnownObjective(home, _bowl, fail=lambda run_id: "-k0t001s1-" in run_id)
    assert run_experiment(exp, backend, poll_s=0.0) == 0
    driver = StudyDriver(exp)
    study = optuna.load_study(study_name=driver.study_name(0), storage=driver.storage)
    got = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    assert len(got) == 5
    assert [t.state.name for t in got] == ["COMPLETE", "FAIL", "COMPLETE", "COMPLETE", "COMPLETE"]
    cause = got[1].user_attrs["cause"]
    assert cause == "cell k0t001s1: failed: injected failure in failing-k0t001s1-a2", cause
    assert [r for r, _ in backend.submitted if "k0t001s1" in r] == ["failing-k0t001s1-a1", "failing-k0t001s1-a2"]
    assert got[1].value is None and study.best_trial.number != 1
    best = max((t for t in got if t.state.name == "COMPLETE"), key=lambda t: t.value)
    assert study.best_trial.number == best.number
    tests = [exp.plan.cell(f"c{k:03d}") for k in range(5)]
    assert all(c.config["x"] == best.params["x"] for c in tests) and [c.seed for c in tests] == [0, 1, 2, 3, 4]
    trial_views = [t for t in driver.trials() if t.state == "FAIL"]
    assert [(t.number, t.cause) for t in trial_views] == [(1, cause)]


# -- C. selection uses the tuning seeds only --------------------------------------------------------------------
def _arms(config: dict[str, Any]) -> float:
    """Arm A scores 1 on the tuning seeds (>= 10) and 0 on the test seeds; arm B the other way round."""
    tuning = config["seed"] >= 10
    return float((config["arm"] == "A") == tuning)


def test_the_best_configuration_is_chosen_on_the_tuning_seeds_only(tmp_path):
    """Rule: the configuration the test seeds run is the best on the tuning seeds, whatever the test seeds would
    say. Arm A is best on the tuning seeds (1 against 0), arm B on the test seeds (1 against 0); both are tried;
    A runs on the test seeds, where B (the same function) would have scored higher: selection did not look at
    the test seeds."""
    from mosaic.experiments.results import run_result
    from mosaic.experiments.study.driver import StudyDriver

    home = tmp_path / "home"
    data = _driver_spec("arms", {"arm": {"type": "categorical", "choices": ["A", "B"]}}, 6, "random", 0, 2)
    spec, exp = _experiment(home, data)
    backend = KnownObjective(home, _arms)
    assert run_experiment(exp, backend, poll_s=0.0) == 0
    driver = StudyDriver(exp)
    trials = driver.trials()
    assert {t.params["arm"] for t in trials} == {"A", "B"}, [t.params for t in trials]
    assert {t.params["arm"]: t.value for t in trials} == {"A": 1.0, "B": 0.0}
    best = driver.best(0)
    assert best is not None and best.params == {"arm": "A"}
    tests = [c for c in exp.plan.cells if c.trial is None]
    assert [c.seed for c in tests] == spec.seeds and {c.config["arm"] for c in tests} == {"A"}
    cells = exp.cells()
    test_scores = [run_result(RunStore(home).path_for(cells[c.cell_id].completed_run)).final_score for c in tests]
    a_on_test = statistics.fmean(test_scores)
    b_on_test = statistics.fmean(_arms({"arm": "B", "seed": s}) for s in spec.seeds)
    assert a_on_test == 0.0 and b_on_test == 1.0 and b_on_test > a_on_test


# -- D. TPE against random search on a known function --------------------------------------------------------
THRESHOLD = 0.001  # within this of the optimum (0): a disk of radius ~0.032 around (0.3, 0.7), ~0.3% of [0, 1]^2
CAP = 100


def _trials_to_threshold(sampler: str, seed: int) -> int:
    """Trials the project's wiring needs to first score within :data:`THRESHOLD` of the bowl's optimum (CAP + 1:
    not within CAP trials)."""
    from mosaic.experiments.study.driver import distributions, per_trial_seed, quiet_optuna, sampler_for
    from mosaic.experiments.study.space import Dimension

    optuna = quiet_optuna()
    dims = [Dimension("x", "uniform", 0.0, 1.0), Dimension("y", "uniform", 0.0, 1.0)]
    study = optuna.create_study(direction="maximize")
    for n in range(CAP):
        study.sampler = sampler_for(sampler, per_trial_seed(seed, n))
        trial = study.ask(fixed_distributions=distributions(dims))
        value = -((trial.params["x"] - 0.3) ** 2 + (trial.params["y"] - 0.7) ** 2)
        study.tell(trial, value)
        if value >= -THRESHOLD:
            return n + 1
    return CAP + 1


def test_tpe_needs_fewer_trials_than_random_search_on_a_known_bowl():
    """Rule: on the bowl -((x-0.3)^2 + (y-0.7)^2) over [0,1]^2, with the project's wiring (``sampler_for(name,
    per_trial_seed(seed, n))`` per trial, ``distributions``, ``ask(fixed_distributions=...)``, ``tell``), over
    sampler seeds 0..9, TPE's median number of trials to first score within 0.001 of the optimum is at least 40
    below random search's (capped at 100 trials; not reached counts 101).

    Measured (optuna 5.0.0): random search [25, 53, then 101 × 8], median 101 (the disk is 0.3% of the square:
    ~320 trials expected); TPE [30, 32, 32, 34, 39, 39, 42, 42, 47, 56], median 39. Over seeds 0..49 in blocks of
    ten, TPE's medians were 39, 26, 28, 24.5, 28.5 and random's all 101: a margin of 40 leaves room for ~20 more."""
    random_search = [_trials_to_threshold("random", seed) for seed in range(10)]
    tpe = [_trials_to_threshold("tpe", seed) for seed in range(10)]
    assert statistics.median(tpe) + 40 <= statistics.median(random_search), (sorted(tpe), sorted(random_search))


def test_a_budget_a_library_rounds_is_compared_as_the_library_takes_it(tmp_path):
    """Rule: contenders get equal env-step budgets as their libraries will take them: XuanCe steps its 16 envs
    together, so a budget of 100 is 112 env steps (said up front by the worker), 12% above the random worker's 100,
    past the 2% a study allows: refused, naming the field and the rounding; at 1600 (a whole number of vector
    steps) the two are equal and the plan says nothing of rounding."""
    from cli_support import REPO
    from mosaic.testing import worker_env_for_tests

    home = tmp_path / "home"
    (home / "envs").mkdir(parents=True)
    env = worker_env_for_tests("xuance", REPO, lambda: tmp_path / "xuance-env")
    (home / "envs" / "xuance").symlink_to(env, target_is_directory=True)

    def spec(steps: int) -> Path:
        path = tmp_path / f"rounded-{steps}.json"
        path.write_text(json.dumps({
            "name": "rounded", "seeds": [0, 1, 2, 3, 4], "axes": {"worker": ["random", "xuance"]},
            "base": {"random": {}, "xuance": {"algorithm": "ippo", "num_envs": 16,
                                              "algo_params": {"buffer_size": 32, "n_minibatch": 1}}},
            "settings": {"environment": dict(ENV), "total_timesteps": steps},
            "tuning": {"extra": {"random": {"step_delay_s": {"type": "uniform", "low": 0.0, "high": 0.001}},
                                 "xuance": {"gamma": {"type": "uniform", "low": 0.9, "high": 0.99}}},
                       "trials": 2, "seeds": [10]}}))
        return path

    proc = _cli(home, "experiment", "plan", str(spec(100)))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, (out, err)
    assert err.startswith("mosaic: error: settings.total_timesteps: unequal budgets across contenders "
                          "(worker=random: 100 env steps, worker=xuance: 112 env steps; as the libraries round them)"), err
    proc = _cli(home, "experiment", "plan", str(spec(1600)))
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert "rounds the budget" not in out and "× 1600 env steps" in out, out


def test_a_study_in_an_rdb_storage_runs_as_one_in_the_journal(tmp_path):
    """Rule: ``tuning.storage`` an RDB URL (SQLite here; any SQLAlchemy URL Optuna takes, for many drivers) holds the
    study instead of the journal file: the same trials, params and values as the same study in the journal (the
    sampler is seeded per trial, so the storage changes nothing), and no study.journal is written."""
    from mosaic.experiments.study.driver import StudyDriver

    def trials_of(name: str, storage: str) -> list[tuple]:
        home = tmp_path / name
        data = _driver_spec(name, {"x": {"type": "uniform", "low": 0.0, "high": 1.0}}, 4, "random", 3, 2)
        data["tuning"]["storage"] = storage
        spec, exp = _experiment(home, data)
        assert run_experiment(exp, KnownObjective(home, _bowl), poll_s=0.0) == 0
        driver = StudyDriver(exp, read_only=True)
        assert (exp.root / "study.journal").exists() == (storage == "journal")
        return [(t.number, t.state, t.params, t.value) for t in driver.trials()]

    database = tmp_path / "studies.sqlite"
    in_rdb = trials_of("rdb", f"sqlite:///{database}")
    assert database.is_file() and len(in_rdb) == 4
    assert in_rdb == trials_of("journal", "journal")
