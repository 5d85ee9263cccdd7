"""``report.md``: what was run, the tables of results with their intervals, the late change, and the caveats."""

from __future__ import annotations

import json
from typing import Any, Callable

from mosaic.experiments.report.analysis import Analysis, cell_budgets, metric_set, verdict
from mosaic.experiments.report.caveats import caveats
from mosaic.experiments.report.formatting import fmt, fmt_interval, fmt_percent_interval, fmt_steps, json_value
from mosaic.experiments.report.inputs import ReportCell
from mosaic.experiments.report.plots import PLOTS
from mosaic.experiments.results import MOSAIC_RETURN, MOSAIC_UNITS, STEP_UNITS
from mosaic.run_status import JobState
from mosaic.scoring import stats


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _shared_settings(cells: list[ReportCell]) -> dict[str, str]:
    """The settings every one of ``cells`` has, with the same value."""
    if not cells:
        return {}
    shared = {k: json_value(v) for k, v in cells[0].settings.items()}
    for cell in cells[1:]:
        shared = {k: v for k, v in shared.items() if k in cell.settings and json_value(cell.settings[k]) == v}
    return shared


def _configuration_settings(all_cells: list[ReportCell], configuration: str) -> dict[str, str]:
    """A configuration's own settings: those its cells share, less any that vary within some
    configuration (the env and the seed), also where a configuration has a single cell."""
    by_conf: dict[str, list[ReportCell]] = {}
    for cell in all_cells:
        by_conf.setdefault(cell.configuration, []).append(cell)
    varying = {k for cells in by_conf.values() for cell in cells for k in cell.settings
               if k not in _shared_settings(cells)}
    return {k: v for k, v in _shared_settings(by_conf.get(configuration, [])).items() if k not in varying}


def _versions_by_worker(a: Analysis) -> dict[str, dict[tuple[tuple[str, str], ...], int]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], int]] = {}
    for s in a.scored:
        if s.result is not None and s.result.versions and s.cell.status not in (JobState.PENDING, JobState.QUEUED):
            worker = s.result.worker or s.cell.worker
            seen = out.setdefault(worker, {})
            seen[s.result.versions] = seen.get(s.result.versions, 0) + 1
    return out


def _what_was_run(a: Analysis) -> list[str]:
    d = a.data
    direction = "higher is better" if d.higher_is_better else "lower is better"
    units = (f"{MOSAIC_UNITS.describe()}; " if d.metric == MOSAIC_RETURN
             else "in the units its workers log it, not converted; ")
    lines = [f"# Experiment report: {d.name}", "",
             "## What was run", "",
             f"- Score of a run: `{d.metric}` ({units}{direction}), averaged over the last "
             f"{fmt(100 * d.final_fraction)}% of its env steps (at least its last logged value).",
             f"- Levelled off: the last {fmt(100 * d.final_fraction)}% of the env steps added less than "
             f"{fmt(100 * d.level_within)}% of the runs' whole gain (the whole {fmt(100 * d.confidence)}% interval of "
             "the seeds' mean share; `score.level_within`).",
             f"- Intervals: {fmt(100 * d.confidence)}% stratified bootstrap percentile intervals "
             f"({d.reps} resamples of the seeds within each env, seed {d.seed}).",
             _cells_line(a), ""]
    if d.joined:
        names = list(d.joined)
        counts = {n: sum(c.cell_id.startswith(f"{n}/") for c in d.cells) for n in names}
        lines[-1:-1] = [f"- A joint report of {len(names)} experiments: "
                        + ", ".join(f"{n} ({counts[n]} cells)" for n in names)
                        + f". Cells are named EXPERIMENT/CELL; the score is the same in each; the intervals' "
                        f"settings (resamples, confidence, seed) are {names[0]}'s."]
    rows = []
    for conf in a.configurations:
        cells = [c for c in d.cells if c.configuration == conf]
        seeds = sorted({c.seed for c in cells})
        scored = sorted({s.cell.seed for s in a.scored if s.cell.configuration == conf and s.excluded is None})
        settings = _configuration_settings(d.cells, conf)
        rows.append([conf, ", ".join(sorted({c.worker for c in cells})), ", ".join(sorted({c.algorithm for c in cells})),
                     f"{len(seeds)} ({', '.join(map(str, seeds))})", f"{len(scored)}",
                     ", ".join("–" if b is None else str(b) for b in cell_budgets(cells)),
                     "; ".join(f"{k}={v}" for k, v in settings.items()) or "–"])
    lines += _table(["configuration", "worker", "algorithm", "seeds", "seeds scored", "budget", "settings"], rows)
    versions = _versions_by_worker(a)
    if versions:
        lines += ["", "Workers and their versions (from the run manifests):", ""]
        for worker in sorted(versions):
            for pins, count in sorted(versions[worker].items()):
                lines.append(f"- {worker} ({count} run{'s' if count != 1 else ''}): "
                             + ", ".join(f"{p} {v}" for p, v in pins))
    specs = d.joined or {"": d.spec}
    for name, spec in specs.items():
        title = f"Experiment {name}'s spec" if name else "The experiment's spec"
        lines += ["", f"<details><summary>{title}</summary>", "", "```json",
                  json.dumps(spec, indent=2, sort_keys=True, default=str), "```", "", "</details>"]
    return lines + [""]


def _cells_line(a: Analysis) -> str:
    """How many cells the experiment has and how many scored; how many runs were read from marl-eval files."""
    ran = [s for s in a.scored if s.cell.read is None]
    read = len(a.scored) - len(ran)
    return (f"- Cells: {len(ran)} ({sum(s.excluded is None for s in ran)} scored)"
            + (f"; and {read} runs read from marl-eval files, which MOSAIC did not run (below)" if read else "")
            + f"; envs: {', '.join(a.envs)}.")


def _marl_eval_section(a: Analysis) -> list[str]:
    """What each joined marl-eval file is and how its runs were scored (nothing when none joined)."""
    d = a.data
    if not d.marl_eval:
        return []
    share = fmt(100 * d.final_fraction)
    lines = ["## Read from marl-eval files", "",
             "MOSAIC did not run these contenders: each is an algorithm of a marl-eval file, its seeds scored as the "
             f"experiment's runs are (the mean of the file's metric over its step points in the last {share}% of its "
             "steps, at least the last one) and compared with the same metrics and intervals. A marl-eval file "
             "carries no units: they are as the command was told, and a file joins only in the units of this "
             f"experiment's scores, {MOSAIC_UNITS.describe()} (`{MOSAIC_RETURN}`). What the file's producer ran "
             "(settings, budget, how many episodes each value averages, evaluation or training episodes) is not in "
             "the file and not checked here. Their curves (a seed's step points) are drawn in sample_efficiency.png "
             "with the experiment's; a seed scored from `absolute_metrics` has none.", ""]
    for source in d.marl_eval:
        lines += [f"- `{source.path}`: metric `{source.metric}`; units as given: {source.units.describe()} "
                  f"(`--marl-eval-return {source.units.returns}`, `--marl-eval-steps {source.units.steps}`)."
                  + (f" Left out, matching no env of this report: {', '.join(source.left_out)}."
                     if source.left_out else ""), ""]
        rows = []
        for where, algorithm, conf, env in source.joined:
            cells = [s for s in a.scored if s.cell.configuration == conf and s.cell.env == env]
            scored = [s for s in cells if s.excluded is None]
            curves = [s.result for s in scored if s.result is not None and s.result.xs]
            counts = sorted({len(r.xs) for r in curves})
            last = sorted({r.xs[-1] for r in curves})
            absolute = sum(1 for s in scored if s.result is not None and not s.result.xs)
            rows.append([conf, f"{where}/{algorithm}", env,
                         f"{len(scored)} of {len(cells)} ({', '.join(str(s.cell.seed) for s in scored)})",
                         "–" if not counts else "–".join(dict.fromkeys(str(c) for c in (counts[0], counts[-1]))),
                         "–" if not last else "–".join(dict.fromkeys(fmt_steps(x) for x in (last[0], last[-1]))),
                         f"final {share}% of the step points" if not absolute else
                         f"absolute_metrics for {absolute} seed(s) without step points"
                         + ("" if absolute == len(scored) else f", final {share}% of the step points for the rest")])
        lines += _table(["contender", "in the file", "env", "seeds scored", "step points per seed",
                         f"last step ({STEP_UNITS[source.units.steps]})", "score"], rows)
        lines.append("")
    return lines


def _metric_table(intervals: dict[str, dict[str, stats.Interval]], titles: dict[str, str],
                  configurations: list[str], seeds_label: Callable[[str], str], pct: str) -> list[str]:
    header = ["configuration", "seeds"] + [f"{title} [{pct}% CI]" for title in titles.values()]
    rows = []
    for conf in configurations:
        values = [fmt_interval(intervals[k][conf]) if conf in intervals[k] else "no data" for k in titles]
        rows.append([conf, seeds_label(conf), *values])
    return _table(header, rows)


def _results(a: Analysis) -> list[str]:
    d = a.data
    pct = fmt(100 * d.confidence)
    lines = ["## Results per env", "",
             f"Final scores in raw units; each cell: point estimate [{pct}% interval]; `seeds`: how many "
             "seeds each number rests on." + (" The optimality gap is on normalised scores (1 = reference)."
                                              if a.normalised else ""), ""]
    for env in a.envs:
        titles = {k: t for k, (t, _) in metric_set(a.normalised, per_env=True).items()}
        lines += [f"### {env}", ""]
        lines += _metric_table(a.env_metrics[env], titles, a.configurations,
                               lambda c, env=env: str(len(a.included.get((c, env), []))), pct)
        lines.append("")
    lines += ["## Aggregate across envs", ""]
    if a.normalised:
        norm = "; ".join(f"{e}: random {fmt(r)}" + (f" (measured: the mean score of {a.measured[e]} random-play "
                                                       "runs)" if e in a.measured else "") + f", reference {fmt(ref)}"
                         + (f" (best: the mean score of {a.best_of[e]})" if e in a.best_of else "")
                         for e, (r, ref) in ((e, a.normalisation[e]) for e in a.envs))  # type: ignore[index]
        lines.append(f"Normalised scores: 0 = random, 1 = reference ({norm}).")
    elif a.unmeasured:
        lines.append(f"Raw units: {', '.join(a.unmeasured)} could not be normalised (a score to be measured has no "
                     "scored run, or the random score equals the reference), so nothing is normalised.")
    else:
        lines.append("Raw units: no normalisation was given, so numbers pooled across envs mix their "
                     "scales and are only meaningful per env (above)." if len(a.envs) > 1 else
                     "Raw units (one env: the aggregate is that env's).")
    lines += [f"Rows: the seeds scored in every env ({len(a.envs)} env{'s' if len(a.envs) != 1 else ''} each); "
              "`seeds` counts them.", ""]
    titles = {k: t for k, (t, _) in metric_set(a.normalised, per_env=False).items()}
    lines += _metric_table(a.aggregate, titles, a.configurations,
                           lambda c: f"{len(a.aggregate_seeds[c])} × {len(a.envs)} envs", pct)
    lines += ["", "## Probability of improvement", "",
              "P(X > Y): the chance that a run of X outscores a run of Y on the same env (ties count half), "
              f"averaged over envs{' (lower scores count as better)' if a.direction < 0 else ''}; "
              "0.5 = neither tends to win. Unaffected by each env's scale.", ""]
    rows = []
    for x in a.configurations:
        for y in a.configurations:
            if x == y:
                continue
            iv = a.poi.get((x, y))
            rows.append([x, y, fmt_interval(iv) if iv else "no data",
                         len(a.aggregate_seeds[x]), len(a.aggregate_seeds[y])])
    lines += _table(["X", "Y", f"P(X > Y) [{pct}% CI]", "seeds X", "seeds Y"], rows) if rows else \
        ["One configuration: nothing to compare."]
    return lines + [""]


def _late_section(a: Analysis) -> list[str]:
    d = a.data
    pct, share = fmt(100 * d.confidence), fmt(100 * d.final_fraction)
    tol = fmt(100 * d.level_within)
    lines = ["## Still improving at the end?", "",
             f"Each run's change at the end of its budget: its final score (the last {share}% of its env steps) "
             f"minus its mean over the {share}% before, in raw units; the {pct}% interval is a stratified bootstrap "
             "of the seeds' mean change. The same change as a share of the run's whole gain (its final score minus "
             "its first logged value; runs that gained nothing are left out of it). "
             f"*Levelled off*: the whole interval of that share lies within ±{tol}% (`score.level_within`): the "
             "curves may still creep, but the scores above are near where they end at these settings. Otherwise: "
             "*still improving* when the whole interval of the change lies on the better side of 0, so the scores "
             "above are at this budget, not where the curves level off; *no change detected* when 0 is inside it "
             "(the curve may still move by less than the interval's width); *getting worse* when it lies on the "
             "worse side.", ""]
    rows = []
    for env in a.envs:
        for conf in a.configurations:
            found = a.late.get((conf, env))
            if found is None:
                rows.append([conf, env, 0, "no data", "–", "–", "–"])
                continue
            iv, better, n = found
            gained = a.share.get((conf, env))
            share_text = "–" if gained is None else fmt_percent_interval(gained[0]) + (
                f" ({gained[1]} without a gain left out)" if gained[1] else "")
            rows.append([conf, env, n, fmt_interval(iv), f"{better} of {n}", share_text, verdict(a, (conf, env))])
    lines += _table(["configuration", "env", "seeds", f"change over the last {share}% [{pct}% CI]",
                     "runs improving", f"share of the whole gain [{pct}% CI]", "verdict"], rows)
    return lines + [""]


def render_markdown(a: Analysis) -> str:
    lines = _what_was_run(a) + _marl_eval_section(a) + _results(a) + _late_section(a)
    lines += ["## What these numbers do not support", ""]
    lines += [f"- {c}" for c in caveats(a)]
    excluded = [s for s in a.scored if s.excluded is not None]
    lines += ["", "### Cells without a score", ""]
    if excluded:
        lines += _table(["cell", "configuration", "env", "seed", "status", "run", "why left out"],
                        [[s.cell.cell_id, s.cell.configuration, s.cell.env, s.cell.seed, s.cell.status,
                          s.cell.run_id or "–", s.excluded] for s in excluded])
    else:
        lines.append("None: every cell completed with a score.")
    lines += ["", "Files: " + ", ".join(f"`{name}`" for name in ("scores.csv", "marl_eval.json", *PLOTS)) + "."]
    return "\n".join(lines) + "\n"


def terminal_summary(a: Analysis) -> str:
    """The report's main table for the terminal (what ``mosaic experiment report`` prints): per configuration the
    seeds behind it, its IQM and mean with their intervals (the aggregate's: the env's own with one env) and the
    verdict on its curves' ends. Every number is one ``report.md`` states."""
    d = a.data
    pct = fmt(100 * d.confidence)
    direction = "higher is better" if d.higher_is_better else "lower is better"
    scale = "normalised: 0 = random, 1 = reference" if a.normalised else "raw units"
    where = f"{a.envs[0]}" if len(a.envs) == 1 else f"aggregate over {len(a.envs)} envs"
    lines = [f"experiment {d.name}: score `{d.metric}` ({direction}; final {fmt(100 * d.final_fraction)}% of each "
             f"run's env steps), {where}, {scale}; [{pct}% intervals]"]
    rows = []
    for conf in a.configurations:
        iqm, mean = a.aggregate.get("iqm", {}).get(conf), a.aggregate.get("mean", {}).get(conf)
        verdicts = {env: verdict(a, (conf, env)) for env in a.envs if (conf, env) in a.late}
        if len(set(verdicts.values())) == 1 or len(a.envs) == 1:
            said = next(iter(verdicts.values()), "too few points for a verdict")
        else:
            said = "; ".join(f"{env}: {verdicts.get(env, 'too few points')}" for env in a.envs)
        rows.append([conf, str(len(a.aggregate_seeds[conf])), fmt_interval(iqm) if iqm else "no data",
                     fmt_interval(mean) if mean else "no data", said])
    header = ["CONFIGURATION", "SEEDS", "IQM", "MEAN", "VERDICT"]
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    for row in [header, *rows]:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    unscored = sum(s.excluded is not None for s in a.scored)
    if unscored:
        lines.append(f"{unscored} of {len(a.scored)} cells without a score (report.md lists them and why)")
    return "\n".join(lines)
