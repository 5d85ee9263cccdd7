"""marl-eval files read back into an experiment's report (``mosaic experiment report NAME --marl-eval FILE``).

The experiment is a real grid of random play on simple_spread (3 seeds of 300 env steps, PettingZoo's parallel
API so that a step is one step of the env, episodes of 25 steps and a ``metrics`` event every 25, so every seed
logs at the same env steps), run through the daemon that ``experiment run`` starts,
then reported. Its own ``marl_eval.json``, read back as a contender, must give back the per-seed final scores
of its ``scores.csv``; a hand-written file in BenchMARL 1.5.2's layout (its ``JsonWriter``: per-agent returns,
``absolute_metrics`` first and holding the best episode of any evaluation) joins only when its units are
stated as the experiment's; every bad input exits 2 naming what is wrong and leaves the report folder as it was.
The refusals call the command line's ``main`` in this process (the same parser and handler, without a
process each); the reports that are written run it as a subprocess.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pytest

from cli_support import run_cli, write_config
from mosaic.errors import UserError
from mosaic.experiments.marl_eval import join_marl_eval, read_marl_eval
from mosaic.experiments.results import MOSAIC_UNITS, Units

NAME = "own-grid"
ENV = "simple_spread_v3"
SEEDS = (0, 1, 2)
UNITS = ("--marl-eval-return", "summed", "--marl-eval-steps", "env_steps")
BENCHMARL_STEPS = [30 * k for k in range(11)]  # step_count 0 .. 300


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    """The experiment's home and its report folder (report.md, scores.csv, marl_eval.json, ...)."""
    from mosaic.testing.daemon import stop_home_daemon

    root = tmp_path_factory.mktemp("marl-eval-read")
    home = root / "home"
    spec = write_config(root / "grid.json", {
        "name": NAME, "seeds": len(SEEDS),
        "base": {"random": {"environment": {"family": "mpe", "env_id": ENV, "api_type": "PARALLEL",
                                                "env_kwargs": {"N": 3, "max_cycles": 25}},
                            "total_timesteps": 300, "reporting": {"every_timesteps": 25}}}})
    try:
        ran = run_cli("experiment", "run", str(spec), home=home, timeout=600)
        assert ran.returncode == 0, ran.stderr[-3000:]
        report = run_cli("experiment", "report", NAME, home=home, timeout=300)
    finally:
        stop_home_daemon(home)
    assert report.returncode == 0, report.stderr[-3000:]
    return home, home / "experiments" / NAME / "report"


def _scores(folder: Path, configuration: str) -> dict[int, float]:
    rows = list(csv.DictReader((folder / "scores.csv").open(encoding="utf-8")))
    return {int(r["seed"]): float(r["final_score"]) for r in rows if r["configuration"] == configuration}


def _table(markdown: str, heading: str) -> dict[str, dict[str, str]]:
    """The first markdown table after ``heading``, by its first column."""
    lines = markdown.splitlines()
    rows = []
    for line in lines[lines.index(heading) + 1:]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
        elif rows:
            break
    return {row[0]: dict(zip(rows[0], row)) for row in rows[2:]}


def _agent_return(seed: int, k: int, episode: int) -> float:
    """One agent's return (the mean over the 3 agents, as BenchMARL's ``return``) at evaluation k."""
    return -30.0 + 2.0 * k + 0.5 * seed + 0.25 * episode


def benchmarl_file(path: Path) -> Path:
    """A file as BenchMARL 1.5.2's JsonWriter writes one: ``absolute_metrics`` first (the best episode of any
    evaluation), then ``step_<evaluation step>`` points of 2 evaluation episodes each, per-agent returns."""
    seeds = {}
    for seed in SEEDS:
        run: dict = {"absolute_metrics": {"return": [99.0], "agents_return": [99.0]}}
        for k, steps in enumerate(BENCHMARL_STEPS):
            values = [_agent_return(seed, k, e) for e in range(2)]
            run[f"step_{k}"] = {"step_count": steps, "agents_return": values, "return": values}
        seeds[f"seed_{seed}"] = run
    path.write_text(json.dumps({"pettingzoo": {"simple_spread": {"mappo": seeds}}}, indent=4), encoding="utf-8")
    return path


def benchmarl_final(seed: int) -> float:
    """The final window over step_count 0..300: the points at 270 and 300, each the mean of its 2 episodes."""
    return sum((_agent_return(seed, k, 0) + _agent_return(seed, k, 1)) / 2 for k in (9, 10)) / 2


def _fingerprint(root: Path) -> dict[str, bytes]:
    """Every file under the experiment's folder, by path, with its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- MOSAIC's own file, read back -------------------------------------------------------------------------------
def test_a_reports_own_marl_eval_json_read_back_gives_the_scores_of_its_scores_csv(grid, tmp_path):
    home, folder = grid
    own = _scores(folder, "default")
    assert sorted(own) == list(SEEDS) and all(math.isfinite(v) for v in own.values())
    copied = tmp_path / "elsewhere" / "marl_eval.json"
    copied.parent.mkdir()
    shutil.copyfile(folder / "marl_eval.json", copied)
    out = tmp_path / "joined"
    proc = run_cli("experiment", "report", NAME, "--marl-eval", str(copied), "--marl-eval-metric",
                   "episode_return_mean", *UNITS, "--out", str(out), home=home, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    label = "marl-eval:default (marl_eval.json)"
    back = _scores(out, label)
    assert sorted(back) == sorted(own)
    for seed in own:
        assert back[seed] == pytest.approx(own[seed], abs=1e-12), seed
    assert _scores(out, "default") == own  # the experiment's own runs, untouched by the join

    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "## Read from marl-eval files" in markdown and "MOSAIC did not run these contenders" in markdown
    assert (f"- `{copied.resolve()}`: metric `episode_return_mean`; units as given: the return summed over agents, "
            "over env steps (`--marl-eval-return summed`, `--marl-eval-steps env_steps`).") in markdown
    row = _table(markdown, "## Read from marl-eval files")[label]
    assert (row["in the file"], row["env"], row["seeds scored"]) == (f"mpe/{ENV}/default", ENV, "3 of 3 (0, 1, 2)")
    assert (row["step points per seed"], row["last step (env steps)"]) == ("12", "300")
    assert row["score"] == "final 10% of the step points"
    per_env = _table(markdown, f"### {ENV}")
    assert per_env[label]["seeds"] == "3"
    assert per_env[label]["IQM [95% CI]"].split(" ")[0] == per_env["default"]["IQM [95% CI]"].split(" ")[0]
    poi = [line for line in markdown.splitlines() if line.startswith(f"| {label} | default |")]
    assert len(poi) == 1 and poi[0].split(" | ")[2].startswith("0.5 ["), poi  # the same scores: neither wins
    assert "Not run by MOSAIC: marl-eval:default (marl_eval.json) come from marl-eval files" in markdown
    assert label in proc.stderr  # the terminal table has the contender too
    exported = json.loads((out / "marl_eval.json").read_text(encoding="utf-8"))
    assert list(exported["mpe"][ENV]) == ["default"]  # MOSAIC's file holds only what MOSAIC ran


def test_the_final_score_comes_from_the_step_points_not_absolute_metrics(grid, tmp_path):
    """The same file with its absolute_metrics changed gives the same scores (the final window over its step
    points); without step points a seed is scored from absolute_metrics and has no curve. The contender's curves
    join the sample-efficiency plot."""
    from mosaic.experiments.collect import report_input
    from mosaic.experiments.report import analyse
    from mosaic.experiments.report.plots import plot_sample_efficiency
    from mosaic.experiments.store import ExperimentStore

    home, folder = grid
    own = _scores(folder, "default")
    data = json.loads((folder / "marl_eval.json").read_text(encoding="utf-8"))
    for run in data["mpe"][ENV]["default"].values():
        run["absolute_metrics"]["episode_return_mean"] = [1e6]
    tampered = tmp_path / "tampered.json"
    tampered.write_text(json.dumps(data), encoding="utf-8")
    (runs,) = read_marl_eval(tampered, "episode_return_mean").runs
    assert (runs.environment, runs.task, runs.algorithm) == ("mpe", ENV, "default")
    assert {seed: r.final_score for seed, r in runs.seeds.items()} == pytest.approx(own, abs=1e-12)
    assert [r.xs for r in runs.seeds.values()] == [tuple(25.0 * k for k in range(1, 13))] * 3

    for run in data["mpe"][ENV]["default"].values():
        for key in [k for k in run if k.startswith("step_")]:
            del run[key]
    tampered.write_text(json.dumps(data), encoding="utf-8")
    (runs,) = read_marl_eval(tampered, "episode_return_mean").runs
    assert all(r.final_score == 1e6 and r.xs == () and r.late_change is None for r in runs.seeds.values())

    exp = ExperimentStore(home).get(NAME)
    copied = tmp_path / "marl_eval.json"
    shutil.copyfile(folder / "marl_eval.json", copied)
    joined = join_marl_eval(report_input(exp, home), [(read_marl_eval(copied, "episode_return_mean"), MOSAIC_UNITS)])
    figure = plot_sample_efficiency(analyse(joined), tmp_path / "curves.png")
    labels = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert labels == ["default (3 seeds)", "marl-eval:default (marl_eval.json) (3 seeds)"]


# -- BenchMARL's layout, per-agent returns ------------------------------------------------------------------------
def test_a_benchmarl_file_is_refused_as_per_agent_and_joins_as_summed(grid, tmp_path):
    home, _ = grid
    path = benchmarl_file(tmp_path / "benchmarl.json")
    refused = run_cli("experiment", "report", NAME, "--marl-eval", str(path), "--marl-eval-return", "per_agent",
                      "--marl-eval-steps", "env_steps", "--marl-eval-env", f"simple_spread={ENV}",
                      "--out", str(tmp_path / "refused"), home=home, timeout=300)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert refused.stderr.startswith("mosaic: error: --marl-eval-return: per_agent, but this experiment's scores "
                                     "are the return summed over agents (episode_return_mean); allowed: summed")
    assert not (tmp_path / "refused").exists()

    out = tmp_path / "joined"
    proc = run_cli("experiment", "report", NAME, "--marl-eval", str(path), *UNITS,
                   "--marl-eval-env", f"simple_spread={ENV}", "--out", str(out), home=home, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    label = "marl-eval:mappo (benchmarl.json)"
    back = _scores(out, label)
    assert back == pytest.approx({seed: benchmarl_final(seed) for seed in SEEDS}, abs=1e-12)
    assert all(score < 99.0 for score in back.values())  # not absolute_metrics' best episode
    markdown = (out / "report.md").read_text(encoding="utf-8")
    row = _table(markdown, "## Read from marl-eval files")[label]
    assert (row["in the file"], row["env"], row["step points per seed"], row["last step (env steps)"]) == \
        ("pettingzoo/simple_spread/mappo", ENV, "11", "300")
    assert "metric `return`; units as given: the return summed over agents, over env steps" in markdown
    assert _table(markdown, "## What was run")[label]["worker"] == "marl-eval"


# -- refusals -----------------------------------------------------------------------------------------------------
def _bad_files(tmp: Path) -> dict[str, Path]:
    benchmarl = benchmarl_file(tmp / "benchmarl.json")
    files = {"missing": tmp / "nowhere.json", "benchmarl": benchmarl}
    (tmp / "not.json").write_text("{'pettingzoo': ", encoding="utf-8")
    files["not json"] = tmp / "not.json"
    data = json.loads(benchmarl.read_text())
    data["pettingzoo"]["simple_spread"]["mappo"]["run_0"] = data["pettingzoo"]["simple_spread"]["mappo"].pop("seed_0")
    (tmp / "layout.json").write_text(json.dumps(data), encoding="utf-8")
    files["layout"] = tmp / "layout.json"
    (tmp / "list.json").write_text(json.dumps([1, 2]), encoding="utf-8")
    files["list"] = tmp / "list.json"
    data = json.loads(benchmarl.read_text())
    data["pettingzoo"]["simple_spread"]["mappo"]["seed_1"]["step_3"]["step_count"] = "ninety"
    (tmp / "steps.json").write_text(json.dumps(data), encoding="utf-8")
    files["step count"] = tmp / "steps.json"
    return files


MAP = ("--marl-eval-env", f"simple_spread={ENV}")


@pytest.mark.parametrize("case, extra, words", [
    ("missing", UNITS + MAP, ["--marl-eval: ", "nowhere.json: no such file"]),
    ("not json", UNITS + MAP, ["not.json is not JSON (Expecting property name enclosed in double quotes: line 1"]),
    ("layout", UNITS + MAP, ["layout.json is not in marl-eval's layout {ENVIRONMENT: {TASK: {ALGORITHM: ",
                             "at pettingzoo/simple_spread/mappo, the key 'run_0' (a run is \"seed_<n>\""]),
    ("list", UNITS + MAP, ["list.json is not in marl-eval's layout", "at the top level, a JSON list where an object "
                                                                    "of environments belongs"]),
    ("step count", UNITS + MAP, ["at pettingzoo/simple_spread/mappo/seed_1/step_3, step_count is 'ninety', not a "
                                 "whole number of steps >= 0"]),
    ("benchmarl", UNITS + MAP + ("--marl-eval-metric", "reward"),
     ["--marl-eval-metric: 'reward' is not in ", "benchmarl.json; its metrics: agents_return, return"]),
    ("benchmarl", UNITS, ["--marl-eval: no task of ", "benchmarl.json matches an env of this report: the file has "
                          f"pettingzoo/simple_spread; the report's envs: {ENV}; map a task with --marl-eval-env "
                          "TASK=ENV"]),
    ("benchmarl", UNITS + ("--marl-eval-env", "simple_spread=simple_tag_v3"),
     [f"--marl-eval-env: simple_spread=simple_tag_v3: this report has no env 'simple_tag_v3'; its envs: {ENV}"]),
    ("benchmarl", UNITS + ("--marl-eval-env", "spread=" + ENV),
     ["--marl-eval-env: spread=simple_spread_v3: no file has the task 'spread'; their tasks: simple_spread"]),
    ("benchmarl", ("--marl-eval-return", "summed", "--marl-eval-steps", "agent_steps") + MAP,
     ["--marl-eval-steps: agent_steps, but this experiment's curves are over env steps (timesteps_total); allowed: "
      "env_steps"]),
    ("benchmarl", ("--marl-eval-steps", "env_steps") + MAP,
     ["--marl-eval-return: required with --marl-eval, since a marl-eval file carries no units; one of summed = the "
      "return summed over agents, per_agent = the return per agent (the mean over agents); this experiment's: summed"]),
    ("benchmarl", UNITS + MAP + ("--marl-eval-metric", "return", "--marl-eval-metric", "return"),
     ["--marl-eval-metric: given 2 times for 1 file; allowed: once (for every file) or once per file"]),
])
def test_a_bad_input_exits_2_naming_it_and_leaves_the_report_as_it_was(grid, tmp_path, monkeypatch, capsys, case,
                                                                         extra, words):
    from mosaic.clients.cli import main

    home, _ = grid
    root = home / "experiments" / NAME
    before = _fingerprint(root)
    monkeypatch.setenv("MOSAIC_HOME", str(home))
    path = _bad_files(tmp_path)[case]
    code = main(["experiment", "report", NAME, "--marl-eval", str(path), *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith("mosaic: error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    for word in words:
        assert word in err, err
    assert _fingerprint(root) == before  # no report written, nothing staged left behind


def test_the_marl_eval_options_without_a_file_are_refused(grid, tmp_path, monkeypatch, capsys):
    from mosaic.clients.cli import main

    home, _ = grid
    monkeypatch.setenv("MOSAIC_HOME", str(home))
    assert main(["experiment", "report", NAME, "--marl-eval-return", "summed", "--out", str(tmp_path / "out")]) == 2
    assert ("--marl-eval-return: says how to read a marl-eval file, but no --marl-eval FILE is given"
            in capsys.readouterr().err)
    assert not (tmp_path / "out").exists()


def test_units_and_a_score_without_stated_units_are_refused_by_the_core(tmp_path):
    """What ``join_marl_eval`` refuses whoever calls it: units other than MOSAIC's, and any file when the
    experiment's score is a metric whose units MOSAIC does not state."""
    from mosaic.experiments.report import ReportCell, ReportInput

    path = benchmarl_file(tmp_path / "benchmarl.json")
    cells = [ReportCell("c000", "default", "simple_spread", 0, "completed", None, None, {}, "random", "random", 300)]
    data = ReportInput(name="x", spec={}, cells=cells)
    read = read_marl_eval(path)
    with pytest.raises(UserError, match="--marl-eval-return: per_agent, but"):
        join_marl_eval(data, [(read, Units("per_agent", "env_steps"))])
    other = ReportInput(name="x", spec={}, cells=cells, metric="episode_len_mean")
    with pytest.raises(UserError, match="score is 'episode_len_mean' \\(score.metric\\), whose units MOSAIC does not "
                                        "state"):
        join_marl_eval(other, [(read, MOSAIC_UNITS)])
    with pytest.raises(UserError, match="is named twice"):
        join_marl_eval(data, [(read, MOSAIC_UNITS), (read, MOSAIC_UNITS)])
    joined = join_marl_eval(data, [(read, MOSAIC_UNITS)])
    assert [c.cell_id for c in joined.cells[1:]] == [f"benchmarl.json/pettingzoo/simple_spread/mappo/seed_{s}"
                                                     for s in SEEDS]
    assert joined.cells[1].budget == 300 and joined.marl_eval[0].joined == (
        ("pettingzoo/simple_spread", "mappo", "marl-eval:mappo (benchmarl.json)", "simple_spread"),)


def test_seeds_without_step_points_or_without_the_metric_are_said_so(tmp_path):
    """A seed with only absolute_metrics is scored from them (the report says which, and why to distrust it); a
    seed without the metric is left out and listed; step points are taken in the order of step_count, a point
    with no values is skipped; a task matching no env is left out and named."""
    from mosaic.experiments.report import ReportCell, ReportInput, analyse
    from mosaic.experiments.report.tables import render_markdown

    seed_0 = {"step_2": {"step_count": 200, "return": [4.0, 6.0]}, "step_0": {"step_count": 0, "return": [0.0]},
              "step_1": {"step_count": 100, "return": []}, "step_3": {"step_count": 190, "return": 3.0}}
    data = {"vmas": {"navigation": {"ippo": {"seed_0": seed_0, "seed_1": {"absolute_metrics": {"return": [7.0]}},
                                             "seed_2": {"step_0": {"step_count": 10, "other": [1.0]}}}},
                     "balance": {"ippo": {"seed_0": {"step_0": {"step_count": 5, "return": [1.0]}}}}}}
    path = tmp_path / "vmas.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    read = read_marl_eval(path)
    navigation = next(r for r in read.runs if r.task == "navigation")
    assert navigation.seeds[0].xs == (0.0, 190.0, 200.0) and navigation.seeds[0].ys == (0.0, 3.0, 5.0)
    assert navigation.seeds[0].final_score == 4.0  # step_count >= 180: the points at 190 and 200
    assert (navigation.seeds[1].final_score, navigation.seeds[1].xs) == (7.0, ())
    assert navigation.seeds[2].final_score is None and read.metrics == ("other", "return")

    cells = [ReportCell("c000", "default", "navigation", 0, "pending", None, None, {}, "random", "random", 200)]
    joined = join_marl_eval(ReportInput(name="x", spec={}, cells=cells, reps=100), [(read, MOSAIC_UNITS)])
    markdown = render_markdown(analyse(joined))
    label = "marl-eval:ippo (vmas.json)"
    assert "Left out, matching no env of this report: vmas/balance." in markdown
    row = _table(markdown, "## Read from marl-eval files")[label]
    assert (row["seeds scored"], row["step points per seed"], row["last step (env steps)"]) == ("2 of 3 (0, 1)", "3",
                                                                                                "200")
    assert row["score"] == ("absolute_metrics for 1 seed(s) without step points, final 10% of the step points for "
                            "the rest")
    assert f"Scored from absolute_metrics ({label}): those seeds have no step points" in markdown
    missing = _table(markdown, "### Cells without a score")
    assert missing["vmas.json/vmas/navigation/ippo/seed_2"]["why left out"] == \
        "its marl-eval file holds no value of the metric for this seed"
