"""An experiment's report, from real run folders: scores, tables, plots, files, failures, determinism.

The runs are written as the recorder leaves them (a manifest through RunStore, telemetry lines as
workers print them) for 2 configurations x 2 envs x 5 seeds with known curves; one of them fails
part way and a third configuration never ran.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from mosaic.scoring import stats
from mosaic.experiments.report import ReportCell, ReportInput, analysis, fmt, fmt_interval, plots, tables, write_report
from mosaic.experiments.results import run_result
from mosaic.runs import RunStore

CONFIGS = {"algorithm=mappo": 10.0, "algorithm=ippo": 8.0}
ENVS = {"simple_spread_v3": 1.0, "simple_tag_v3": 3.0}
SEEDS = range(5)
STEPS = [1000 * k for k in range(1, 11)]
NORMALISATION = {"simple_spread_v3": (0.0, 10.0), "simple_tag_v3": (0.0, 30.0)}
FAILED = ("algorithm=ippo", "simple_tag_v3", 4)
VERSIONS = {"python": "3.11.9", "ray": "2.40.0", "torch": "2.13.0"}
REPS = 1000


def curve_value(conf: str, env: str, seed: int, k: int) -> float:
    """Learning: linear in the iteration k, a level per configuration and seed, a little wobble."""
    return ENVS[env] * (CONFIGS[conf] * k / 10 + 0.3 * seed + 0.05 * ((7 * k + seed) % 3))


def expected_final(conf: str, env: str, seed: int) -> float:
    """Mean over the last 10% of 10,000 env steps: the points at 9,000 and 10,000."""
    return (curve_value(conf, env, seed, 9) + curve_value(conf, env, seed, 10)) / 2


def expected_late_change(conf: str, env: str, seed: int) -> float:
    """The final score minus the mean over the 10% of env steps before its window: the point at 8,000 alone."""
    return expected_final(conf, env, seed) - curve_value(conf, env, seed, 8)


def expected_gain(conf: str, env: str, seed: int) -> float:
    """The final score minus the first point's value (at 1,000 env steps)."""
    return expected_final(conf, env, seed) - curve_value(conf, env, seed, 1)


def write_run(store: RunStore, run_id: str, points: list[tuple[float, float]], *, status: str = "completed",
              summary: dict | None = None, x_key: str = "timesteps_total") -> Path:
    run = store.create(run_id, {"worker": "ray"}, {"worker": "ray", "status": "created"})
    events = [{"type": "run_started", "worker": "ray", "config_digest": "0" * 64, "versions": VERSIONS,
               "resources": {"cpus": 1}, "env": {"family": "mpe", "env_id": "x"}}]
    for k, (x, y) in enumerate(points, start=1):
        events.append({"type": "metrics", "iteration": k, x_key: x, "episode_return_mean": y,
                       "learner": {"default_policy": {"vf_loss": 0.5}}})
        events.append({"type": "heartbeat"})
    if status == "completed":
        events.append({"type": "run_completed", "summary": summary or {}})
    elif status == "failed":
        events.append({"type": "run_failed", "error_type": "RuntimeError", "message": "boom"})
    lines = [json.dumps({"v": 1, **e, "run_id": run_id, "seq": i, "ts": 1_700_000_000.0 + i},
                        separators=(",", ":")) for i, e in enumerate(events)]
    run.telemetry_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run.update_manifest(status=status, versions=VERSIONS, worker="ray", env={"family": "mpe", "env_id": "x"})
    return run.root


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    store = RunStore(home)
    cells = []
    for conf in CONFIGS:
        for env in ENVS:
            for seed in SEEDS:
                cid = f"c{len(cells):03d}"
                failed = (conf, env, seed) == FAILED
                points = [(x, curve_value(conf, env, seed, k)) for k, x in enumerate(STEPS, start=1)]
                root = write_run(store, f"run-{cid}", points[:5] if failed else points,
                                 status="failed" if failed else "completed")
                algorithm = conf.split("=")[1]
                cells.append(ReportCell(cid, conf, env, seed, "failed" if failed else "completed", f"run-{cid}", root,
                                        {"algorithm": algorithm, "environment.env_id": env, "seed": seed},
                                        "ray", algorithm, 10_000))
    cells.append(ReportCell("c020", "algorithm=qmix", "simple_spread_v3", 0, "pending", None, None,
                            {"algorithm": "qmix", "environment.env_id": "simple_spread_v3", "seed": 0},
                            "ray", "qmix", 10_000))
    return home, cells


def report_input(cells, **changes) -> ReportInput:
    base = ReportInput(name="spread-vs-tag", spec={"name": "spread-vs-tag", "seeds": 5}, cells=cells,
                       normalisation=NORMALISATION, reps=REPS, seed=3)
    return dataclasses.replace(base, **changes)


@pytest.fixture(scope="module")
def written(experiment, tmp_path_factory):
    _, cells = experiment
    out = tmp_path_factory.mktemp("reports")
    first = write_report(out / "first", report_input(cells))
    second = write_report(out / "second", report_input(cells))
    return first.parent, second.parent


def table_after(markdown: str, heading: str) -> list[dict[str, str]]:
    """The first markdown table after ``heading``, as dicts by column title."""
    lines = markdown.splitlines()
    start = lines.index(heading)
    rows = []
    for line in lines[start + 1:]:
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
        elif rows:
            break
    header, body = rows[0], rows[2:]
    return [dict(zip(header, row)) for row in body]


def expected_column(conf: str, env: str) -> np.ndarray:
    return np.array([[expected_final(conf, env, s)] for s in SEEDS if (conf, env, s) != FAILED])


# -- one run's result ----------------------------------------------------------------------------------
def test_run_result_reads_the_curve_and_its_final_score(experiment):
    home, cells = experiment
    result = run_result(cells[0].run_dir)
    assert result.status == "completed" and result.run_id == "run-c000"
    assert result.xs == tuple(float(x) for x in STEPS)
    assert result.ys == pytest.approx([curve_value("algorithm=mappo", "simple_spread_v3", 0, k) for k in range(1, 11)])
    assert result.final_score == pytest.approx(expected_final("algorithm=mappo", "simple_spread_v3", 0), abs=1e-12)
    assert result.env_steps == 10_000 and dict(result.versions) == VERSIONS and result.env_family == "mpe"
    assert result.late_change == pytest.approx(expected_late_change("algorithm=mappo", "simple_spread_v3", 0),
                                               abs=1e-12)
    # a window of 0, or one too wide for a window before it, gives no late change
    assert run_result(cells[0].run_dir, final_fraction=0.0).late_change is None
    assert run_result(cells[0].run_dir, final_fraction=0.6).late_change is None
    assert run_result(cells[0].run_dir, final_fraction=0.5).late_change == pytest.approx(
        np.mean(result.ys[4:]) - np.mean(result.ys[:4]))  # x >= 5,000 against x < 5,000
    # the whole curve, or only its last point
    assert run_result(cells[0].run_dir, final_fraction=1.0).final_score == pytest.approx(np.mean(result.ys))
    assert run_result(cells[0].run_dir, final_fraction=0.0).final_score == result.ys[-1]
    other = run_result(cells[0].run_dir, metric="learner.default_policy.vf_loss")
    assert other.final_score == 0.5
    failed = next(c for c in cells if c.status == "failed")
    assert run_result(failed.run_dir).status == "failed" and run_result(failed.run_dir).env_steps == 5000


def test_run_result_of_an_evaluator_and_of_an_empty_folder(tmp_path):
    store = RunStore(tmp_path)
    # an evaluator without an env-step axis: its closing summary gives the score
    root = write_run(store, "eval-1", [(1, 2.0), (2, 4.0)], summary={"episode_return_mean": 3.5}, x_key="episodes")
    result = run_result(root)
    assert (result.final_score, result.xs, result.env_steps) == (3.5, (), None)
    # no summary value: the last metrics event's
    root = write_run(store, "eval-2", [(1, 2.0), (2, 4.0)], x_key="episodes")
    assert run_result(root).final_score == 4.0
    # a manifest without a status: the terminal event says it; nothing at all: unknown
    (root / "analytics.json").write_text("{}")
    assert run_result(root).status == "completed"
    empty = tmp_path / "nothing"
    empty.mkdir()
    nothing = run_result(empty)
    assert (nothing.status, nothing.final_score, nothing.xs, nothing.env_steps) == ("unknown", None, (), None)


# -- the report's files ----------------------------------------------------------------------------------
def test_scores_csv_lists_every_cell_with_the_final_scores(experiment, written):
    _, cells = experiment
    rows = list(csv.DictReader(io.StringIO((written[0] / "scores.csv").read_text())))
    assert [r["cell_id"] for r in rows] == [c.cell_id for c in cells]
    assert list(rows[0])[:10] == ["cell_id", "configuration", "env", "seed", "status", "run_id", "final_score",
                                  "env_steps", "late_change", "gain"]
    assert list(rows[0])[10:] == ["algorithm", "environment.env_id", "setting.seed"]
    for row, cell in zip(rows, cells):
        assert (row["configuration"], row["env"], int(row["seed"]), row["status"]) == \
            (cell.configuration, cell.env, cell.seed, cell.status)
        if cell.status == "completed":
            assert float(row["final_score"]) == pytest.approx(expected_final(cell.configuration, cell.env, cell.seed),
                                                              abs=1e-12)
            assert row["env_steps"] == "10000"
            assert float(row["late_change"]) == pytest.approx(
                expected_late_change(cell.configuration, cell.env, cell.seed), abs=1e-12)
            assert float(row["gain"]) == pytest.approx(expected_gain(cell.configuration, cell.env, cell.seed),
                                                       abs=1e-12)
        else:
            assert row["final_score"] == row["late_change"] == row["gain"] == ""
    failed = next(r for r in rows if r["status"] == "failed")
    assert failed["env_steps"] == "5000"
    assert rows[-1]["status"] == "pending" and rows[-1]["run_id"] == ""


def test_report_numbers_are_mosaic_stats_on_the_same_scores(written):
    markdown = (written[0] / "report.md").read_text()
    for env in ENVS:
        table = {row["configuration"]: row for row in table_after(markdown, f"### {env}")}
        for conf in CONFIGS:
            column = expected_column(conf, env)
            row = table[conf]
            assert int(row["seeds"]) == len(column)
            iqm = stats.intervals({conf: column}, stats.iqm, REPS, 0.95, stats.derived_seed(f"{env}:iqm", 3))[conf]
            assert iqm.point == pytest.approx(stats.iqm(column))
            assert row["IQM [95% CI]"] == fmt_interval(iqm)
            mean = stats.intervals({conf: column}, stats.mean, REPS, 0.95, stats.derived_seed(f"{env}:mean", 3))[conf]
            assert row["mean [95% CI]"] == fmt_interval(mean)
            assert row["median of seeds [95% CI]"].split(" ")[0] == fmt(np.median(column))
        assert table["algorithm=qmix"]["IQM [95% CI]"] == "no data" and table["algorithm=qmix"]["seeds"] == "0"

    aggregate = {row["configuration"]: row for row in table_after(markdown, "## Aggregate across envs")}
    matrices = {}
    for conf in CONFIGS:  # seeds scored in both envs, normalised per env
        seeds = [s for s in SEEDS if all((conf, env, s) != FAILED for env in ENVS)]
        matrices[conf] = np.array([[stats.normalise(expected_final(conf, env, s), *NORMALISATION[env])
                                    for env in ENVS] for s in seeds])
        assert aggregate[conf]["seeds"] == f"{len(seeds)} × 2 envs"
        for key, title in (("iqm", "IQM"), ("optimality_gap", "optimality gap"), ("median", "median of env means")):
            iv = stats.intervals({conf: matrices[conf]}, stats.METRICS[key], REPS, 0.95,
                                 stats.derived_seed(f"aggregate:{key}", 3))[conf]
            assert aggregate[conf][f"{title} [95% CI]"] == fmt_interval(iv)
    assert aggregate["algorithm=qmix"]["IQM [95% CI]"] == "no data"

    poi = table_after(markdown, "## Probability of improvement")
    assert len(poi) == 6  # every ordered pair of the 3 configurations
    row = next(r for r in poi if r["X"] == "algorithm=ippo" and r["Y"] == "algorithm=mappo")
    iv = stats.probability_of_improvement_interval(matrices["algorithm=ippo"], matrices["algorithm=mappo"], REPS, 0.95,
                                                   stats.derived_seed("poi:algorithm=ippo>algorithm=mappo", 3))
    assert row["P(X > Y) [95% CI]"] == fmt_interval(iv) and (row["seeds X"], row["seeds Y"]) == ("4", "5")
    assert next(r for r in poi if r["X"] == "algorithm=qmix")["P(X > Y) [95% CI]"] == "no data"


def test_the_late_change_says_whether_the_runs_still_improve(written):
    """Every synthetic curve rises linearly: each configuration is still improving in each env, and the table's
    numbers are MOSAIC's interval of the changes computed here from the curves themselves."""
    markdown = (written[0] / "report.md").read_text()
    rows = {(r["configuration"], r["env"]): r for r in table_after(markdown, "## Still improving at the end?")}
    for conf in CONFIGS:
        for env in ENVS:
            changes = np.array([[expected_late_change(conf, env, s)] for s in SEEDS if (conf, env, s) != FAILED])
            iv = stats.interval(changes, stats.mean, REPS, 0.95, stats.derived_seed(f"{env}:late_change:{conf}", 3))
            row = rows[(conf, env)]
            assert row["change over the last 10% [95% CI]"] == fmt_interval(iv)
            assert iv.point == pytest.approx(changes.mean()) and float(iv.low) > 0
            assert (row["seeds"], row["runs improving"], row["verdict"]) == \
                (str(len(changes)), f"{len(changes)} of {len(changes)}", "still improving")
    assert rows[("algorithm=qmix", "simple_spread_v3")]["verdict"] == "–"
    caveats = markdown.split("## What these numbers do not support")[1]
    assert "Still improving at the end: algorithm=mappo on simple_spread_v3" in caveats


def test_flat_and_falling_curves_get_their_own_verdicts(tmp_path):
    """Flat curves whose runs end a little up or a little down: no change detected (and the caveat says what that
    does not exclude). A rising curve where lower is better: getting worse."""
    store = RunStore(tmp_path / "home")
    cells = []
    for conf, slope in (("flat", 0.0), ("rising", 1.0)):
        for seed in range(5):
            end = 0.5 if seed % 2 else -0.5  # the last 10% (x >= 18,000) up for odd seeds, down for even ones
            points = [(1000.0 * k, slope * k + (end if k >= 18 else 0.0)) for k in range(1, 21)]
            root = write_run(store, f"{conf}-{seed}", points)
            cells.append(ReportCell(f"c{len(cells):03d}", conf, "e", seed, "completed", f"{conf}-{seed}", root,
                                    {"seed": seed}, "ray", "ppo", 20_000))
    higher = write_report(tmp_path / "higher", report_input(cells, normalisation=None)).read_text()
    rows = {r["configuration"]: r for r in table_after(higher, "## Still improving at the end?")}
    assert rows["flat"]["verdict"] == "no change detected" and rows["rising"]["verdict"] == "still improving"
    flat = stats.interval(np.array([[0.5 if seed % 2 else -0.5] for seed in range(5)]), stats.mean, REPS, 0.95,
                          stats.derived_seed("e:late_change:flat", 3))
    assert rows["flat"]["change over the last 10% [95% CI]"] == fmt_interval(flat)
    assert flat.point == pytest.approx(-0.1) and flat.low < 0 < flat.high
    assert "No change detected at the end (flat on e)" in higher.split("## What these numbers do not support")[1]
    lower = write_report(tmp_path / "lower", report_input(cells, normalisation=None, higher_is_better=False))
    rows = {r["configuration"]: r for r in table_after(lower.read_text(), "## Still improving at the end?")}
    assert rows["rising"]["verdict"] == "getting worse" and rows["rising"]["runs improving"] == "0 of 5"


def test_curves_that_level_off_are_told_from_curves_still_rising(tmp_path):
    """Saturating curves still creep up at the end of the budget (every run, so the change alone says "still
    improving"), but their last 10% adds about 1% of what they gained: levelled off within the default 2%, not
    within 0.5%. The share's interval is MOSAIC's interval of shares computed here from the points; a run that
    gained nothing is left out of the share and counted."""
    store = RunStore(tmp_path / "home")
    cells, shares = [], []
    for seed in range(6):
        rate = 0.24 + 0.01 * seed
        points = [(1000.0 * k, 50.0 * (1.0 - math.exp(-rate * k))) for k in range(1, 21)]
        if seed == 5:
            points = [(x, 3.0 - 0.1 * k + 0.4 * (k >= 18)) for k, (x, _) in enumerate(points, start=1)]
        else:
            ys = [y for _, y in points]
            final = sum(ys[17:]) / 3  # x >= 18,000
            late = final - sum(ys[15:17]) / 2  # 16,000 <= x < 18,000
            shares.append(late / (final - ys[0]))
        cells.append(ReportCell(f"c{seed:03d}", "saturating", "e", seed, "completed", f"s{seed}",
                                write_run(store, f"s{seed}", points), {"seed": seed}, "ray", "ppo", 20_000))
    assert all(0.005 < share < 0.02 for share in shares)
    markdown = write_report(tmp_path / "r", report_input(cells, normalisation=None)).read_text()
    row = table_after(markdown, "## Still improving at the end?")[0]
    iv = stats.interval(np.array(shares)[:, None], stats.mean, REPS, 0.95, stats.derived_seed("e:late_share:saturating", 3))
    assert row["share of the whole gain [95% CI]"] == \
        f"{fmt(100 * iv.point)}% [{fmt(100 * iv.low)}%, {fmt(100 * iv.high)}%] (1 without a gain left out)"
    assert (row["runs improving"], row["verdict"]) == ("6 of 6", "levelled off")
    caveats = markdown.split("## What these numbers do not support")[1]
    assert "Levelled off, not flat: saturating on e" in caveats and "Still improving at the end" not in caveats
    assert "added less than 2% of the runs' whole gain (the whole 95% interval" in markdown
    strict = write_report(tmp_path / "strict", report_input(cells, normalisation=None, level_within=0.005)).read_text()
    assert table_after(strict, "## Still improving at the end?")[0]["verdict"] == "still improving"
    assert "Still improving at the end: saturating on e" in strict


def test_a_run_continued_from_a_checkpoint_is_read_with_the_runs_before_it(tmp_path):
    """Attempt 1 logged 1k..6k and saved a checkpoint at 4k; attempt 2 went on from it (5k..10k): the curve is
    attempt 1's up to the checkpoint, then attempt 2's; without the checkpoint's steps, up to attempt 2's start."""
    store = RunStore(tmp_path / "home")
    first = write_run(store, "a1", [(1000.0 * k, float(k)) for k in range(1, 7)], status="failed")
    second = write_run(store, "a2", [(1000.0 * k, 10.0 * k) for k in range(5, 11)])
    joined = run_result(second, before=((first, 4000.0),))
    assert joined.xs == (1000.0, 2000.0, 3000.0, 4000.0, 5000.0, 6000.0, 7000.0, 8000.0, 9000.0, 10000.0)
    assert joined.ys == (1.0, 2.0, 3.0, 4.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0)
    assert joined.final_score == 95.0 and joined.late_change == 95.0 - 80.0 and joined.status == "completed"
    assert run_result(second, before=((first, None),)).xs == joined.xs  # cut at attempt 2's first point
    cells = [ReportCell("c000", "x", "e", 0, "completed", "a2", second, {}, "ray", "ppo", 10_000,
                        before=((first, 4000.0),))]
    markdown = write_report(tmp_path / "r", report_input(cells, normalisation=None)).read_text()
    assert "Continued from a checkpoint after an interruption: c000 (from a1 at 4000 env steps)" in markdown


def test_a_continued_runs_chain_is_followed_through_an_earlier_experiments_runs(tmp_path):
    """The cell's attempt continued from run old-a2 of an earlier experiment (continue_from), which itself had
    continued from old-a1 after an interruption: the chain goes back to old-a1, which started from scratch, each
    link cut at the checkpoint the next run started from; a chain that loops stops before visiting a run twice."""
    from mosaic.experiments.collect import _continued_from
    from mosaic.experiments.store import Attempt
    from mosaic.runs import write_json_atomic

    store = RunStore(tmp_path / "home")
    runs = {name: write_run(store, name, [(1000.0 * k, float(k)) for k in range(a, b)])
            for name, a, b in (("old-a1", 1, 6), ("old-a2", 5, 11), ("new-a1", 9, 21))}

    def link(run: str, checkpoint_at: int, restore_from: str = "") -> str:
        path = str(runs[run] / "checkpoints" / f"checkpoint_{checkpoint_at}")
        store.get(run).update_manifest(checkpoints=[{"path": path, "timesteps_total": checkpoint_at}])
        write_json_atomic(runs[run] / "config.json", {"worker": "ray", "checkpoint": {"restore_from": restore_from}})
        return path

    first = link("old-a1", 4000)
    second = link("old-a2", 8000, restore_from=first)
    attempt = Attempt("new-a1", 1, "completed", restored_from=second)
    assert _continued_from(store, [attempt]) == ((runs["old-a1"], 4000.0), (runs["old-a2"], 8000.0))
    joined = run_result(runs["new-a1"], before=_continued_from(store, [attempt]))
    assert joined.xs == tuple(1000.0 * k for k in range(1, 21)) and joined.ys[0] == 1.0
    link("old-a1", 4000, restore_from=second)  # a loop: old-a1 said to start from old-a2's checkpoint
    assert _continued_from(store, [attempt]) == ((runs["old-a1"], 4000.0), (runs["old-a2"], 8000.0))
    assert _continued_from(store, [Attempt("new-a1", 1, "completed")]) == ()


def test_a_reference_taken_from_the_results_is_the_best_configurations_mean(experiment):
    """``reference: best``: per env, the highest mean score of a configuration there (the lowest when lower is
    better); the report names it and says the normalised numbers are relative to it."""
    _, cells = experiment
    data = report_input(cells, normalisation={env: (0.0, None) for env in ENVS})
    a = analysis.analyse(data)
    assert a.best_of == {env: "algorithm=mappo" for env in ENVS}
    for env in ENVS:
        best = float(np.mean([expected_final("algorithm=mappo", env, s) for s in SEEDS]))
        assert a.normalisation[env] == (0.0, pytest.approx(best, rel=1e-12))
        assert float(np.mean(analysis.env_matrix(a, "algorithm=mappo", env, normalised=True))) == \
            pytest.approx(1.0, rel=1e-12)
    markdown = tables.render_markdown(a)
    assert f"reference {fmt(a.normalisation['simple_spread_v3'][1])} (best: the mean score of algorithm=mappo)" \
        in markdown and "Reference taken from the results (simple_spread_v3: algorithm=mappo" in markdown
    assert analysis.analyse(dataclasses.replace(data, higher_is_better=False)).best_of == \
        {env: "algorithm=ippo" for env in ENVS}


def test_report_states_what_was_run_and_what_is_not_supported(experiment, written):
    markdown = (written[0] / "report.md").read_text()
    runs = {row["configuration"]: row for row in table_after(markdown, "## What was run")}
    assert runs["algorithm=mappo"]["seeds"] == "5 (0, 1, 2, 3, 4)" and runs["algorithm=mappo"]["budget"] == "10000"
    assert runs["algorithm=ippo"]["seeds scored"] == "5" and runs["algorithm=qmix"]["seeds scored"] == "0"
    assert runs["algorithm=mappo"]["settings"] == "algorithm=mappo"
    assert runs["algorithm=qmix"]["settings"] == "algorithm=qmix"  # its one cell's env and seed are not settings
    assert "- ray (20 runs): python 3.11.9, ray 2.40.0, torch 2.13.0" in markdown
    # the score's units, from the one place they are written down (mosaic.experiments.results.MOSAIC_UNITS)
    assert ("- Score of a run: `episode_return_mean` (the return summed over agents, over env steps; higher is "
            "better)") in markdown
    caveats = markdown.split("## What these numbers do not support")[1]
    assert "Few seeds" in caveats and "fewer than 10 seeds" in caveats
    assert "No data: algorithm=qmix" in caveats
    assert "algorithm=ippo: seeds 4 lack a score in some env" in caveats
    assert "Budget: the same for every cell (10000)" in caveats
    missing = {row["cell"]: row for row in table_after(markdown, "### Cells without a score")}
    assert set(missing) == {"c019", "c020"}  # the failed run and the pending cell
    assert missing["c019"]["status"] == "failed" and missing["c020"]["why left out"] == "status pending"


def test_plots_are_png_files(written):
    for name in plots.PLOTS:
        data = (written[0] / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n", name
        assert len(data) > 8_000, f"{name}: only {len(data)} bytes"


def test_marl_eval_json_has_marl_evals_raw_data_shape(written):
    data = json.loads((written[0] / "marl_eval.json").read_text())
    assert list(data) == ["mpe"] and list(data["mpe"]) == list(ENVS)
    for env, algorithms in data["mpe"].items():
        assert list(algorithms) == list(CONFIGS)  # qmix has no run
        for conf, runs in algorithms.items():
            seeds = [s for s in SEEDS if (conf, env, s) != FAILED]
            assert list(runs) == [f"seed_{s}" for s in seeds]
            for seed, run in zip(seeds, runs.values()):
                keys = list(run)
                assert keys == [f"step_{k}" for k in range(len(STEPS))] + ["absolute_metrics"]
                for k, x in enumerate(STEPS):
                    step = run[f"step_{k}"]
                    assert set(step) == {"step_count", "episode_return_mean"} and step["step_count"] == x
                    assert step["episode_return_mean"] == pytest.approx([curve_value(conf, env, seed, k + 1)])
                assert run["absolute_metrics"] == {"episode_return_mean": [pytest.approx(
                    expected_final(conf, env, seed), abs=1e-12)]}


def test_same_input_gives_the_same_bytes(written):
    first, second = written
    for name in ("report.md", "scores.csv", "marl_eval.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    assert sorted(p.name for p in first.iterdir()) == sorted(p.name for p in second.iterdir())


def test_a_failing_write_leaves_no_half_report(experiment, tmp_path, monkeypatch):
    _, cells = experiment

    def broken(_analysis, path):
        path.write_bytes(b"half a plot")
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(plots.PLOTTERS, "performance_profiles.png", broken)
    with pytest.raises(RuntimeError, match="disk on fire"):
        write_report(tmp_path / "report", report_input(cells))
    assert list(tmp_path.iterdir()) == []  # neither the report nor its staging folder

    monkeypatch.undo()
    previous = write_report(tmp_path / "report", report_input(cells, name="before")).read_bytes()
    monkeypatch.setitem(plots.PLOTTERS, "performance_profiles.png", broken)
    with pytest.raises(RuntimeError):
        write_report(tmp_path / "report", report_input(cells, name="after"))
    assert (tmp_path / "report" / "report.md").read_bytes() == previous  # the old report, whole
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_a_score_other_than_the_return_is_said_to_keep_its_workers_units(experiment, tmp_path):
    _, cells = experiment
    metric = "learner.default_policy.vf_loss"
    markdown = write_report(tmp_path / "loss", report_input(cells, normalisation=None, metric=metric,
                                                            higher_is_better=False)).read_text()
    assert (f"- Score of a run: `{metric}` (in the units its workers log it, not converted; lower is better)"
            in markdown)
    assert "summed over agents" not in markdown.split("## What was run")[1].split("\n")[2]


def test_a_raw_lower_is_better_report_with_different_budgets(experiment, tmp_path):
    _, cells = experiment
    cells = [dataclasses.replace(c, budget=20_000) if c.configuration == "algorithm=ippo" else c for c in cells]
    path = write_report(tmp_path / "raw", report_input(cells, normalisation=None, higher_is_better=False))
    markdown = path.read_text()
    assert "optimality gap" not in markdown
    assert "Raw units: no normalisation was given" in markdown
    caveats = markdown.split("## What these numbers do not support")[1]
    assert "the aggregate across envs is in raw units" in caveats
    assert "Budgets differ (algorithm=mappo: 10000; algorithm=ippo: 20000; algorithm=qmix: 10000)" in caveats
    # lower is better: the configuration with the lower returns wins every pairing
    poi = table_after(markdown, "## Probability of improvement")
    row = next(r for r in poi if r["X"] == "algorithm=ippo" and r["Y"] == "algorithm=mappo")
    assert row["P(X > Y) [95% CI]"] == "1 [1, 1]"
    assert "(lower scores count as better)" in markdown
    assert "fraction of runs" not in markdown  # the plots carry the profiles
    assert math.isfinite(float(table_after(markdown, "### simple_tag_v3")[0]["IQM [95% CI]"].split(" ")[0]))


def test_normalisation_must_cover_every_env(experiment, tmp_path):
    _, cells = experiment
    with pytest.raises(ValueError, match="simple_tag_v3"):
        write_report(tmp_path / "r", report_input(cells, normalisation={"simple_spread_v3": (0.0, 10.0)}))
    assert not (tmp_path / "r").exists()


def test_close_configurations_get_no_ranking_claim(experiment, tmp_path):
    """Seeds of one configuration split in two: their intervals overlap, so nothing ranks them."""
    _, cells = experiment
    split = [dataclasses.replace(c, configuration=f"half={c.seed % 2}") for c in cells
             if c.configuration == "algorithm=mappo" and c.env == "simple_spread_v3"]
    markdown = write_report(tmp_path / "r", report_input(split, normalisation=None)).read_text()
    caveats = markdown.split("## What these numbers do not support")[1]
    assert "simple_spread_v3, IQM: the intervals of half=0 and half=1 overlap: no ranking" in caveats
    assert "Probability of improvement: the intervals of half=0 vs half=1 include 0.5" in caveats
    assert "One env (simple_spread_v3)" in caveats
    assert "Cells without a score" in markdown and "None: every cell completed with a score." in markdown
