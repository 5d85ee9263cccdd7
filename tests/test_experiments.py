"""Experiments: the spec and its grid, the journal's cell states, and real grids run through a real daemon.

The grids run real workers: CleanRL and Tianshou, each in its own environment, for the comparison with
``mosaic run``; the reference worker (slowed by ``step_delay_s`` so that cells are in flight long enough to
be interrupted) for killing the coordinator, the daemon and a worker mid-grid. One home and its daemon
(started by the first experiment, as a user's would be) serve the whole module.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cli_support import REPO, run_cli
from mosaic.errors import UserError
from mosaic.experiments.coordinator import cell_states
from mosaic.experiments.spec import parse_spec
from mosaic.experiments.store import ExperimentStore
from mosaic.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("experiments")


# -- the spec and its grid (no workers) -----------------------------------------------------------------
def _spec(**fields):
    return {"name": "t", "base": {"random": {"environment": {"family": "classic", "env_id": "tictactoe_v3"}}},
            **fields}


@pytest.mark.parametrize("fields, field", [
    ({"name": "bad name"}, "name:"),
    ({"name": None}, "name: must be a string, got None;"),
    ({"combine": "cartesian"}, "combine:"),
    ({"seeds": 0}, "seeds:"),
    ({"seeds": [1, 1]}, "seeds:"),
    ({"seeds": "three"}, "seeds:"),
    ({"axes": {"seed": [1, 2]}}, "axes.seed:"),
    ({"axes": {"learning_rate": []}}, "axes.learning_rate:"),
    ({"axes": {"a": [1, 2], "b": [1]}, "combine": "zip"}, "axes:"),
    ({"settings": {"seed": 3}}, "settings.seed:"),
    ({"retries": -1}, "retries:"),
    ({"retry_from": "middle"}, "retry_from:"),
    ({"continue_from": ["a"]}, "continue_from:"),
    ({"continue_from": "t"}, "continue_from:"),  # itself
    ({"score": {"metric": ""}}, "score.metric:"),
    ({"score": {"final": 0.1}}, "score.final:"),
    ({"score": {"level_within": 1.5}}, "score.level_within:"),
    ({"score": {"level_within": "2%"}}, "score.level_within:"),
    ({"normalise": {"x": {"random": 1.0}}}, "normalise.x.reference: is required;"),
    ({"normalise": {"x": {"random": 1.0, "reference": 1.0}}}, "normalise.x:"),
    ({"normalise": {"x": {"random": "guess", "reference": 1.0}}}, "normalise.x.random:"),
    ({"normalise": {"x": {"random": 0.0, "reference": "top"}}}, "normalise.x.reference:"),
    ({"normalise": {"x": {"random": 0.0, "reference": 1.0, "measure_timesteps": 5}}}, "normalise.x.measure_timesteps:"),
    ({"normalise": {"x": {"random": "measure", "reference": 1.0, "measure_timesteps": 0}}},
     "normalise.x.measure_timesteps:"),
    ({"report": {"confidence": 1.5}}, "report.confidence:"),
    ({"backend": "slurm"}, "backend:"),
    ({"translate": {"lam": {"ray": "algo_params..lambda"}}}, "translate.lam.ray:"),
    ({"colour": "blue"}, "colour:"),
])
def test_a_bad_spec_is_refused_naming_the_field(fields, field):
    with pytest.raises(UserError) as err:
        parse_spec(_spec(**fields))
    assert str(err.value).startswith(field), str(err.value)
    assert "allowed: " in str(err.value) or "expected " in str(err.value), str(err.value)


def _refusal(parse, data) -> str:
    with pytest.raises(UserError) as err:
        parse(data)
    return str(err.value)


def test_a_spec_is_refused_in_the_words_of_a_run_config():
    """The spec is read by the config kit, as a run config is: the same mistake is worded the same way. An
    unknown key names the nearest and every allowed key; a value of the wrong type names its field and the
    type wanted (a spec's field then says what it allows)."""
    from dataclasses import fields

    from mosaic.experiments.spec import Score, SpecFields
    from mosaic.workerkit.run_fields import Checkpointing, RunConfig

    def run(data):
        return RunConfig.from_dict({"run_id": "r", **data})

    def spec(data):
        return parse_spec(_spec(**data))

    def keys(cls):
        return ", ".join(f.name for f in fields(cls))

    assert _refusal(run, {"seeds": 3}) == f"seeds: unknown field (did you mean 'seed'?); allowed: {keys(RunConfig)}"
    assert _refusal(spec, {"seed": 3}) == f"seed: unknown field (did you mean 'seeds'?); allowed: {keys(SpecFields)}"
    assert _refusal(run, {"checkpoint": {"kep": 1}}) == \
        f"checkpoint.kep: unknown field (did you mean 'keep'?); allowed: {keys(Checkpointing)}"
    assert _refusal(spec, {"score": {"metrik": "x"}}) == \
        f"score.metrik: unknown field (did you mean 'metric'?); allowed: {keys(Score)}"
    assert _refusal(run, {"seed": "two"}) == "seed: must be an integer, got 'two'"
    assert _refusal(spec, {"retries": "two"}) == \
        "retries: must be an integer, got 'two'; allowed: an integer from 0 to 100"
    assert _refusal(run, {"checkpoint": {"at_end": "no"}}) == "checkpoint.at_end: must be true or false, got 'no'"
    assert _refusal(spec, {"score": {"higher_is_better": "no"}}) == \
        "score.higher_is_better: must be true or false, got 'no'"


def test_the_grid_crosses_axes_and_seeds_and_translates_names_per_worker():
    spec = parse_spec({
        "name": "g", "base": {"ray": {"algorithm": "ppo"}, "xuance": {"algorithm": "mappo"}},
        "settings": {"total_timesteps": 1000, "gae_lambda": 0.9},
        "translate": {"gae_lambda": {"ray": "algo_params.lambda_", "xuance": "algo_params.gae_lambda"}},
        "axes": {"worker": ["ray", "xuance"], "environment.env_id": ["a_v1", "b_v1"]},
        "seeds": [5, 6]})
    cells = spec.cells()
    assert [c.cell_id for c in cells] == [f"c{i:03d}" for i in range(8)]
    assert [(c.worker, c.env, c.seed) for c in cells[:4]] == [("ray", "a_v1", 5), ("ray", "a_v1", 6),
                                                              ("ray", "b_v1", 5), ("ray", "b_v1", 6)]
    assert cells[0].config["algo_params"] == {"lambda_": 0.9}
    assert cells[4].config["algo_params"] == {"gae_lambda": 0.9}
    assert all(c.config["total_timesteps"] == 1000 and c.config["seed"] == c.seed for c in cells)
    # the env is not part of a configuration: configurations are compared per env, over seeds
    assert {c.configuration for c in cells} == {"worker=ray", "worker=xuance"}
    zipped = parse_spec({"name": "z", "base": {"ray": {}}, "combine": "zip", "seeds": 1,
                         "axes": {"learning_rate": [0.1, 0.2], "gamma": [0.9, 0.99]}}).cells()
    assert [(c.config["learning_rate"], c.config["gamma"]) for c in zipped] == [(0.1, 0.9), (0.2, 0.99)]


def test_a_measured_random_score_adds_one_random_play_cell_per_env_and_seed():
    """``random: measure``: after the grid, one run of the random reference worker per seed on that env's
    environment, for the env's smallest cell budget (or ``measure_timesteps``); an env with a given random
    score gets none, and without a budget to copy the spec is refused naming the field."""
    grid = {"name": "m", "base": {"ray": {"algorithm": "ppo", "environment": {"family": "mpe"}}}, "seeds": [3, 4],
            "axes": {"environment.env_id": ["a_v1", "b_v1"], "total_timesteps": [500, 800]}}
    cells = parse_spec({**grid, "normalise": {"a_v1": {"random": "measure", "reference": 1.0},
                                              "b_v1": {"random": -1.0, "reference": 1.0}}}).cells()
    assert len(cells) == 10 and not any(c.baseline for c in cells[:8])
    assert [(c.cell_id, c.worker, c.seed, c.env, c.configuration, c.baseline) for c in cells[8:]] == [
        ("c008", "random", 3, "a_v1", "random play", True), ("c009", "random", 4, "a_v1", "random play", True)]
    assert cells[8].config == {"worker": "random", "seed": 3, "total_timesteps": 500,
                               "environment": {"family": "mpe", "env_id": "a_v1"}, "reporting": {"every_timesteps": 5}}
    measured = {"random": "measure", "reference": 1.0, "measure_timesteps": 2000}
    cells = parse_spec({**grid, "normalise": {"a_v1": measured, "b_v1": measured}}).cells()
    assert [(c.env, c.config["total_timesteps"]) for c in cells if c.baseline] == [("a_v1", 2000)] * 2 + \
        [("b_v1", 2000)] * 2
    from mosaic.experiments.spec import Cell
    assert Cell.from_dict(cells[-1].to_dict()) == cells[-1] and "baseline" not in cells[0].to_dict()
    no_budget = {**grid, "axes": {"environment.env_id": ["a_v1"]},
                 "normalise": {"a_v1": {"random": "measure", "reference": 1.0}}}
    with pytest.raises(UserError, match=r"^normalise.a_v1.measure_timesteps: the cells of a_v1 give no "):
        parse_spec(no_budget).cells()


def test_a_setting_a_worker_lacks_is_refused_naming_the_cell():
    spec = parse_spec({"name": "n", "base": {"ray": {}, "cleanrl": {}}, "seeds": 1,
                       "axes": {"worker": ["ray", "cleanrl"]}, "settings": {"gae_lambda": 0.9},
                       "translate": {"gae_lambda": {"ray": "algo_params.lambda_", "cleanrl": None}}})
    with pytest.raises(UserError, match=r"cell c001 \(worker=cleanrl\): gae_lambda: worker 'cleanrl' has no"):
        spec.cells()


def _journal(tmp_path, lines, retries=2):
    from mosaic.experiments.plan import make_plan

    plan = make_plan(parse_spec({**_spec(), "retries": retries, "seeds": 1}), validate=False)
    exp = ExperimentStore(tmp_path).create(plan, {})
    for line in lines:
        exp.log(line.pop("event"), **line)
    return exp


def test_cell_states_follow_the_journal_and_the_retry_limit(tmp_path):
    run = "t-c000-a{}".format
    exp = _journal(tmp_path / "a", [{"event": "submitted", "cell": "c000", "run_id": run(1), "attempt": 1}])
    assert cell_states(exp, exp.cells()) == {"c000": "queued"}
    exp.log("running", cell="c000", run_id=run(1), state="running")
    assert cell_states(exp, exp.cells()) == {"c000": "running"}
    exp.log("ended", cell="c000", run_id=run(1), state="failed", cause="boom")
    assert cell_states(exp, exp.cells()) == {"c000": "pending"}  # one retry used of two
    for n in (2, 3):
        exp.log("submitted", cell="c000", run_id=run(n), attempt=n)
        exp.log("ended", cell="c000", run_id=run(n), state="failed", cause=f"boom {n}")
    cells = exp.cells()
    assert cell_states(exp, cells) == {"c000": "failed"}
    assert [a.cause for a in cells["c000"].attempts] == ["boom", "boom 2", "boom 3"]
    # an experiment cancel uses no retry, and a resume brings the cell back
    exp = _journal(tmp_path / "b", [{"event": "submitted", "cell": "c000", "run_id": run(1), "attempt": 1},
                                    {"event": "ended", "cell": "c000", "run_id": run(1), "state": "cancelled",
                                     "cause": "experiment cancelled"}], retries=0)
    assert cell_states(exp, exp.cells()) == {"c000": "cancelled"}
    assert cell_states(exp, exp.cells(), revive_cancelled=True) == {"c000": "pending"}
    # a torn last line (a crash mid-write) is skipped
    with exp.journal_path.open("a") as fh:
        fh.write('{"event": "submitted", "cell": "c0')
    assert cell_states(exp, exp.cells()) == {"c000": "cancelled"}


def test_status_with_no_backend_reads_how_runs_ended_from_their_folders(tmp_path):
    """A daemon stopped after ``experiment cancel`` leaves its runs ended (their folders say cancelled) while the
    journal still says running, since the coordinator journals how a run ended when it next asks. With no backend
    to ask, ``experiment status`` reads the run folders: a run that ended is shown and journaled so, with its cause;
    one whose folder does not say it ended stays as the journal has it."""
    from mosaic.experiments.plan import make_plan
    from mosaic.runs import RunStore

    home = tmp_path / "home"
    exp = ExperimentStore(home).create(make_plan(parse_spec({**_spec(), "seeds": 2}), validate=False), {})
    store = RunStore(home)
    for cell, status in (("c000", "cancelled"), ("c001", "running")):
        run_id = f"t-{cell}-a1"
        exp.log("submitted", cell=cell, run_id=run_id, attempt=1)
        exp.log("running", cell=cell, run_id=run_id, state="running")
        run = store.create(run_id, {"worker": "random"}, {"worker": "random", "status": status})
        if status == "cancelled":
            with run.telemetry_path.open("a") as fh:
                fh.write(json.dumps({"type": "run_cancelled", "reason": "experiment cancelled"},
                                    separators=(",", ":")) + "\n")
    assert cell_states(exp, exp.cells()) == {"c000": "running", "c001": "running"}
    status = _status(home, "t")
    assert [(c["cell"], c["state"]) for c in status["cells"]] == [("c000", "cancelled"), ("c001", "running")]
    (ended,) = _ended(home, "t", "cancelled")
    assert ended["run_id"] == "t-c000-a1" and ended["cause"] == "experiment cancelled", ended
    assert cell_states(exp, exp.cells()) == {"c000": "cancelled", "c001": "running"}
    # a worker that ended itself on the cancel's SIGTERM says so in its folder; the experiment's cancel (journaled)
    # is what stopped it, so the cell counts as cancelled by the experiment (no retry used), as the daemon would say
    exp.log("cancel")
    run = store.create("t-c001-a2", {"worker": "random"}, {"worker": "random", "status": "cancelled"})
    exp.log("submitted", cell="c001", run_id="t-c001-a2", attempt=2)
    with run.telemetry_path.open("a") as fh:
        fh.write(json.dumps({"type": "run_cancelled", "reason": "received SIGTERM"}, separators=(",", ":")) + "\n")
    status = _status(home, "t")
    row = next(c for c in status["cells"] if c["cell"] == "c001")
    ended = next(e for e in _journal_of(home, "t") if e["event"] == "ended" and e["run_id"] == "t-c001-a2")
    assert ended["cause"] == "experiment cancelled (received SIGTERM)" and row["state"] == "cancelled", (ended, row)


def test_a_new_experiment_is_refused_where_an_earlier_ones_runs_are_left(tmp_path):
    """An experiment folder deleted by hand leaves its runs (``NAME-CELL-aN``) in the run store; a new experiment of
    that name would take them for its own cells (a resume's rule), so it is refused, naming them."""
    from mosaic.experiments.plan import make_plan
    from mosaic.runs import RunStore

    home = tmp_path / "home"
    RunStore(home).create("t-c000-a1", {"worker": "random"}, {"worker": "random", "status": "cancelled"})
    RunStore(home).create("t-other-run", {"worker": "random"}, {"worker": "random", "status": "completed"})
    plan = make_plan(parse_spec(_spec()), validate=False)
    with pytest.raises(UserError, match=r"^name: runs of an earlier experiment named 't' are still in the run "
                                        r"store \(t-c000-a1\).*allowed: another name \(--name\)"):
        ExperimentStore(home).create(plan, {})
    assert not (home / "experiments" / "t").exists()
    ExperimentStore(home).create(make_plan(parse_spec(_spec(name="u")), validate=False), {})  # another name: fine


def test_the_cli_refuses_a_bad_spec_with_exit_2(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text("name: x\nbase: {random: {}}\naxes: {seed: [1, 2]}\n")
    proc = run_cli("experiment", "plan", str(spec), home=tmp_path / "home")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("mosaic: error: axes.seed: not an axis"), proc.stderr
    assert "Traceback" not in proc.stderr
    missing = run_cli("experiment", "status", "nope", home=tmp_path / "home")
    assert missing.returncode == 2 and "no experiment named 'nope'" in missing.stderr


# -- real grids ----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def exp_home(tmp_path_factory):
    """A home with CleanRL's and Tianshou's environments; whatever daemon an experiment starts is stopped."""
    from mosaic.host.daemon.endpoint import find_daemon
    from mosaic.testing import worker_env_for_tests

    home = tmp_path_factory.mktemp("experiments") / "home"
    (home / "envs").mkdir(parents=True)
    for worker in ("cleanrl", "tianshou"):
        env = worker_env_for_tests(worker, REPO, lambda w=worker: tmp_path_factory.mktemp(f"{w}-env"))
        (home / "envs" / worker).symlink_to(env, target_is_directory=True)
    yield home
    endpoint = find_daemon(home)
    if endpoint is not None:
        os.kill(endpoint.pid, signal.SIGTERM)
        wait_until(lambda: find_daemon(home) is None, 60, "the experiments' daemon to stop")


def test_a_daemon_still_starting_is_not_taken_for_the_one_it_replaces(tmp_path):
    """The lock is held (a daemon is starting) while ``daemon.json`` still names the old one: the backend must
    not connect to the old address. It waits for an endpoint of the daemon it started; here that daemon
    refuses (the lock is taken), so the backend says so; and a call after a failed reconnect says the
    backend is unavailable instead of failing on a missing client."""
    import fcntl

    from mosaic.experiments.backends import BackendUnavailable
    from mosaic.experiments.backends.local import LocalDaemon
    from mosaic.host.daemon.endpoint import Endpoint, write_endpoint_file

    state = tmp_path / "home" / "trainer" / "daemon"
    state.mkdir(parents=True)
    write_endpoint_file(state / "daemon.json", Endpoint("127.0.0.1", 9, 999_999, False, str(tmp_path / "home")))
    fd = os.open(state / "daemon.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.write(fd, f"{os.getpid()}\n".encode())  # as a daemon does once it holds the lock
    try:
        with pytest.raises(BackendUnavailable, match="another daemon already serves"):
            LocalDaemon(tmp_path / "home", start_timeout_s=60)
        backend = LocalDaemon.__new__(LocalDaemon)
        backend.home, backend.start, backend.client = tmp_path / "home", False, None
        with pytest.raises(BackendUnavailable):
            backend.status(["some-run"])
    finally:
        os.close(fd)


def _write(path: Path, spec: dict) -> Path:
    path.write_text(json.dumps(spec))
    return path


def _random_spec(name: str, cells: int, delay: float = 0.03, steps: int = 100, retries: int = 2) -> dict:
    return {"name": name, "retries": retries, "seeds": cells,
            "base": {"random": {"environment": {"family": "classic", "env_id": "tictactoe_v3"},
                                "total_timesteps": steps, "step_delay_s": delay,
                                "reporting": {"every_timesteps": 20}}}}


def _start(home: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mosaic", "experiment", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "MOSAIC_HOME": str(home)})


def _journal_of(home: Path, name: str) -> list[dict]:
    path = home / "experiments" / name / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _ended(home: Path, name: str, state: str) -> list[dict]:
    return [e for e in _journal_of(home, name) if e["event"] == "ended" and e.get("state") == state]


def _status(home: Path, name: str) -> dict:
    proc = run_cli("experiment", "status", name, "--json", home=home)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _episode_returns(run_dir: Path) -> list[float]:
    events = [json.loads(line) for line in (run_dir / "telemetry.jsonl").read_text().splitlines()]
    return [round(sum(e["returns"].values()), 9) for e in events if e["type"] == "episode"]


def test_a_bad_cell_is_refused_before_anything_runs(exp_home, tmp_path):
    spec = _write(tmp_path / "bad.json", {
        "name": "refused", "seeds": 2, "axes": {"worker": ["tianshou", "cleanrl"]},
        "base": {"tianshou": {"algorithm": "dqn", "total_timesteps": 1000, "learning_starts": 100},
                 "cleanrl": {"algorithm": "dqn", "total_timesteps": 1000, "algo_params": {"no_such_knob": 1}}}})
    proc = run_cli("experiment", "run", str(spec), home=exp_home, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "2 of 4 cells refused; nothing was run" in proc.stderr
    assert "cell c002 (worker=cleanrl, env default, seed 0): algo_params" in proc.stderr
    assert "no_such_knob" in proc.stderr and "c000" not in proc.stderr
    assert not (exp_home / "experiments" / "refused").exists()
    assert not (exp_home / "trainer" / "runs").exists() or not any((exp_home / "trainer" / "runs").iterdir())


def test_every_cell_of_an_unknown_worker_is_refused_and_counted(home, tmp_path):
    """The plan counted and named only the first cell of a worker it could not find."""
    spec = _write(tmp_path / "unknown.json", {"name": "unknown-worker", "seeds": 2,
                                              "axes": {"worker": ["random", "nosuch"]},
                                              "settings": {"total_timesteps": 100}})
    proc = run_cli("experiment", "plan", str(spec), home=home, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "2 of 4 cells refused; nothing was run" in proc.stderr
    for cell in ("c002", "c003"):
        assert f"cell {cell} (worker=nosuch" in proc.stderr and "worker: 'nosuch' is not one of" in proc.stderr
    assert "c000" not in proc.stderr and "c001" not in proc.stderr


def test_two_cells_that_are_the_same_run_are_refused(home, tmp_path):
    """A value listed twice, or in two spellings its worker normalises to one, made the same run two cells (two
    samples of one run in the report)."""
    for name, axes in (("twice", {"worker": ["random", "random"]}), ("spellings", {"algorithm": ["random", "RANDOM"]})):
        spec = _write(tmp_path / f"{name}.json", {"name": name, "seeds": 1, "axes": {"worker": ["random"], **axes},
                                                  "settings": {"total_timesteps": 100}})
        proc = run_cli("experiment", "plan", str(spec), home=home, timeout=300)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("mosaic: error: axes: cell c000 (") and "and cell c001 (" in line, line
        assert line.endswith("are the same run: a value is listed twice (or in two spellings of it); allowed: "
                             "distinct values"), line


def test_a_grid_of_two_workers_gives_the_episodes_mosaic_run_gives(exp_home, tmp_path):
    """CleanRL's DQN and Tianshou's DQN, two seeds each, through the daemon; then each cell alone."""
    spec = _write(tmp_path / "two.json", {
        "name": "two-workers", "seeds": [3, 4], "axes": {"worker": ["cleanrl", "tianshou"]},
        "settings": {"total_timesteps": 1200},
        "base": {"cleanrl": {"algorithm": "dqn", "environment": {"family": "gymnasium", "env_id": "CartPole-v1"},
                             "resources": {"threads": 1}, "algo_params": {"learning_starts": 400},
                             "checkpoint": {"every_timesteps": 0}},
                 "tianshou": {"algorithm": "dqn", "environment": {"family": "gymnasium", "env_id": "CartPole-v1"},
                              "num_envs": 2, "learning_starts": 200, "test_every_timesteps": 0,
                              "reporting": {"every_timesteps": 400}, "checkpoint": {"every_timesteps": 0}}}})
    proc = run_cli("experiment", "run", str(spec), home=exp_home, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "started one for MOSAIC_HOME" in proc.stderr  # no daemon was running: it says it started one
    status = _status(exp_home, "two-workers")
    assert [c["state"] for c in status["cells"]] == ["completed"] * 4
    assert [c["attempts"] for c in status["cells"]] == [1] * 4
    plan = json.loads((exp_home / "experiments" / "two-workers" / "plan.json").read_text())
    for cell, row in zip(plan["cells"], status["cells"]):
        via_experiment = _episode_returns(exp_home / "trainer" / "runs" / row["run_id"])
        alone = _write(tmp_path / f"{cell['cell_id']}.json", {**cell["config"], "run_id": f"alone-{cell['cell_id']}"})
        direct = run_cli("run", str(alone), home=exp_home, timeout=300)
        assert direct.returncode == 0, direct.stderr[-2000:]
        assert len(via_experiment) > 3
        assert via_experiment == _episode_returns(exp_home / "trainer" / "runs" / f"alone-{cell['cell_id']}"), cell
    # running the same spec again repeats nothing
    again = run_cli("experiment", "run", str(spec), home=exp_home, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "resuming it" in again.stderr
    assert len([e for e in _journal_of(exp_home, "two-workers") if e["event"] == "submitted"]) == 4
    # the report reads the cells' runs: every cell scored, the same final scores the runs' curves give
    report = run_cli("experiment", "report", "two-workers", home=exp_home, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    folder = exp_home / "experiments" / "two-workers" / "report"
    assert Path(report.stdout.strip()) == folder / "report.md"
    import csv

    from mosaic.experiments.results import run_result

    rows = list(csv.DictReader((folder / "scores.csv").open()))
    assert [r["cell_id"] for r in rows] == ["c000", "c001", "c002", "c003"]
    for row in rows:
        expected = run_result(exp_home / "trainer" / "runs" / row["run_id"]).final_score
        assert row["status"] == "completed" and float(row["final_score"]) == pytest.approx(expected), row
    text = (folder / "report.md").read_text()
    assert "worker=cleanrl" in text and "worker=tianshou" in text and "do not support" in text
    assert all((folder / f).stat().st_size > 1000 for f in ("sample_efficiency.png", "aggregates.png"))


def test_a_killed_coordinator_is_resumed_without_repeating_a_finished_cell(exp_home, tmp_path):
    spec = _write(tmp_path / "k.json", _random_spec("killed", cells=6))
    coordinator = _start(exp_home, "run", str(spec))
    wait_until(lambda: _ended(exp_home, "killed", "completed"), 120, "a first cell to complete", proc=coordinator)
    coordinator.kill()
    coordinator.wait(10)
    finished_before = {e["cell"]: e["run_id"] for e in _ended(exp_home, "killed", "completed")}
    assert len(finished_before) < 6, "the grid finished before the coordinator could be killed"
    proc = run_cli("experiment", "resume", "killed", home=exp_home, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = _status(exp_home, "killed")
    assert [c["state"] for c in status["cells"]] == ["completed"] * 6
    for row in status["cells"]:
        assert row["attempts"] == 1, row  # nothing ran twice: runs in flight were taken up where they were
        if row["cell"] in finished_before:
            assert row["run_id"] == finished_before[row["cell"]]
    runs = sorted(p.name for p in (exp_home / "trainer" / "runs").iterdir() if p.name.startswith("killed-"))
    assert runs == [f"killed-c{i:03d}-a1" for i in range(6)]


def test_cancel_without_a_coordinator_stops_the_runs_in_flight_itself(exp_home, tmp_path):
    """The coordinator was killed: its runs go on in the daemon, and `cancel` asks each of them to stop, once."""
    doc = _random_spec("orphaned", cells=2, delay=0.4, steps=1000, retries=0)  # runs the cancel finds running
    coordinator = _start(exp_home, "run", str(_write(tmp_path / "o.json", doc)))
    wait_until(lambda: sum(e["event"] == "running" for e in _journal_of(exp_home, "orphaned")) == 2, 120,
               "both cells to run", proc=coordinator)
    coordinator.kill()
    coordinator.communicate(timeout=60)
    proc = run_cli("experiment", "cancel", "orphaned", home=exp_home, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "2 run(s) in flight asked to stop" in proc.stderr, proc.stderr
    states = wait_until(lambda: (s := [c["state"] for c in _status(exp_home, "orphaned")["cells"]])
                        and "running" not in s and "queued" not in s and s, 60, "the cancelled runs to end")
    assert states == ["cancelled"] * 2, states
    for row in _status(exp_home, "orphaned")["cells"]:
        last = json.loads((exp_home / "trainer" / "runs" / row["run_id"] / "telemetry.jsonl").read_text()
                          .splitlines()[-1])
        assert last["type"] == "run_cancelled" and "SIGKILL" not in last["reason"], (row, last)


def test_a_crashed_worker_is_retried_and_its_cause_kept(exp_home, tmp_path):
    from mosaic.host.daemon.client import DaemonClient, state_name

    spec = _write(tmp_path / "c.json", _random_spec("crash", cells=2, delay=0.05))
    coordinator = _start(exp_home, "run", str(spec))
    client = wait_until(lambda: DaemonClient.for_home(exp_home), 60, "the daemon", proc=coordinator)
    try:
        info = wait_until(lambda: (i := _get(client, "crash-c000-a1")) and state_name(i.state) == "RUNNING"
                          and i.pid and i, 120, "cell c000 to run", proc=coordinator)
        os.kill(info.pid, signal.SIGKILL)  # the worker dies as an out-of-memory kill would end it
    finally:
        client.close()
    out, err = coordinator.communicate(timeout=300)
    assert coordinator.returncode == 0, err[-3000:]
    assert "c000: attempt 1 failed" in err and "c000: retrying (attempt 2" in err, err
    row = _status(exp_home, "crash")["cells"][0]
    assert row["state"] == "completed" and row["attempts"] == 2 and row["run_id"] == "crash-c000-a2"
    assert row["causes"] and "SIGKILL" in row["causes"][0], row


def test_a_crashed_cell_continues_from_its_checkpoint_with_retry_from_checkpoint(exp_home, tmp_path):
    """``retry_from: checkpoint``: the worker dies after a checkpoint; the retry restores it (counters go on from
    there), the journal says from which, and the report joins the two runs' curves at the checkpoint and says so."""
    from mosaic.experiments.results import run_result
    from mosaic.host.daemon.client import DaemonClient, state_name
    from mosaic.runs import RunStore

    spec = _random_spec("continued", cells=1, delay=0.02, steps=400)  # 8 s in all; the kill comes at 100 steps
    spec["retry_from"] = "checkpoint"
    spec["base"]["random"]["checkpoint"] = {"every_timesteps": 100}
    coordinator = _start(exp_home, "run", str(_write(tmp_path / "k.json", spec)))
    store = RunStore(exp_home)
    client = wait_until(lambda: DaemonClient.for_home(exp_home), 60, "the daemon", proc=coordinator)
    try:
        info = wait_until(lambda: (i := _get(client, "continued-c000-a1")) and state_name(i.state) == "RUNNING"
                          and i.pid and i, 120, "cell c000 to run", proc=coordinator)
        saved = wait_until(lambda: store.exists("continued-c000-a1") and
                           store.get("continued-c000-a1").read_manifest().get("checkpoints"), 120,
                           "a checkpoint of c000", proc=coordinator)
        os.kill(info.pid, signal.SIGKILL)
    finally:
        client.close()
    out, err = coordinator.communicate(timeout=300)
    assert coordinator.returncode == 0, err[-3000:]
    (submitted,) = [e for e in _journal_of(exp_home, "continued") if e["event"] == "submitted" and e["attempt"] == 2]
    checkpoints = {c["path"]: c["timesteps_total"] for c in
                   store.get("continued-c000-a1").read_manifest()["checkpoints"]}
    restored = submitted["restored_from"]
    assert restored in checkpoints and checkpoints[restored] >= saved[0]["timesteps_total"], (restored, checkpoints)
    assert f"c000: retrying (attempt 2, 1 of 2 retries used, from {restored})" in err, err
    second = store.get("continued-c000-a2")
    (started,) = [e for e in second.iter_events() if e["type"] == "run_started"]
    assert started["restored_from"] == restored
    metrics = [e for e in second.iter_events() if e["type"] == "metrics"]
    assert metrics[0]["timesteps_total"] > checkpoints[restored] and metrics[-1]["timesteps_total"] == 400

    report = run_cli("experiment", "report", "continued", home=exp_home, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    text = (exp_home / "experiments" / "continued" / "report" / "report.md").read_text()
    assert (f"Continued from a checkpoint after an interruption: c000 (from continued-c000-a1 at "
            f"{checkpoints[restored]} env steps)") in text
    joined = run_result(second.root, before=((store.path_for("continued-c000-a1"), float(checkpoints[restored])),))
    first = run_result(store.path_for("continued-c000-a1"))
    alone = run_result(second.root)
    assert joined.xs[0] == first.xs[0] and joined.xs[-1] == alone.xs[-1] and list(joined.xs) == sorted(set(joined.xs))
    assert joined.xs[-len(alone.xs):] == alone.xs and len(joined.xs) > len(alone.xs)
    cut = checkpoints[restored]
    assert max(x for x in joined.xs if x <= cut) <= cut < metrics[0]["timesteps_total"]
    rows = list(csv.DictReader((exp_home / "experiments" / "continued" / "report" / "scores.csv").open()))
    assert float(rows[0]["final_score"]) == pytest.approx(joined.final_score)


def test_continue_from_runs_an_experiments_cells_on_to_a_larger_budget(exp_home, tmp_path):
    """``continue_from``: each cell restores the earlier experiment's run of the same configuration, env and seed
    (its newest checkpoint) and trains on to the new budget; the report joins each curve to the earlier run's and
    says so. A cell with no counterpart, or an unknown experiment, is refused before anything runs."""
    from mosaic.experiments.results import run_result
    from mosaic.runs import RunStore

    short = _random_spec("short", cells=2, steps=100, delay=0.0)  # nothing here is interrupted: no need to slow it
    assert run_cli("experiment", "run", str(_write(tmp_path / "s.json", short)), home=exp_home,
                   timeout=300).returncode == 0
    longer = {**_random_spec("longer", cells=2, steps=200, delay=0.0), "continue_from": "short"}
    for bad, words in (({**longer, "seeds": 3}, "cell c002 (default, env tictactoe_v3, seed 2): experiment 'short' has "
                                                "no cell of worker random"),
                       ({**longer, "continue_from": "nope"}, "continue_from: no experiment named 'nope'"),
                       (_random_spec("longer", cells=2, steps=100, delay=0.0) | {"continue_from": "short"},
                        "cell c000 (default, env tictactoe_v3, seed 0): a budget of 100 env steps is not above the 100 "
                        "that cell c000 of 'short' trained; allowed: a larger budget")):
        proc = run_cli("experiment", "plan", str(_write(tmp_path / "bad.json", bad)), home=exp_home)
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    proc = run_cli("experiment", "run", str(_write(tmp_path / "l.json", longer)), home=exp_home, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    store = RunStore(exp_home)
    for cell in ("c000", "c001"):
        earlier, run = store.get(f"short-{cell}-a1"), store.get(f"longer-{cell}-a1")
        (checkpoint,) = earlier.read_manifest()["checkpoints"]
        (started,) = [e for e in run.iter_events() if e["type"] == "run_started"]
        assert started["restored_from"] == checkpoint["path"] and checkpoint["timesteps_total"] == 100
        metrics = [e for e in run.iter_events() if e["type"] == "metrics"]
        assert metrics[0]["timesteps_total"] > 100 and metrics[-1]["timesteps_total"] == 200
        (submitted,) = [e for e in _journal_of(exp_home, "longer") if e["event"] == "submitted" and e["cell"] == cell]
        assert submitted["restored_from"] == checkpoint["path"]
    report = run_cli("experiment", "report", "longer", home=exp_home, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    text = (exp_home / "experiments" / "longer" / "report" / "report.md").read_text()
    assert ("Continued from a checkpoint after an interruption, or of experiment short's run (continue_from): "
            "c000 (from short-c000-a1 at 100 env steps); c001 (from short-c001-a1 at 100 env steps)") in text
    joined = run_result(store.path_for("longer-c000-a1"), before=((store.path_for("short-c000-a1"), 100.0),))
    alone = run_result(store.path_for("longer-c000-a1"))
    assert joined.xs[0] == run_result(store.path_for("short-c000-a1")).xs[0] < alone.xs[0]
    assert joined.xs[-len(alone.xs):] == alone.xs and joined.xs[-1] > 100

    # one report over both experiments (--with): their cells side by side, each scored as in its own report
    report = run_cli("experiment", "report", "longer", "--with", "short", home=exp_home, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    folder = exp_home / "experiments" / "longer" / "report-with-short"
    assert report.stdout.strip() == str(folder / "report.md")
    rows = {r["cell_id"]: r for r in csv.DictReader((folder / "scores.csv").open())}
    assert set(rows) == {"longer/c000", "longer/c001", "short/c000", "short/c001"}
    assert {rows[c]["configuration"] for c in rows} == {"experiment=longer", "experiment=short"}  # both "default"
    for name in ("longer", "short"):
        if name == "short":
            assert run_cli("experiment", "report", name, home=exp_home, timeout=300).returncode == 0
        alone = {r["cell_id"]: r for r in csv.DictReader((exp_home / "experiments" / name / "report" / "scores.csv")
                                                      .open())}
        for cell, row in alone.items():
            assert rows[f"{name}/{cell}"]["final_score"] == row["final_score"], (name, cell)
    text = (folder / "report.md").read_text()
    assert ("A joint report of 2 experiments: longer (2 cells), short (2 cells)" in text
            and "Experiment short's spec" in text and "longer/c000 (from short-c000-a1 at 100 env steps)" in text)
    shutil.copytree(exp_home / "experiments" / "short", exp_home / "experiments" / "short-lower")
    spec_path = exp_home / "experiments" / "short-lower" / "spec.json"
    spec_path.write_text(json.dumps({**json.loads(spec_path.read_text()), "score": {"higher_is_better": False}}))
    for others, words in ((["short-lower"], "score.higher_is_better: experiment 'short-lower' has False and "
                                            "'longer' has True; allowed: one value"),
                          (["short", "longer"], "--with: experiment 'longer' is named twice")):
        proc = run_cli("experiment", "report", "longer", *[a for o in others for a in ("--with", o)], home=exp_home)
        assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_measured_random_score_normalises_the_report(exp_home, tmp_path):
    """``normalise: {ENV: {random: measure}}``: the experiment also runs the random reference worker on the env,
    once per seed; the report's random score is the mean of those runs' scores, and the normalised numbers
    use it (checked here against the scores the report wrote per cell)."""
    from mosaic.experiments.report import fmt

    env = {"family": "mpe", "env_id": "simple_spread_v3", "env_kwargs": {"N": 3, "max_cycles": 25}}
    spec = {"name": "measured", "seeds": 2, "base": {"random": {"environment": env, "total_timesteps": 200,
                                                                "reporting": {"every_timesteps": 20}}},
            "normalise": {"simple_spread_v3": {"random": "measure", "reference": 0.0, "measure_timesteps": 400}}}
    proc = run_cli("experiment", "run", str(_write(tmp_path / "m.json", spec)), home=exp_home, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    folder = exp_home / "experiments" / "measured"
    plan = json.loads((folder / "plan.json").read_text())
    assert [(c["cell_id"], c["worker"], c["configuration"], c["config"]["total_timesteps"]) for c in plan["cells"]
            if c.get("baseline")] == [("c002", "random", "random play", 400), ("c003", "random", "random play", 400)]
    report = run_cli("experiment", "report", "measured", home=exp_home, timeout=300)
    assert report.returncode == 0, report.stderr[-3000:]
    rows = {r["cell_id"]: r for r in csv.DictReader((folder / "report" / "scores.csv").open())}
    assert [rows[c]["configuration"] for c in ("c000", "c001", "c002", "c003")] == ["default"] * 2 + ["random play"] * 2
    random_score = (float(rows["c002"]["final_score"]) + float(rows["c003"]["final_score"])) / 2
    assert random_score < 0  # simple_spread's returns are distances and collisions: negative
    text = (folder / "report" / "report.md").read_text()
    assert (f"simple_spread_v3: random {fmt(random_score)} (measured: the mean score of 2 random-play runs), "
            "reference 0") in text
    assert "Measured random scores (simple_spread_v3: " in text
    aggregate = text.split("## Aggregate across envs")[1].split("\n## ")[0]
    means = {line.split("|")[1].strip(): float(line.split("|")[3].split("[")[0]) for line in aggregate.splitlines()
             if line.startswith("| default |") or line.startswith("| random play |")}
    expected = sum((float(rows[c]["final_score"]) - random_score) / (0.0 - random_score) for c in ("c000", "c001")) / 2
    assert means["default"] == pytest.approx(expected, abs=1e-3, rel=1e-3), (means, expected)
    assert means["random play"] == pytest.approx(0.0, abs=1e-3)  # its own mean, normalised


def test_a_run_the_daemon_lists_but_whose_folder_is_gone_is_not_taken_for_a_cell(exp_home, tmp_path):
    """An experiment and its run folders deleted by hand, the daemon still listing the runs: the same spec again
    does not take the old run for its cell (a resume's rule); that attempt is refused naming why, the next runs."""
    spec = _write(tmp_path / "g.json", _random_spec("gone", cells=1, delay=0.0))  # not interrupted: not slowed
    first = run_cli("experiment", "run", str(spec), home=exp_home, timeout=300)
    assert first.returncode == 0, first.stderr[-3000:]
    shutil.rmtree(exp_home / "experiments" / "gone")
    shutil.rmtree(exp_home / "trainer" / "runs" / "gone-c000-a1")
    again = run_cli("experiment", "run", str(spec), home=exp_home, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    row = _status(exp_home, "gone")["cells"][0]
    assert row["state"] == "completed" and row["run_id"] == "gone-c000-a2", row
    assert "whose folder is gone" in row["causes"][0], row


def _get(client, run_id):
    from mosaic.host.daemon.client import DaemonError

    try:
        return client.get(run_id)
    except DaemonError:
        return None


def test_a_killed_daemon_mid_grid_is_replaced_and_the_grid_finishes(exp_home, tmp_path):
    from mosaic.host.daemon.endpoint import find_daemon

    spec = _write(tmp_path / "d.json", _random_spec("daemon-killed", cells=4))
    coordinator = _start(exp_home, "run", str(spec))
    wait_until(lambda: any(e["event"] == "running" for e in _journal_of(exp_home, "daemon-killed")), 120,
               "a cell to run", proc=coordinator)
    first = find_daemon(exp_home)
    os.kill(first.pid, signal.SIGKILL)
    out, err = coordinator.communicate(timeout=300)
    assert coordinator.returncode == 0, err[-3000:]
    assert "backend unreachable" in err and "started one" in err, err
    assert find_daemon(exp_home).pid != first.pid
    status = _status(exp_home, "daemon-killed")
    assert [c["state"] for c in status["cells"]] == ["completed"] * 4
    # the new daemon took up the runs the old one left: no cell ran twice
    assert [c["attempts"] for c in status["cells"]] == [1] * 4


def test_cancel_stops_the_grid_and_resume_finishes_it(exp_home, tmp_path):
    """The cancel is asked of each run once, so each worker ends itself gracefully: a second cancel of the same
    run means "stop waiting" to the daemon (SIGKILL). Steps of 0.4 s: a worker takes longer to reach its safe
    point than the coordinator takes to see the cancel, as a training run would."""
    doc = _random_spec("cancelled", cells=4, delay=0.4, steps=10, retries=0)
    doc["base"]["random"]["reporting"] = {"every_timesteps": 5}
    spec = _write(tmp_path / "x.json", doc)
    coordinator = _start(exp_home, "run", str(spec))
    wait_until(lambda: any(e["event"] == "running" for e in _journal_of(exp_home, "cancelled")), 120,
               "a cell to run", proc=coordinator)
    proc = run_cli("experiment", "cancel", "cancelled", home=exp_home, timeout=120)
    assert proc.returncode == 0, proc.stderr
    coordinator.communicate(timeout=120)
    assert coordinator.returncode == 3
    states = wait_until(lambda: (s := [c["state"] for c in _status(exp_home, "cancelled")["cells"]])
                        and "running" not in s and "queued" not in s and s, 60, "the cancelled runs to end")
    assert "cancelled" in states, states
    for ended in _ended(exp_home, "cancelled", "cancelled"):
        events = (exp_home / "trainer" / "runs" / ended["run_id"] / "telemetry.jsonl").read_text().splitlines()
        last = json.loads(events[-1])
        assert last["type"] == "run_cancelled" and "SIGKILL" not in last["reason"], (ended, last)
    resumed = run_cli("experiment", "resume", "cancelled", "--retry-from", "checkpoint", home=exp_home, timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    plan = json.loads((exp_home / "experiments" / "cancelled" / "plan.json").read_text())
    assert plan["retry_from"] == "checkpoint"  # kept for later resumes; these cells saved no checkpoint
    status = _status(exp_home, "cancelled")
    assert [c["state"] for c in status["cells"]] == ["completed"] * 4  # retries 0: a cancel used none


def test_a_score_metric_no_worker_is_sure_to_log_is_warned_of_at_plan(home, tmp_path):
    """A typo in score.metric showed only in the report, after every cell ran (each cell 'logged no ...'): the plan
    warns, naming the metrics every training worker logs; a worker's own metric is legal, so it is not refused."""
    base = {"name": "metric", "seeds": 1, "axes": {"worker": ["random"]}, "settings": {"total_timesteps": 100}}
    typo = run_cli("experiment", "plan", str(_write(tmp_path / "typo.json", {
        **base, "score": {"metric": "episode_reward_mean"}})), home=home, timeout=300)
    assert typo.returncode == 0, typo.stderr
    (line,) = [l for l in typo.stderr.splitlines() if l.startswith("warning: ")]
    assert line == ("warning: score.metric: 'episode_reward_mean' is not one of the metrics every training worker "
                    "logs (episode_return_mean, episode_return_min, episode_return_max, episode_len_mean, "
                    "env_steps_per_s); did you mean 'episode_return_mean'?: a cell whose runs never log it is left "
                    "out of the report"), line
    fine = run_cli("experiment", "plan", str(_write(tmp_path / "fine.json", base)), home=home, timeout=300)
    assert fine.returncode == 0 and "warning" not in fine.stderr, fine.stderr
