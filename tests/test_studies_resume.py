"""A study's driver dies and is resumed; a study's pruner stops a trial. Real daemon, real worker processes.

The reference worker (``random``, slowed by ``step_delay_s``) plays simple_spread_v3: its score falls with its episode
length (``max_episode_steps``, the space here), so trials differ, and a long-episode trial scores below a short one
from its first report on (what the pruning test needs). One home and its daemon serve the module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import run_cli
from mosaic.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("experiments")


@pytest.fixture(scope="module")
def study_home(tmp_path_factory):
    from mosaic.host.daemon.endpoint import find_daemon

    home = tmp_path_factory.mktemp("studies") / "home"
    home.mkdir(parents=True)
    yield home
    endpoint = find_daemon(home)
    if endpoint is not None:
        os.kill(endpoint.pid, signal.SIGTERM)
        wait_until(lambda: find_daemon(home) is None, 60, "the studies' daemon to stop")


def _spec(name: str, trials: int, *, delay: float, steps: int, sampler_seed: int = 0, parallel: int = 2,
          pruner: dict | None = None) -> dict:
    return {"name": name, "seeds": [0, 1, 2, 3, 4], "retries": 1,
            "base": {"random": {"environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL"},
                                "total_timesteps": steps, "step_delay_s": delay,
                                "reporting": {"every_timesteps": 25}}},
            "tuning": {"space": {"max_episode_steps": {"type": "int", "low": 5, "high": 25}}, "trials": trials,
                       "seeds": [10, 11], "parallel": parallel, "sampler": {"name": "random", "seed": sampler_seed},
                       **({"pruner": pruner} if pruner else {})}}


def _write(path: Path, spec: dict) -> Path:
    path.write_text(json.dumps(spec))
    return path


def _run_in_background(home: Path, spec: Path) -> subprocess.Popen:
    """``mosaic experiment run SPEC``: the study's driver, as a process of its own (to kill, or to cancel)."""
    return subprocess.Popen([sys.executable, "-m", "mosaic", "experiment", "run", str(spec)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "MOSAIC_HOME": str(home)})


def _journal(home: Path, name: str) -> list[dict]:
    path = home / "experiments" / name / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _optuna_trials(home: Path, name: str) -> list:
    import optuna

    from mosaic.experiments.study.driver import storage_for

    storage = storage_for(home / "experiments" / name, "journal")
    studies = optuna.get_all_study_names(storage)
    return [t for s in studies for t in optuna.load_study(study_name=s, storage=storage).get_trials()]


def _completed_runs(home: Path, name: str) -> dict[str, list[str]]:
    """cell -> the run ids of its attempts that completed (journal)."""
    out: dict[str, list[str]] = {}
    for e in _journal(home, name):
        if e["event"] == "ended" and e.get("state") == "completed":
            out.setdefault(e["cell"], []).append(e["run_id"])
    return out


def test_a_killed_driver_is_resumed_with_exactly_the_budgeted_trials(study_home, tmp_path):
    """Kill the driver (SIGKILL) with trials completed and others in flight, and resume: Optuna's storage ends with
    exactly ``trials`` trials, every one COMPLETE; no completed cell ran twice, and a trial's cells keep its number."""
    name = "killed-study"
    spec = _write(tmp_path / "k.json", _spec(name, trials=6, delay=0.004, steps=300))
    driver = _run_in_background(study_home, spec)
    wait_until(lambda: sum(e["event"] == "trial_ended" for e in _journal(study_home, name)) >= 1, 180,
               "a first trial to end", proc=driver)
    driver.kill()
    driver.wait(10)
    before = _completed_runs(study_home, name)
    ended_before = [e for e in _journal(study_home, name) if e["event"] == "trial_ended"]
    assert len(ended_before) < 6, "the study finished before its driver could be killed"
    proc = run_cli("experiment", "resume", name, home=study_home, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = _optuna_trials(study_home, name)
    assert sorted(t.number for t in trials) == list(range(6)), "exactly the budgeted trials, numbered 0..5"
    assert all(t.state.name == "COMPLETE" for t in trials), [t.state.name for t in trials]
    after = _completed_runs(study_home, name)
    for cell, runs in after.items():
        assert len(runs) == 1, f"cell {cell} completed twice: {runs}"
        if cell in before:
            assert runs == before[cell], f"cell {cell} ran again after the resume"
    trial_cells = sorted(c for c in after if c.startswith("k"))
    assert trial_cells == sorted(f"k0t{n:03d}s{k}" for n in range(6) for k in range(2))
    # each trial's value is the mean of its two tuning cells' scores, as journaled when it ended
    ended = {e["trial"]: e for e in _journal(study_home, name) if e["event"] == "trial_ended"}
    for t in trials:
        assert t.value == pytest.approx(sum(ended[t.number]["seed_scores"]) / 2)
    tests = sorted(c for c in after if c.startswith("c"))
    assert tests == [f"c{i:03d}" for i in range(5)], "the best trial ran on the five test seeds"
    # status through the command line: the trials per contender and the best so far, as Optuna holds them
    best = max(trials, key=lambda t: t.value)
    proc = run_cli("experiment", "status", name, home=study_home)
    assert proc.returncode == 0, proc.stderr
    row = next(line for line in proc.stdout.splitlines() if line.startswith("default "))
    assert row.split()[:6] == ["default", "6/6", "0", "6", "0", "0"], row
    assert row.endswith(f"{best.value:.4g} (trial {best.number})"), row
    assert "study: testing" in proc.stdout
    status = json.loads(run_cli("experiment", "status", name, "--json", home=study_home).stdout)["study"]
    (contender,) = status["contenders"]
    assert contender["best"]["trial"] == best.number and contender["best"]["params"] == best.params
    assert [t["value"] for t in contender["trials_list"]] == [t.value for t in sorted(trials, key=lambda t: t.number)]
    # the plan's wall-time estimate reads the rate of the completed runs in the run store
    proc = run_cli("experiment", "plan", str(_write(tmp_path / "again.json", _spec("again", 6, delay=0.004, steps=300))),
                   home=study_home)
    assert proc.returncode == 0, proc.stderr
    assert "earlier random run(s) on simple_spread_v3 here)" in proc.stdout, proc.stdout


def test_a_trial_asked_before_the_driver_died_gets_its_cells_on_resume(study_home, tmp_path):
    """The driver died between Optuna's ask and journaling the trial's cells: ``resume`` finds the trial RUNNING with
    no cells, runs it with the parameters Optuna holds for it, and asks for no more than the budget."""
    from mosaic.experiments.plan import make_plan
    from mosaic.experiments.spec import parse_spec
    from mosaic.experiments.store import ExperimentStore
    from mosaic.experiments.study.driver import StudyDriver

    name = "asked-study"
    spec = parse_spec(_spec(name, trials=2, delay=0.0, steps=100))
    exp = ExperimentStore(study_home).create(make_plan(spec, validate=False), spec.source)
    driver = StudyDriver(exp)
    asked = driver._ask(0, 0)  # and the driver dies here
    params = dict(asked.params)
    proc = run_cli("experiment", "resume", name, home=study_home, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    trials = sorted(_optuna_trials(study_home, name), key=lambda t: t.number)
    assert [t.number for t in trials] == [0, 1]
    assert trials[0].params == params and trials[0].state.name == "COMPLETE"
    added = [e for e in _journal(study_home, name) if e["event"] == "cell_added" and e.get("trial") == 0]
    assert [e["cell"]["config"]["max_episode_steps"] for e in added] == [params["max_episode_steps"]] * 2


def _processes_of(run_ids: list[str]) -> list[str]:
    """The live processes whose command line names one of ``run_ids`` (a worker's config is in its run folder)."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            line = " ".join(proc.info["cmdline"] or ())
        except (psutil.Error, TypeError):
            continue
        if any(r in line for r in run_ids):
            found.append(f"{proc.info['pid']}: {line[:200]}")
    return found


def test_a_pruned_trial_ends_its_runs_cancelled_and_leaves_no_process(study_home, tmp_path):
    """Median pruning after one trial: sampler seed 11 draws episode lengths 6, then 21 (found by sampling Optuna's
    random sampler with the study's per-trial seeds), so trial 1 scores below trial 0 from its first reports on
    and is pruned. Its runs end CANCELLED (Optuna: PRUNED), no process of theirs is left, the pruned trial counts as
    one of the budget, and the study goes on to its test (cancelled here once it starts: its runs are not the point)."""
    name = "pruned-study"
    spec = _write(tmp_path / "p.json", _spec(name, trials=2, delay=0.01, steps=600, sampler_seed=11, parallel=1,
                                             pruner={"name": "median", "startup_trials": 1}))
    driver = _run_in_background(study_home, spec)
    wait_until(lambda: any(e["event"] == "best" for e in _journal(study_home, name)), 180,
               "the study to pick its best trial", proc=driver)
    proc = run_cli("experiment", "cancel", name, home=study_home, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert driver.wait(60) == 3, driver.stderr.read()[-3000:]  # cancelled
    trials = sorted(_optuna_trials(study_home, name), key=lambda t: t.number)
    assert [t.params["max_episode_steps"] for t in trials] == [6, 21]
    assert [t.state.name for t in trials] == ["COMPLETE", "PRUNED"]
    journal = _journal(study_home, name)
    pruned_cells = sorted(e["cell"] for e in journal if e["event"] == "pruned")
    assert pruned_cells == ["k0t001s0", "k0t001s1"]
    runs = [e["run_id"] for e in journal if e["event"] == "submitted" and e["cell"] in pruned_cells]
    ended = {e["run_id"]: e["state"] for e in journal if e["event"] == "ended"}
    assert runs and all(ended.get(r) in ("cancelled", "completed") for r in runs), ended
    assert any(ended.get(r) == "cancelled" for r in runs), "the pruner stopped no run: it pruned too late to tell"
    wait_until(lambda: not _processes_of(runs), 30, "the pruned trial's worker processes to be gone")
    submitted = [e["cell"] for e in journal if e["event"] == "submitted"]
    assert all(submitted.count(c) == 1 for c in pruned_cells), "a pruned cell was run again"
    tests = [e["cell"]["cell_id"] for e in journal if e["event"] == "cell_added" and e.get("best_trial") is not None]
    assert tests == [f"c{i:03d}" for i in range(5)] and {e["trial"] for e in journal if e["event"] == "best"} == {0}


def test_a_study_goes_on_on_another_machine_from_the_journal_its_report_carries(study_home, tmp_path):
    """A study run in part here, its report folder carried to a fresh home (another machine: no run of it there):
    ``run SPEC --study-journal REPORT/study.journal`` keeps every ended trial (none runs again), runs again the one
    that was in flight, and tests the best; a journal of another study is refused (exit 2) with nothing created."""
    from mosaic.host.daemon.endpoint import find_daemon

    name = "carried-study"
    spec = _write(tmp_path / "c.json", _spec(name, trials=4, delay=0.004, steps=300))
    driver = _run_in_background(study_home, spec)
    wait_until(lambda: sum(e["event"] == "trial_ended" for e in _journal(study_home, name)) >= 2, 180,
               "two trials to end", proc=driver)
    run_cli("experiment", "cancel", name, home=study_home, timeout=120)
    driver.wait(60)
    proc = run_cli("experiment", "report", name, home=study_home, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    carried = study_home / "experiments" / name / "report" / "study.journal"
    here = {t.number: (t.state.name, t.params, t.value) for t in _optuna_trials(study_home, name)}
    ended = {n for n, (state, _, _) in here.items() if state == "COMPLETE"}
    assert len(ended) >= 2 and len(here) <= 4

    other = tmp_path / "other-home"
    try:
        wrong = run_cli("experiment", "run", str(_write(tmp_path / "w.json", _spec("wrong-name", 4, delay=0.0,
                                                                                     steps=100))),
                        "--study-journal", str(carried), home=other, timeout=120)
        assert wrong.returncode == 2 and "--study-journal:" in wrong.stderr and "carried-study:default" in wrong.stderr
        assert not (other / "experiments" / "wrong-name").exists()
        proc = run_cli("experiment", "run", str(spec), "--study-journal", str(carried), home=other, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    finally:
        endpoint = find_daemon(other)
        if endpoint is not None:
            os.kill(endpoint.pid, signal.SIGTERM)
            wait_until(lambda: find_daemon(other) is None, 60, "the other home's daemon to stop")
    there = {t.number: (t.state.name, t.params, t.value) for t in _optuna_trials(other, name)}
    assert sorted(there) == [0, 1, 2, 3] and all(state == "COMPLETE" for state, _, _ in there.values())
    for n in ended:
        assert there[n] == here[n], f"trial {n} changed on the other machine"
    submitted = [e["cell"] for e in _journal(other, name) if e["event"] == "submitted"]
    again = sorted({c for c in submitted if c.startswith("k")})
    assert not [c for c in again if int(c[3:6]) in ended], f"an ended trial ran again: {again}"
    assert sorted(c for c in submitted if c.startswith("c")) == [f"c{i:03d}" for i in range(5)]
