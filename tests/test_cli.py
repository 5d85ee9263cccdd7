"""The `mosaic` command line end to end, with real worker subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import psutil
import pytest

from cli_support import EXAMPLES, run_cli, write_config
from mosaic.workerkit.telemetry_schema import TELEMETRY_SCHEMA
from mosaic.testing import check_pause_resume
from mosaic.testing.learning import check, claim, learning, measuring, seed

VALIDATOR = jsonschema.Draft202012Validator(TELEMETRY_SCHEMA)


def runs_in(home: Path) -> list[Path]:
    runs = home / "trainer" / "runs"
    # Skip a run still being staged (".<id>.<random>", renamed into place when complete).
    return sorted(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith(".")) if runs.exists() else []


def test_run_example_shows_progress_and_leaves_a_valid_run_folder(home):
    proc = run_cli("run", str(EXAMPLES / "random_connect_four.json"), home=home)
    assert proc.returncode == 0, proc.stderr
    assert "completed" in proc.stdout
    assert "%" in proc.stderr and "steps/s" in proc.stderr  # the progress lines
    (run,) = runs_in(home)
    events = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
    for event in events:
        VALIDATOR.validate(event)
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs))
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_completed"
    assert sum(e["type"] == "metrics" for e in events) >= 6
    config = json.loads((run / "config.json").read_text())
    assert config["worker"] == "random" and config["seed"] == 7 and config["run_id"] == run.name
    manifest = json.loads((run / "analytics.json").read_text())
    assert manifest["status"] == "completed" and manifest["seed"] == 7
    assert manifest["env"]["env_id"] == "connect_four_v3"
    assert {"python", "pettingzoo", "numpy"} <= set(manifest["versions"])
    assert manifest["exit_code"] == 0
    # runs / show / logs read it back
    listing = run_cli("runs", home=home)
    assert run.name in listing.stdout and "completed" in listing.stdout
    shown = json.loads(run_cli("show", run.name[:15], "--json", home=home).stdout)
    assert shown["manifest"]["run_id"] == run.name and shown["config"] == config
    logs = run_cli("logs", "latest", "--raw", home=home)
    assert logs.stdout.splitlines() == (run / "telemetry.jsonl").read_text().splitlines()
    # where to look next: not `mosaic eval`, which the random worker cannot do (it trains no policies)
    assert "where to look next:" in proc.stderr and f"mosaic show {run.name}" in proc.stderr
    assert "mosaic eval" not in proc.stderr


def test_latest_and_the_newest_runs_follow_creation_time_not_run_ids(home):
    """A run named with --run-id sorts by when it was made, not by its name: `latest` and `runs --limit`
    name the newest run. `--worker NAME` with no config runs that worker's own default config."""
    tiny = ["--worker", "random", "--set", "total_timesteps=20"]
    named = run_cli("run", *tiny, "--run-id", "zz-named", home=home)
    assert named.returncode == 0, named.stderr
    later = run_cli("run", *tiny, home=home)
    assert later.returncode == 0, later.stderr
    (newest,) = [p.name for p in runs_in(home) if p.name != "zz-named"]
    assert newest < "zz-named"  # by name it would come first
    config = json.loads((home / "trainer" / "runs" / newest / "config.json").read_text())
    assert config["worker"] == "random" and config["environment"]["env_id"] == "connect_four_v3"
    shown = json.loads(run_cli("show", "latest", "--json", home=home).stdout)
    assert shown["manifest"]["run_id"] == newest
    listing = run_cli("runs", "--limit", "1", home=home).stdout
    assert newest in listing and "zz-named" not in listing
    # 'latest' names the newest run, so no run may take it as its id; a negative count is refused
    for args, line in (
            (["run", *tiny, "--run-id", "latest"], "mosaic: error: run_id: 'latest' is reserved: it names the newest "
             "run wherever a run id goes (allowed: any other id of letters, digits, '.', '_', '-')"),
            (["runs", "--limit", "-1"], "mosaic: error: --limit: -1 is below 0; allowed: a count of the newest runs, "
             "or 0 for every run"),
            # eval: a path that does not exist is not "an invalid run id", and a worker that cannot evaluate is
            # named, not its process's --evaluate flag
            (["eval", "./no/such/checkpoint"], "mosaic: error: RUN|CHECKPOINT: './no/such/checkpoint' does not "
             "exist; allowed: a run id, a unique prefix of one, 'latest', or a checkpoint folder"),
            (["eval", "zz-named"], "mosaic: error: RUN|CHECKPOINT: 'zz-named' is a run of the random worker, which "
             "cannot evaluate (it trains no policies); allowed: a run of a worker that evaluates (`mosaic workers "
             "show NAME`: evaluates: yes)")):
        proc = run_cli(*args, home=home)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [line], proc.stderr
    assert sorted(p.name for p in runs_in(home)) == sorted([newest, "zz-named"])


@pytest.mark.slow
#: Seeds 0-3 rose by 4.9 to 8.5 (spread 1.5; docs/learning-tests.md): a bar of 4 left the worst seed 0.9 above it.
@learning(seed=0, rises=claim(bar=3, measured={0: 7.02, 1: 4.88, 2: 6.51, 3: 8.47},
                              what="mean return of the last 3 iterations over the first 3"))
def test_the_readme_main_job_visibly_learns(request, home):
    """`mosaic run` with no config, in full: the built-in default (RLlib PPO on simple_spread, seed 0) trains, and
    a newcomer's first run shows its return rising and ends by saying where to look next."""
    # a deadline, not a duration: 30k steps take ~2.5 min on an idle 2-core machine, more on a busy one
    measure = ["--set", f"seed={seed(0)}"] if measuring() else []
    proc = run_cli("run", *measure, home=home, timeout=1800, env={"RAY_AUTH_MODE": "disabled"})
    assert proc.returncode == 0, proc.stderr
    (run,) = runs_in(home)
    manifest = json.loads((run / "analytics.json").read_text())
    assert manifest["status"] == "completed" and manifest["worker"] == "ray"
    assert manifest["algorithm"] == "ppo" and manifest["env"]["env_id"] == "simple_spread_v3"
    assert json.loads((run / "config.json").read_text())["total_timesteps"] == 30_000
    returns = [e["episode_return_mean"] for e in map(json.loads, (run / "telemetry.jsonl").read_text().splitlines())
               if e["type"] == "metrics"]
    assert len(returns) == 15  # 30k env steps in batches of 2000
    check(request, "rises", sum(returns[-3:]) / 3, baseline=sum(returns[:3]) / 3)
    # it ends by saying what was learned and where to look next
    assert "mean episode return: " in proc.stderr and "where to look next:" in proc.stderr
    assert f"mosaic eval {run.name} --episodes 20 --video" in proc.stderr
    assert f"tensorboard --logdir {run / 'tensorboard'}" in proc.stderr


@pytest.mark.parametrize("args, words", [
    (["show"], "the following arguments are required: run (`mosaic show --help` lists what it takes)"),
    (["run", "x.json", "--dryrun"], "unrecognized arguments: --dryrun"),
    (["eval", "latest", "--episodes", "abc"], "argument --episodes: invalid int value: 'abc'"),
    (["arena", "bogus"], "invalid choice: 'bogus'"),
    (["arena", "run", "spec.yaml", "--parallel", "0"], "--parallel: '0'; allowed: an integer >= 1"),  # a traceback
])
def test_a_mistake_argparse_finds_is_one_line_too(home, args, words):
    """Not argparse's usage block and its 'mosaic show: error:' prefix: one line like every other mistake."""
    proc = run_cli(*args, home=home)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("mosaic: error: ") and words in line, line


def test_set_rejects_malformed_overrides(home):
    proc = run_cli("run", str(EXAMPLES / "random_connect_four.json"), "--set", "seed", home=home)
    assert proc.returncode == 2 and "--set: expected KEY.PATH=VALUE" in proc.stderr
    proc = run_cli("run", str(EXAMPLES / "random_connect_four.json"), "--set", "seed.x=1", home=home)
    assert proc.returncode == 2 and "'seed' is not an object" in proc.stderr
    assert runs_in(home) == []


@pytest.mark.parametrize("case,setup,words", [
    ("missing", lambda d: ["run", str(d / "nope.json")], "does not exist"),
    ("not_json", lambda d: ["run", str(write_text(d / "c.json", "{oops"))], "not valid JSON"),
    ("not_object", lambda d: ["run", str(write_text(d / "c.json", "[1]"))], "must hold a JSON object"),
    ("unknown_worker", lambda d: ["run", str(write_config(d / "c.json", {"worker": "nope"}))],
     "worker: 'nope' is not one of"),
    ("no_worker", lambda d: ["run", str(write_config(d / "c.json", {"seed": 1}))], "worker: not given"),
    ("invalid_field", lambda d: ["run", str(write_config(d / "c.json", {"worker": "random", "seed": -3}))],
     "seed: -3 is below the minimum 0"),
    ("unknown_field", lambda d: ["run", str(write_config(d / "c.json", {"worker": "random", "sede": 1}))],
     "sede: unknown field (did you mean 'seed'?)"),
    ("bad_env", lambda d: ["run", str(write_config(d / "c.json", {
        "worker": "random", "environment": {"family": "classic", "env_id": "connect_five_v3"}}))],
     "environment.env_id: 'connect_five_v3' is not a classic env"),
    ("bad_env_seeded", lambda d: ["run", str(write_config(d / "c.json", {
        "worker": "random", "seed": 4, "environment": {"family": "classic", "env_id": "connect_five_v3"}}))],
     "environment.env_id: 'connect_five_v3' is not a classic env"),  # refused inside the one worker process
    ("bad_run_id", lambda d: ["run", str(EXAMPLES / "random_connect_four.json"), "--run-id", "../x"],
     "run_id: '../x' is not a valid run id"),
    ("bad_run_id_in_config", lambda d: ["run", str(write_config(d / "c.json", {"worker": "random", "run_id": "a/../../b"}))],
     "is not a valid run id"),
])
def test_bad_input_is_one_line_exit_2_and_no_run_folder(home, tmp_path, case, setup, words):
    proc = run_cli(*setup(tmp_path), home=home)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mosaic: error: "), proc.stderr
    assert words in lines[0]
    assert "Traceback" not in proc.stderr
    assert runs_in(home) == []
    runs = home / "trainer" / "runs"
    assert not runs.exists() or list(runs.iterdir()) == []  # not even the worker's log of a run never made
    assert not (tmp_path / "x").exists()


def write_text(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def start_slow_run(home: Path, tmp_path: Path, **overrides) -> tuple[subprocess.Popen, Path]:
    config = write_config(tmp_path / "slow.json", {
        "worker": "random", "environment": {"family": "mpe", "env_id": "simple_spread_v3",
                                            "api_type": "PARALLEL"},
        "total_timesteps": 100_000, "step_delay_s": 0.005,
        "reporting": {"every_timesteps": 20, "heartbeat_interval_s": 0.5}, **overrides})
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MOSAIC_HOME": str(home)})
    deadline = time.time() + 60
    while time.time() < deadline:
        runs = runs_in(home)
        telemetry = runs[0] / "telemetry.jsonl" if runs else None
        if telemetry is not None and telemetry.exists() and b'"type":"metrics"' in telemetry.read_bytes():
            return proc, runs[0]
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"run did not start: {proc.communicate()}")


def worker_pid(run: Path) -> int:
    return json.loads((run / "analytics.json").read_text())["pid"]


def test_one_worker_process_checks_the_config_and_runs_it(home, tmp_path):
    """`mosaic run` of a seeded config: the worker checks it, the run folder is made only then, and the
    same process runs it, with the config's seed as its hash seed (no second interpreter first)."""
    proc, run = start_slow_run(home, tmp_path, seed=5)
    try:
        manifest = json.loads((run / "analytics.json").read_text())
        assert manifest["command"][-1] == "--handshake"
        environ = psutil.Process(manifest["pid"]).environ()
        assert environ["PYTHONHASHSEED"] == "5"
        config = json.loads((run / "config.json").read_text())
        assert config["seed"] == 5 and config["reporting"]["every_timesteps"] == 20  # the normalised config
        assert (run / "logs" / "worker.log").is_file()
        assert [p.name for p in (home / "trainer" / "runs").iterdir()] == [run.name]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
    events = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
    assert events[0]["type"] == "run_started" and events[-1]["type"] == "run_cancelled"
    assert proc.returncode == 3


def test_sigkill_of_worker_is_reported_as_failed_and_telemetry_is_intact(home, tmp_path):
    proc, run = start_slow_run(home, tmp_path)
    before = (run / "telemetry.jsonl").read_bytes()
    os.kill(worker_pid(run), signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1
    assert "failed" in err and "SIGKILL" in err
    after = (run / "telemetry.jsonl").read_bytes()
    assert after.startswith(before)
    events = [json.loads(line) for line in after.splitlines()]  # every line still parses
    assert events[-1]["type"] == "run_failed" and events[-1]["signal"] == "SIGKILL"
    assert json.loads((run / "analytics.json").read_text())["status"] == "failed"


def test_ctrl_c_cancels_the_worker_cleanly(home, tmp_path):
    proc, run = start_slow_run(home, tmp_path)
    pid = worker_pid(run)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3, err
    events = [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]
    assert events[-1]["type"] == "run_cancelled" and "SIGTERM" in events[-1]["reason"]
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert json.loads((run / "analytics.json").read_text())["status"] == "cancelled"


def test_pause_and_resume_by_signal(home, tmp_path):
    proc, run = start_slow_run(home, tmp_path)
    check_pause_resume(run, proc, heartbeats=2, timeout=60)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 3
