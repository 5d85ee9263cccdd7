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
