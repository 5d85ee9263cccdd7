"""A newcomer's first hour, through the real command line: results where the user is looking, a short summary
before the raw manifest, one order of runs, mistakes named for what they are, help that says what a command
does. Every command is a real ``python -m mosaic`` subprocess; runs are real runs of the reference worker (random
play) at tiny budgets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli, write_config

pytestmark = pytest.mark.xdist_group("first_hour")

SPREAD = {"worker": "random", "environment": {"family": "mpe", "env_id": "simple_spread_v3"},
          "total_timesteps": 200, "reporting": {"every_timesteps": 50}}


# -- the experiment report's table on the terminal -------------------------------------------------------------
@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    """A real grid of 2 configurations x 2 seeds of random play on simple_spread, run through the daemon that
    `experiment run` starts (stopped at the end), then reported."""
    from mosaic.testing.daemon import stop_home_daemon

    root = tmp_path_factory.mktemp("report")
    home = root / "home"
    spec = write_config(root / "grid.json", {
        "name": "first-grid", "seeds": 2, "axes": {"total_timesteps": [400, 500]},
        "base": {"random": {**{k: v for k, v in SPREAD.items() if k != "worker"}, "reporting": {"every_timesteps": 25}}}})
    try:
        ran = run_cli("experiment", "run", str(spec), home=home, timeout=600)
        assert ran.returncode == 0, ran.stderr[-3000:]
        report = run_cli("experiment", "report", "first-grid", home=home, timeout=300)
    finally:
        stop_home_daemon(home)
    assert report.returncode == 0, report.stderr[-3000:]
    return home, report


def test_experiment_report_prints_its_table_then_where_the_files_are(reported):
    from mosaic.experiments.collect import report_input
    from mosaic.experiments.report import analyse, fmt_interval
    from mosaic.experiments.report.analysis import verdict
    from mosaic.experiments.store import ExperimentStore

    home, report = reported
    folder = home / "experiments" / "first-grid" / "report"
    assert report.stdout.strip() == str(folder / "report.md")  # stdout: the path, for scripts
    lines = report.stderr.strip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("CONFIGURATION"))
    assert lines[start].split() == ["CONFIGURATION", "SEEDS", "IQM", "MEAN", "VERDICT"]
    assert "score `episode_return_mean`" in lines[start - 1] and "95% intervals" in lines[start - 1]
    store = ExperimentStore(home)
    analysis = analyse(report_input(store.get("first-grid"), home))
    rows = lines[start + 1:start + 1 + len(analysis.configurations)]
    for conf, row in zip(analysis.configurations, rows):  # the numbers report.md states, in the spec's order
        assert row.startswith(conf), row
        assert fmt_interval(analysis.aggregate["iqm"][conf]) in row and fmt_interval(analysis.aggregate["mean"][conf]) in row
        assert row.rstrip().endswith(verdict(analysis, (conf, analysis.envs[0]))), row
    assert fmt_interval(analysis.aggregate["iqm"][analysis.configurations[0]]) in (folder / "report.md").read_text()
    assert lines[-1].startswith(f"files: {folder}/") and "report.md" in lines[-1] and "scores.csv" in lines[-1]


def test_runs_selects_an_experiments_cells_or_leaves_them_out(reported, tmp_path):
    """Experiment cells are runs and are listed; --experiment NAME shows only that experiment's, --standalone
    leaves them out, an unknown experiment is refused naming the ones there are."""
    home, _ = reported
    own = run_cli("run", "--worker", "random", "--set", "total_timesteps=20", "--run-id", "mine", home=home)
    assert own.returncode == 0, own.stderr
    every = _listed(run_cli("runs", home=home))
    cells = [r for r in every if r.startswith("first-grid-")]
    assert len(cells) == 4 and "mine" in every
    assert _listed(run_cli("runs", "--experiment", "first-grid", home=home)) == cells
    assert _listed(run_cli("runs", "--standalone", home=home)) == ["mine"]
    refused = run_cli("runs", "--experiment", "no-such", home=home)
    assert refused.returncode == 2 and "--experiment: 'no-such'" in refused.stderr and "first-grid" in refused.stderr


# -- `mosaic show`: a summary first ------------------------------------------------------------------------------
def _listed(proc) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return [line.split()[0] for line in proc.stdout.splitlines()[2:]]


def test_show_starts_with_a_short_summary_and_json_gives_the_whole_record(home, tmp_path):
    config = write_config(tmp_path / "c.json", {**SPREAD, "total_timesteps": 300, "seed": 4, "run_id": "sum",
                                                "reporting": {"every_timesteps": 100},
                                                "checkpoint": {"every_timesteps": 100}})
    assert run_cli("run", str(config), home=home).returncode == 0
    proc = run_cli("show", "sum", home=home)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) <= 12, proc.stdout
    assert lines[0] == "run sum: completed"
    assert "worker: random; algorithm: random; env: mpe/simple_spread_v3; seed: 4" in lines[1]
    assert "progress: 300/300 env steps" in proc.stdout
    last = json.loads((home / "trainer" / "runs" / "sum" / "telemetry.jsonl").read_text().splitlines()[-1])
    assert last["type"] == "run_completed"
    assert "last mean return: " in proc.stdout and "last mean return: -\n" not in proc.stdout
    manifest = json.loads((home / "trainer" / "runs" / "sum" / "analytics.json").read_text())
    assert f"checkpoints: {len(manifest['checkpoints'])}, latest {manifest['latest_checkpoint']}" in proc.stdout
    assert "failed" not in proc.stdout and "mosaic show sum --json" in lines[-1]
    whole = json.loads(run_cli("show", "sum", "--json", home=home).stdout)
    assert whole["manifest"] == manifest and whole["config"]["seed"] == 4


def test_show_names_a_failures_cause_and_its_log(home, tmp_path):
    """The worker killed mid-run: the run failed; show says why and where its log is."""
    import os
    import signal
    import subprocess
    import sys

    from mosaic.testing.waiting import wait_until

    config = write_config(tmp_path / "slow.json", {**SPREAD, "total_timesteps": 5000, "step_delay_s": 0.02,
                                                   "run_id": "killed"})
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "MOSAIC_HOME": str(home)})
    manifest = home / "trainer" / "runs" / "killed" / "analytics.json"
    pid = wait_until(lambda: manifest.exists() and json.loads(manifest.read_text()).get("status") == "running"
                     and json.loads(manifest.read_text()).get("pid"), 120, "the run to start")
    os.kill(pid, signal.SIGKILL)
    proc.communicate(timeout=120)
    shown = run_cli("show", "killed", home=home)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0] == "run killed: failed"
    failure = json.loads(manifest.read_text())["failure"]
    assert f"failed: {failure['error_type']}: " in shown.stdout
    assert f"its log: {home / 'trainer' / 'runs' / 'killed' / 'logs' / 'worker.log'}" in shown.stdout


# -- `mosaic runs`: one order, daemon or not -------------------------------------------------------------------
def test_runs_lists_in_one_order_with_or_without_a_daemon(home, tmp_path):
    """Newest last by creation time, not by run id, whether a daemon serves the home or not; --limit N: the newest N."""
    from mosaic.testing.daemon import start_daemon

    tiny = ["--worker", "random", "--set", "total_timesteps=20"]
    for run_id in ("zz-first", "mm-second", "aa-third"):
        assert run_cli("run", *tiny, "--run-id", run_id, home=home).returncode == 0
    alone = _listed(run_cli("runs", home=home))
    assert alone == ["zz-first", "mm-second", "aa-third"]
    daemon = start_daemon(home)
    try:
        config = write_config(tmp_path / "tiny.json", {"worker": "random", "total_timesteps": 20})
        submitted = run_cli("submit", str(config), "--run-id", "bb-fourth", "--follow", home=home, timeout=180)
        assert submitted.returncode == 0, submitted.stderr
        served = _listed(run_cli("runs", home=home))
        assert served == ["zz-first", "mm-second", "aa-third", "bb-fourth"]
        assert _listed(run_cli("runs", "--limit", "2", home=home)) == ["aa-third", "bb-fourth"]
    finally:
        daemon.stop()


def test_a_rounded_budget_is_the_target_runs_and_show_name(tmp_path_factory):
    """CleanRL's ppo takes whole rollouts: 600 env steps become 512, said up front; `runs` and `show` count against
    the 512 the run takes, and `show` says why."""
    from cli_support import REPO
    from mosaic.testing import worker_env_for_tests

    home = tmp_path_factory.mktemp("cleanrl") / "home"
    (home / "envs").mkdir(parents=True)
    env = worker_env_for_tests("cleanrl", REPO, lambda: tmp_path_factory.mktemp("cleanrl-env"))
    (home / "envs" / "cleanrl").symlink_to(env, target_is_directory=True)
    ran = run_cli("run", "--worker", "cleanrl", "--set", "algorithm=ppo", "--set", "total_timesteps=600",
                  "--set", "resources.threads=1", "--run-id", "rounded", home=home, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert "512 env steps" in ran.stderr  # said up front
    (row,) = run_cli("runs", home=home).stdout.splitlines()[2:]
    assert "512/512 env steps" in row, row
    shown = run_cli("show", "rounded", home=home).stdout
    assert "progress: 512/512 env steps (total_timesteps 600: its library takes the budget in whole units" in shown
    assert json.loads(run_cli("show", "rounded", "--json", home=home).stdout)["run"]["progress"] == "512/512 env steps"
    # a single-agent run has no seat for an opponent: said in the words of --opponent, one error line
    _one_error(run_cli("eval", "rounded", "--opponent", "random", "--episodes", "2", home=home, timeout=300),
               "--opponent: gymnasium/CartPole-v1 has one agent")


# -- mistakes named for what they are --------------------------------------------------------------------------
def _one_error(proc, *parts: str) -> str:
    """The single `mosaic: error:` line of a refusal (exit 2), holding every one of ``parts``."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-1000:], proc.stderr[-2000:])
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("mosaic: error: ") and line.count("mosaic: error:") == 1, line
    for part in parts:
        assert part in line, (part, line)
    return line


def test_set_without_its_equals_sign_says_so(home, tmp_path):
    _one_error(run_cli("run", "--worker", "random", "--set", "total_timesteps", "4000", home=home),
               "--set: expected KEY.PATH=VALUE, got 'total_timesteps': the '=' is missing",
               "write --set total_timesteps=4000")
    config = write_config(tmp_path / "c.json", SPREAD)
    _one_error(run_cli("run", str(config), "--set", "total_timesteps", "4000", home=home),
               "--set total_timesteps=4000")
    assert not (home / "trainer" / "runs").exists()


def test_a_config_field_given_as_an_option_points_to_set(home):
    _one_error(run_cli("run", "--total-timesteps", "4000", home=home),
               "--total-timesteps: not an option of `mosaic run`", "--set total_timesteps=4000")
    # a misspelt option of the command is named as one
    _one_error(run_cli("run", "--dryrun", home=home), "unrecognized arguments: --dryrun (did you mean --dry-run?)")
    _one_error(run_cli("run", "--worker", "random", "--total-timesteps=300", home=home), "--set total_timesteps=300")
    # an unknown option of a command without --set is argparse's own one line
    _one_error(run_cli("runs", "--newest", home=home), "unrecognized arguments: --newest")


def test_a_yaml_syntax_error_names_its_line_and_column(home, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("worker: random\nenvironment:\n  family: mpe\n  env_id: [simple_spread_v3\ntotal_timesteps: 300\n")
    line = _one_error(run_cli("run", str(bad), home=home), f"config: '{bad}' is not valid YAML at line ")
    assert " column " in line
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: x\nbase:\n  random: {total_timesteps: 100\nseeds: 2\n")
    _one_error(run_cli("experiment", "plan", str(spec), home=home), f"spec: '{spec}' is not valid YAML at line ")


def test_a_file_of_another_kind_is_named_with_the_command_that_takes_it(home, tmp_path):
    from cli_support import EXAMPLES

    experiment = next((EXAMPLES / "experiments").glob("*.yaml"))
    _one_error(run_cli("run", str(experiment), home=home), "is an experiment spec",
               f"`mosaic experiment run {experiment}`")
    tournament = write_config(tmp_path / "t.json", {"name": "t", "environment": {"family": "classic",
                                                                                "env_id": "tictactoe_v3"},
                                                    "players": {"a": {"target": "random"}, "b": {"target": "random"}}})
    _one_error(run_cli("run", str(tournament), home=home), "is a tournament spec", f"`mosaic arena run {tournament}`")
    _one_error(run_cli("experiment", "run", str(tournament), home=home), "is a tournament spec",
               "`mosaic arena run")
    config = write_config(tmp_path / "run.json", SPREAD)
    _one_error(run_cli("experiment", "plan", str(config), home=home), "is a run config", f"`mosaic run {config}`")
    # an LLM evaluation's run config has players too: its worker says it is a run config
    evaluation = EXAMPLES / "llm_tictactoe_vs_random.json"
    _one_error(run_cli("experiment", "plan", str(evaluation), home=home), "is a run config",
               f"`mosaic run {evaluation}`")
    assert not (home / "experiments").exists() and not (home / "trainer" / "runs").exists()


def test_gui_without_a_display_is_one_line_and_exit_2(home):
    import os

    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["MOSAIC_HOME"] = str(home)
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "mosaic", "gui"], capture_output=True, text=True, timeout=120,
                          env=env)
    _one_error(proc, "the GUI needs a display")


def test_an_opponent_where_no_side_opposes_the_run_is_refused(home, tmp_path):
    for env_id, said in (("simple_spread_v3", "one team with a shared reward"), ("simple_v3", "has one agent")):
        config = write_config(tmp_path / f"{env_id}.json", {**SPREAD, "environment": {"family": "mpe",
                                                                                      "env_id": env_id},
                                                            "run_id": env_id})
        assert run_cli("run", str(config), home=home).returncode == 0
        _one_error(run_cli("eval", env_id, "--opponent", "random", "--episodes", "2", home=home),
                   "--opponent: ", said)


def test_a_player_added_to_a_finished_tournament_is_named_with_how_to_go_on(home, tmp_path):
    spec = {"name": "tiny", "environment": {"family": "classic", "env_id": "tictactoe_v3"}, "games_per_pairing": 2,
            "players": {"a": {"target": "random"}, "b": {"target": "random"}}}
    from mosaic.testing.daemon import stop_home_daemon

    try:  # shards played as runs of the daemon it starts: arena shard runs, listed by tournament
        first = run_cli("arena", "run", str(write_config(tmp_path / "t.json", spec)), "--parallel", "2", home=home,
                        timeout=300)
    finally:
        stop_home_daemon(home)
    assert first.returncode == 0, first.stderr[-2000:]
    assert run_cli("run", "--worker", "random", "--set", "total_timesteps=20", "--run-id", "mine",
                   home=home).returncode == 0
    shards = _listed(run_cli("runs", "--tournament", "tiny", home=home))
    assert len(shards) == 2 and all(r.startswith("arena-tiny-") for r in shards), shards
    assert _listed(run_cli("runs", "--standalone", home=home)) == ["mine"]
    assert sorted(_listed(run_cli("runs", home=home))) == sorted(shards + ["mine"])
    spec["players"]["c"] = {"target": "random"}
    _one_error(run_cli("arena", "run", str(write_config(tmp_path / "t.json", spec)), home=home, timeout=300),
               "exists with another spec (players added: c)", "another name for the new spec",
               "the spec as it was to resume this one")


# -- help and width ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", ["run", "show", "eval", "logs", "watch"])
def test_each_command_describes_itself_with_an_example(home, command):
    proc = run_cli(command, "--help", home=home, env={"COLUMNS": "100"})
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    usage_end = text.index("\n\n")
    description = text[usage_end:].strip().split("\n\n")[0]
    assert not description.startswith(("positional arguments", "options")), text  # a paragraph before them
    assert len(description.split()) >= 15, description
    assert "examples:" in text and f"\n  mosaic {command} " in text.split("examples:")[1], text
    assert max(len(line) for line in text.splitlines() if not line.startswith("  mosaic")) <= 100, text


def test_mosaic_help_points_to_getting_started_and_run_help_says_json_or_yaml(home):
    assert "docs/getting-started.md" in run_cli("--help", home=home).stdout
    assert "JSON or YAML" in run_cli("run", "--help", home=home).stdout


@pytest.mark.parametrize("columns", [100, 120])
def test_workers_fits_the_terminal_width(home, columns):
    proc = run_cli("workers", home=home, env={"COLUMNS": str(columns)})
    assert proc.returncode == 0, proc.stderr
    table = [line for line in proc.stdout.splitlines() if not line.startswith(("broken:", "("))]
    assert max(len(line) for line in table) <= columns, "\n".join(table)
    assert table[0].split()[:3] == ["WORKER", "VERSION", "UPSTREAM"]
    listed = [line.split()[0] for line in table[2:] if not line.startswith(" ")]
    assert "random" in listed and "ray" in listed
    # every algorithm of a worker is still there, over however many lines its cell takes
    from mosaic.host.discovery import discover_workers

    ray = discover_workers(only="ray").get("ray")
    start = next(i for i, line in enumerate(table) if line.startswith("ray "))
    block = [table[start]] + [line for line in table[start + 1:]][:next(
        (k for k, line in enumerate(table[start + 1:]) if not line.startswith(" ")), len(table))]
    text = " ".join(block)
    assert all(algorithm in text for algorithm in ray.capabilities.algorithms), text


# -- Ray's evaluation without RLlib's words about its own internals ------------------------------------------------
def test_a_ray_evaluation_prints_no_deprecation_of_rllibs_own_module_config(home):
    """RLlib's RLModule.__init__ makes the deprecated RLModuleConfig itself and warns of it for every module; the
    evaluation builds its modules the current way, so that warning said nothing to the user. Other warnings stay
    (the filter matches that one message only)."""
    env = {"RAY_AUTH_MODE": "disabled"}
    ran = run_cli("run", "--set", "total_timesteps=400", "--set", "algo_params.train_batch_size_per_learner=200",
                  "--set", "algo_params.minibatch_size=100", "--set", "algo_params.num_epochs=1", "--run-id", "tiny",
                  home=home, env=env, timeout=600)
    assert ran.returncode == 0, ran.stderr[-3000:]
    evaluated = run_cli("eval", "tiny", "--episodes", "2", home=home, env=env, timeout=600)
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert "2 episodes of mpe/simple_spread_v3" in evaluated.stdout
    assert "RLModuleConfig" not in evaluated.stderr and "DeprecationWarning" not in evaluated.stderr, evaluated.stderr
