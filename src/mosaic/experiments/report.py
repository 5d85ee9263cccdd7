"""An experiment's report: what was run, what it scored with honest intervals, and what that does not show.

:func:`write_report` turns the cells of an experiment (one run each: a configuration on an env with a
seed) into a folder::

    report.md                     what was run; per-env and aggregate tables with 95% intervals and the
                                  seeds behind each number; probability of improvement for every ordered
                                  pair; what these numbers do not support
    scores.csv                    one row per cell, failed and pending ones included
    marl_eval.json                the final scores and curves in marl-eval's raw-data format
    sample_efficiency.png         IQM over env steps with its band, one panel per env
    aggregates.png                the aggregate metrics' intervals
    performance_profiles.png      the fraction of runs above each score
    probability_of_improvement.png

Each run's score is its final score (:mod:`mosaic.experiments.results`). Every interval is a stratified
bootstrap percentile interval (:mod:`mosaic.scoring.stats`) drawn from a seed derived from the report's seed and
what is estimated (``"<env>:<metric>"``, ``"aggregate:<metric>"``, ``"poi:<x>><y>"``, then the
configuration's label), so the same input gives the same files, byte for byte (the PNGs aside). The
folder is written beside its final place and renamed into it: a failure leaves the previous report, or
nothing, never half of one.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mosaic.scoring import stats
from mosaic.experiments.results import RunResult, run_result
from mosaic.runs import staged_folder

#: Seeds below which bootstrap intervals are too narrow to trust (they cover less than they state).
FEW_SEEDS = 10
#: x values a learning curve is drawn at (evenly spaced over the range every run covers).
CURVE_POINTS = 50
#: Thresholds a performance profile is drawn at.
PROFILE_POINTS = 101
PLOTS = ("sample_efficiency.png", "aggregates.png", "performance_profiles.png", "probability_of_improvement.png")


@dataclass
class ReportCell:
    cell_id: str  # "c000", ...
    configuration: str  # label of the varied settings except env and seed, e.g. "worker=ray algorithm=mappo"
    env: str  # task label (e.g. "simple_spread_v3")
    seed: int
    status: str  # completed / failed / cancelled / pending / running
    run_id: str | None
    run_dir: Path | None
    settings: dict[str, Any]  # axis name -> value for this cell
    worker: str
    algorithm: str
    budget: int | None  # total_timesteps or episodes
    #: the runs this cell's run continued from a checkpoint of, oldest first, with the checkpoint's env steps
    before: tuple[tuple[Path, float | None], ...] = ()
    #: a random-play run that measures its env's random score (the spec's ``normalise``: ``random: measure``)
    baseline: bool = False


@dataclass
class ReportInput:
    name: str
    spec: dict[str, Any]
    cells: list[ReportCell]
    metric: str = "episode_return_mean"
    higher_is_better: bool = True
    #: env -> (random score, reference score); a random score of None: the mean score of the env's baseline cells;
    #: a reference of None: the best configuration's mean score on the env
    normalisation: dict[str, tuple[float | None, float | None]] | None = None
    reps: int = 2000
    confidence: float = 0.95
    seed: int = 0
    final_fraction: float = 0.1  # a run's final score: its mean metric over this last part of its env steps
    #: a curve has levelled off when its last window adds less than this share of its whole gain (either way)
    level_within: float = 0.02
    #: a joint report (``--with``): every experiment's spec by name, the first one's (also ``spec``) first
    joined: dict[str, dict[str, Any]] = field(default_factory=dict)


# -- the numbers ------------------------------------------------------------------------------------
@dataclass
class _Scored:
    """A cell with what its run gave, and why it is left out of the statistics (None: it is in)."""

    cell: ReportCell
    result: RunResult | None
    excluded: str | None

    @property
    def score(self) -> float:
        assert self.result is not None and self.result.final_score is not None
        return self.result.final_score


@dataclass
class _Analysis:
    data: ReportInput
    scored: list[_Scored]
    configurations: list[str]
    envs: list[str]
    #: (configuration, env) -> the included cells, by seed
    included: dict[tuple[str, str], list[_Scored]]
    #: configuration -> the seeds scored in every env (the aggregate's rows)
    aggregate_seeds: dict[str, list[int]]
    normalised: bool
    #: +1 when higher scores are better (always, once normalised), else -1
    direction: int
    env_metrics: dict[str, dict[str, dict[str, stats.Interval]]] = field(default_factory=dict)
    aggregate: dict[str, dict[str, stats.Interval]] = field(default_factory=dict)
    poi: dict[tuple[str, str], stats.Interval] = field(default_factory=dict)
    #: (configuration, env) -> (mean late change with its interval, runs that improved, runs with a change)
    late: dict[tuple[str, str], tuple[stats.Interval, int, int]] = field(default_factory=dict)
    #: (configuration, env) -> (mean share of the whole gain its last window added, with its interval; runs without
    #: a gain in the better direction, left out of it). No entry: no run has both a late change and a gain.
    share: dict[tuple[str, str], tuple[stats.Interval, int]] = field(default_factory=dict)
    #: env -> (random score, reference score) as used, measured random scores filled in (None: raw units)
    normalisation: dict[str, tuple[float, float]] | None = None
    #: env -> how many random-play runs its measured random score is the mean of
    measured: dict[str, int] = field(default_factory=dict)
    #: env -> the configuration whose mean score is its reference (``reference: best``)
    best_of: dict[str, str] = field(default_factory=dict)
    #: envs that cannot be normalised: a score to measure has no scored run, or random = reference
    unmeasured: list[str] = field(default_factory=list)


def _metric_set(normalised: bool, per_env: bool) -> dict[str, tuple[str, Callable[[np.ndarray], Any]]]:
    """Metric key -> (column title, function). Within one env there is one task: the median is the seeds'."""
    out: dict[str, tuple[str, Callable[[np.ndarray], Any]]] = {"mean": ("mean", stats.mean)}
    if per_env:
        out["median"] = ("median of seeds", lambda s: np.median(s, axis=(-2, -1)))
    else:
        out["median"] = ("median of env means", stats.median)
    out["iqm"] = ("IQM", stats.iqm)
    if normalised:
        out["optimality_gap"] = ("optimality gap", stats.optimality_gap)
    return out


def _score_cells(data: ReportInput) -> list[_Scored]:
    out = []
    for cell in data.cells:
        result = None
        if cell.run_dir is not None and Path(cell.run_dir).is_dir():
            result = run_result(cell.run_dir, metric=data.metric, final_fraction=data.final_fraction,
                                before=cell.before)
        if cell.status != "completed":
            excluded = f"status {cell.status}"
        elif result is None:
            excluded = "completed, but its run folder is missing"
        elif result.final_score is None or not math.isfinite(result.final_score):
            excluded = f"completed, but logged no {data.metric}"
        else:
            excluded = None
        out.append(_Scored(cell, result, excluded))
    return out


def _unique(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def analyse(data: ReportInput) -> _Analysis:
    """Every number the report states (computed once, written by the functions below)."""
    if not data.cells:
        raise ValueError("report: the experiment has no cells")
    envs = _unique([c.env for c in data.cells])
    normalisation = data.normalisation or None
    if normalisation is not None:
        missing = [e for e in envs if e not in normalisation]
        if missing:
            raise ValueError(f"normalisation: no (random, reference) scores for {', '.join(missing)}; "
                             "give them for every env, or none")
    scored = _score_cells(data)
    configurations = _unique([c.configuration for c in data.cells])
    included: dict[tuple[str, str], list[_Scored]] = {}
    for s in scored:
        if s.excluded is None:
            included.setdefault((s.cell.configuration, s.cell.env), []).append(s)
    for key in included:
        included[key].sort(key=lambda s: (s.cell.seed, s.cell.cell_id))
    aggregate_seeds = {}
    for conf in configurations:
        per_env = [{s.cell.seed for s in included.get((conf, env), [])} for env in envs]
        aggregate_seeds[conf] = sorted(set.intersection(*per_env)) if per_env else []
    normalisation, measured, best_of, unmeasured = _normalisation_used(data, scored)
    analysis = _Analysis(data, scored, configurations, envs, included, aggregate_seeds,
                         normalised=normalisation is not None,
                         direction=1 if (normalisation is not None or data.higher_is_better) else -1,
                         normalisation=normalisation, measured=measured, best_of=best_of, unmeasured=unmeasured)
    _estimate(analysis)
    return analysis


def _normalisation_used(data: ReportInput, scored: list[_Scored]
                           ) -> tuple[dict[str, tuple[float, float]] | None, dict[str, int], dict[str, str], list[str]]:
    """``data.normalisation`` with what the experiment measures filled in: a random score of None becomes the mean
    score of that env's scored random-play runs, a reference of None the best mean score of a configuration there
    (random play aside). Also returns env -> random-play runs measured, env -> the configuration taken as
    reference, and the envs that cannot be normalised (nothing scored, or random = reference): then None."""
    if data.normalisation is None:
        return None, {}, {}, []
    out: dict[str, tuple[float, float]] = {}
    measured: dict[str, int] = {}
    best_of: dict[str, str] = {}
    unmeasured: list[str] = []
    for env, (random_score, reference) in data.normalisation.items():
        if random_score is None:
            scores = [s.score for s in scored if s.cell.baseline and s.cell.env == env and s.excluded is None]
            if scores:
                random_score, measured[env] = float(np.mean(scores)), len(scores)
        if reference is None:
            means: dict[str, list[float]] = {}
            for s in scored:
                if not s.cell.baseline and s.cell.env == env and s.excluded is None:
                    means.setdefault(s.cell.configuration, []).append(s.score)
            if means:
                pick = max if data.higher_is_better else min
                best_of[env] = pick(means, key=lambda c: float(np.mean(means[c])))
                reference = float(np.mean(means[best_of[env]]))
        if random_score is None or reference is None or random_score == reference:
            unmeasured.append(env)
            continue
        out[env] = (random_score, reference)
    return (None if unmeasured else out), measured, best_of, unmeasured


def env_matrix(analysis: _Analysis, conf: str, env: str, normalised: bool = False) -> np.ndarray | None:
    """The ``(seeds, 1)`` final scores of ``conf`` on ``env`` (None: no seed scored)."""
    cells = analysis.included.get((conf, env), [])
    if not cells:
        return None
    column = np.array([[s.score] for s in cells], dtype=float)
    if normalised:
        random_score, reference = analysis.normalisation[env]  # type: ignore[index]
        column = stats.normalise(column, random_score, reference)
    return column


def aggregate_matrix(analysis: _Analysis, conf: str) -> np.ndarray | None:
    """The ``(seeds, envs)`` scores of ``conf`` (normalised when the report is), one row per seed
    scored in every env; None when no seed was."""
    seeds = analysis.aggregate_seeds[conf]
    if not seeds:
        return None
    columns = []
    for env in analysis.envs:
        by_seed: dict[int, float] = {}
        for s in analysis.included[(conf, env)]:
            by_seed.setdefault(s.cell.seed, s.score)  # a seed run twice: its first cell counts
        column = np.array([by_seed[seed] for seed in seeds], dtype=float)
        if analysis.normalised:
            random_score, reference = analysis.normalisation[env]  # type: ignore[index]
            column = stats.normalise(column, random_score, reference)
        columns.append(column)
    return np.stack(columns, axis=1)


def _estimate(a: _Analysis) -> None:
    d = a.data
    for env in a.envs:
        raw = {c: m for c in a.configurations if (m := env_matrix(a, c, env)) is not None}
        a.env_metrics[env] = {}
        for key, (_, fn) in _metric_set(a.normalised, per_env=True).items():
            matrices = raw
            if key == "optimality_gap":
                matrices = {c: m for c in raw if (m := env_matrix(a, c, env, normalised=True)) is not None}
            a.env_metrics[env][key] = stats.intervals(matrices, fn, d.reps, d.confidence,
                                                      stats.derived_seed(f"{env}:{key}", d.seed))
    agg = {c: m for c in a.configurations if (m := aggregate_matrix(a, c)) is not None}
    for key, (_, fn) in _metric_set(a.normalised, per_env=False).items():
        a.aggregate[key] = stats.intervals(agg, fn, d.reps, d.confidence, stats.derived_seed(f"aggregate:{key}", d.seed))
    for x in agg:
        for y in agg:
            if x != y:
                a.poi[(x, y)] = stats.probability_of_improvement_interval(
                    a.direction * agg[x], a.direction * agg[y], d.reps, d.confidence,
                    stats.derived_seed(f"poi:{x}>{y}", d.seed))
    for env in a.envs:
        for conf in a.configurations:
            changes = [s.result.late_change for s in a.included.get((conf, env), [])
                       if s.result is not None and s.result.late_change is not None]
            if changes:
                iv = stats.interval(np.array(changes, dtype=float)[:, None], stats.mean, d.reps, d.confidence,
                                    stats.derived_seed(f"{env}:late_change:{conf}", d.seed))
                a.late[(conf, env)] = (iv, sum(a.direction * c > 0 for c in changes), len(changes))
            runs = [s.result for s in a.included.get((conf, env), []) if s.result is not None
                    and s.result.late_change is not None and s.result.gain is not None]
            shares = [r.late_change / r.gain for r in runs if a.direction * r.gain > 0]  # type: ignore[operator]
            if shares:
                iv = stats.interval(np.array(shares, dtype=float)[:, None], stats.mean, d.reps, d.confidence,
                                    stats.derived_seed(f"{env}:late_share:{conf}", d.seed))
                a.share[(conf, env)] = (iv, len(runs) - len(shares))


def level_verdict(late: stats.Interval, share: stats.Interval | None, direction: int, level_within: float) -> str:
    """The report's verdict on a configuration's ends: *levelled off* when the whole interval of the share of the
    runs' gain that their last window added lies within ``±level_within``; else what :func:`late_verdict` says."""
    if share is not None and -level_within <= float(share.low) and float(share.high) <= level_within:
        return "levelled off"
    return late_verdict(late, direction)


def _verdict(a: _Analysis, key: tuple[str, str]) -> str:
    share = a.share.get(key)
    return level_verdict(a.late[key][0], share[0] if share else None, a.direction, a.data.level_within)


def fmt_percent_interval(iv: stats.Interval) -> str:
    """A share's interval in percent: ``1.2% [0.8%, 1.6%]``."""
    return f"{fmt(100 * iv.point)}% [{fmt(100 * iv.low)}%, {fmt(100 * iv.high)}%]"


def late_verdict(iv: stats.Interval, direction: int) -> str:
    """What a mean late change's interval says: the whole interval on the better side of 0, on the worse side,
    or 0 inside it."""
    low, high = sorted((direction * float(iv.low), direction * float(iv.high)))
    if low > 0:
        return "still improving"
    if high < 0:
        return "getting worse"
    return "no change detected"


# -- report.md ------------------------------------------------------------------------------------------
def fmt(value: Any) -> str:
    """A number as the report prints it (4 significant digits)."""
    if value is None:
        return "–"
    value = float(value)
    if not math.isfinite(value):
        return "–"
    text = f"{value:.4g}"
    return "0" if text in ("-0", "0") else text


def _steps(value: float) -> str:
    """A count of env steps, whole (``1224000``, not ``1.224e+06``)."""
    return str(int(value)) if float(value).is_integer() else fmt(value)


def fmt_interval(iv: stats.Interval) -> str:
    return f"{fmt(iv.point)} [{fmt(iv.low)}, {fmt(iv.high)}]"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in rows]
    return lines


def _json_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _shared_settings(cells: list[ReportCell]) -> dict[str, str]:
    """The settings every one of ``cells`` has, with the same value."""
    if not cells:
        return {}
    shared = {k: _json_value(v) for k, v in cells[0].settings.items()}
    for cell in cells[1:]:
        shared = {k: v for k, v in shared.items() if k in cell.settings and _json_value(cell.settings[k]) == v}
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


def _budgets(cells: list[ReportCell]) -> list[int | None]:
    return sorted({c.budget for c in cells}, key=lambda b: (b is None, b or 0))


def _versions_by_worker(a: _Analysis) -> dict[str, dict[tuple[tuple[str, str], ...], int]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], int]] = {}
    for s in a.scored:
        if s.result is not None and s.result.versions and s.cell.status not in ("pending", "queued"):
            worker = s.result.worker or s.cell.worker
            seen = out.setdefault(worker, {})
            seen[s.result.versions] = seen.get(s.result.versions, 0) + 1
    return out


def _what_was_run(a: _Analysis) -> list[str]:
    d = a.data
    direction = "higher is better" if d.higher_is_better else "lower is better"
    lines = [f"# Experiment report: {d.name}", "",
             "## What was run", "",
             f"- Score of a run: `{d.metric}` ({direction}), averaged over the last "
             f"{fmt(100 * d.final_fraction)}% of its env steps (at least its last logged value).",
             f"- Levelled off: the last {fmt(100 * d.final_fraction)}% of the env steps added less than "
             f"{fmt(100 * d.level_within)}% of the runs' whole gain (the whole {fmt(100 * d.confidence)}% interval of "
             "the seeds' mean share; `score.level_within`).",
             f"- Intervals: {fmt(100 * d.confidence)}% stratified bootstrap percentile intervals "
             f"({d.reps} resamples of the seeds within each env, seed {d.seed}).",
             f"- Cells: {len(d.cells)} ({sum(s.excluded is None for s in a.scored)} scored); "
             f"envs: {', '.join(a.envs)}.", ""]
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
                     ", ".join("–" if b is None else str(b) for b in _budgets(cells)),
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


def _metric_table(intervals: dict[str, dict[str, stats.Interval]], titles: dict[str, str],
                  configurations: list[str], seeds_label: Callable[[str], str], pct: str) -> list[str]:
    header = ["configuration", "seeds"] + [f"{title} [{pct}% CI]" for title in titles.values()]
    rows = []
    for conf in configurations:
        values = [fmt_interval(intervals[k][conf]) if conf in intervals[k] else "no data" for k in titles]
        rows.append([conf, seeds_label(conf), *values])
    return _table(header, rows)


def _results(a: _Analysis) -> list[str]:
    d = a.data
    pct = fmt(100 * d.confidence)
    lines = ["## Results per env", "",
             f"Final scores in raw units; each cell: point estimate [{pct}% interval]; `seeds`: how many "
             "seeds each number rests on." + (" The optimality gap is on normalised scores (1 = reference)."
                                              if a.normalised else ""), ""]
    for env in a.envs:
        titles = {k: t for k, (t, _) in _metric_set(a.normalised, per_env=True).items()}
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
    titles = {k: t for k, (t, _) in _metric_set(a.normalised, per_env=False).items()}
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


def _late_section(a: _Analysis) -> list[str]:
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
            rows.append([conf, env, n, fmt_interval(iv), f"{better} of {n}", share_text, _verdict(a, (conf, env))])
    lines += _table(["configuration", "env", "seeds", f"change over the last {share}% [{pct}% CI]",
                     "runs improving", f"share of the whole gain [{pct}% CI]", "verdict"], rows)
    return lines + [""]


def _overlap(p: stats.Interval, q: stats.Interval) -> bool:
    return float(p.low) <= float(q.high) and float(q.low) <= float(p.high)


def caveats(a: _Analysis) -> list[str]:
    """What the numbers do not support, worked out from them (one line each)."""
    d = a.data
    out: list[str] = []
    few = [(c, e, len(a.included.get((c, e), []))) for c in a.configurations for e in a.envs
           if 0 < len(a.included.get((c, e), [])) < FEW_SEEDS]
    if few:
        out.append(f"Few seeds: {'; '.join(f'{c} on {e}: {n}' for c, e, n in few)}. Bootstrap intervals from "
                   f"fewer than {FEW_SEEDS} seeds are too narrow (they hold the true value less often than "
                   f"the stated {fmt(100 * d.confidence)}%); read them as rough.")
    single = [f"{c} on {e}" for c, e, n in few if n == 1]
    if single:
        out.append(f"One seed only ({', '.join(single)}): its interval has no width and says nothing of the spread.")
    empty = [c for c in a.configurations if not any(a.included.get((c, e)) for e in a.envs)]
    if empty:
        out.append(f"No data: {', '.join(empty)} has no scored seed; it is in no comparison.")
    partial = [f"{c} ({', '.join(e for e in a.envs if not a.included.get((c, e)))})" for c in a.configurations
               if c not in empty and any(not a.included.get((c, e)) for e in a.envs)]
    if partial:
        out.append(f"No score in some envs: {'; '.join(partial)}; the aggregate and probability of improvement "
                   "leave these configurations out.")
    for c in a.configurations:
        seeds = {s.cell.seed for e in a.envs for s in a.included.get((c, e), [])}
        dropped = sorted(seeds - set(a.aggregate_seeds[c]))
        if dropped and a.aggregate_seeds[c]:
            out.append(f"{c}: seeds {', '.join(map(str, dropped))} lack a score in some env and are left out of "
                       "the aggregate (they still count per env).")
    metrics_titles = _metric_set(a.normalised, per_env=False)
    for key in ("iqm", "mean"):
        title = metrics_titles[key][0]
        for env in a.envs:
            pairs = _overlapping(a.env_metrics[env][key], a.configurations)
            if pairs:
                out.append(f"{env}, {title}: the intervals of {'; '.join(f'{x} and {y}' for x, y in pairs)} "
                           "overlap: no ranking between them is supported.")
        if len(a.envs) > 1:
            pairs = _overlapping(a.aggregate[key], a.configurations)
            if pairs:
                out.append(f"Aggregate {title}: the intervals of {'; '.join(f'{x} and {y}' for x, y in pairs)} "
                           "overlap: no ranking between them is supported.")
    undecided = [f"{x} vs {y}" for (x, y), iv in a.poi.items()
                 if x < y and float(iv.low) <= 0.5 <= float(iv.high)]
    if undecided:
        out.append(f"Probability of improvement: the intervals of {'; '.join(undecided)} include 0.5: "
                   "neither is shown to tend to outscore the other.")
    def joined(before: tuple[tuple[Path, float | None], ...]) -> str:
        return ", ".join(f"{Path(p).name} at {'?' if x is None else _steps(x)} env steps" for p, x in before)

    continued = [f"{s.cell.cell_id} (from {joined(s.cell.before)})" for s in a.scored
                 if s.cell.before and s.excluded is None]
    if continued:
        earlier = sorted({str(spec["continue_from"]) for spec in (d.spec, *d.joined.values())
                          if spec.get("continue_from")})
        how = ("an interruption" if not earlier else
               f"an interruption, or of experiment {' or '.join(earlier)}'s run (continue_from)")
        out.append(f"Continued from a checkpoint after {how}: {'; '.join(continued)}. Each of these "
                   "curves joins the runs it continued at the checkpoint's env steps; a continued run "
                   "need not be the run an uninterrupted one would have been (what a checkpoint restores differs "
                   "by worker: each worker's doc).")
    share = fmt(100 * d.final_fraction)
    rising = [f"{c} on {e} ({fmt_interval(iv)}, {better} of {n} runs)" for (c, e), (iv, better, n) in a.late.items()
              if _verdict(a, (c, e)) == "still improving"]
    if rising:
        out.append(f"Still improving at the end: {'; '.join(rising)} over the last {share}% of the env steps: "
                   "these scores are at this budget, not where the curves level off; a larger budget may change "
                   "them and any ranking.")
    levelled = [f"{c} on {e} ({fmt_percent_interval(a.share[(c, e)][0])} of the gain; the change "
                f"{fmt_interval(iv)}, {better} of {n} runs up)" for (c, e), (iv, better, n) in a.late.items()
                if _verdict(a, (c, e)) == "levelled off"]
    if levelled:
        out.append(f"Levelled off, not flat: {'; '.join(levelled)}. The last {share}% of the env steps added less than "
                   f"{fmt(100 * d.level_within)}% of the runs' whole gain (score.level_within), so these scores are "
                   "near where the curves end at these settings; a curve that still creeps may gain a little more "
                   "with a larger budget, and a ranking closer than that is not settled by this budget.")
    level = [f"{c} on {e}" for (c, e), (iv, _, _) in a.late.items()
             if _verdict(a, (c, e)) == "no change detected"]
    if level:
        out.append(f"No change detected at the end ({', '.join(level)}): the change over the last {share}% lies "
                   "within its interval (\"Still improving at the end?\"); a slower rise than that is not excluded.")
    if a.measured and a.normalised:
        out.append("Measured random scores (" + "; ".join(f"{e}: {fmt(a.normalisation[e][0])} from {n} random-play "
                                                         f"runs" for e, n in a.measured.items())  # type: ignore
                   + "): each is an estimate, and its noise moves every normalised number of its env; the intervals "
                   "do not include that uncertainty. The random-play runs are a configuration of their own above.")
    if a.best_of and a.normalised:
        out.append("Reference taken from the results (" + "; ".join(f"{e}: {c}" for e, c in a.best_of.items())
                   + "): that configuration's normalised mean is 1 by construction, so the normalised numbers say "
                   "how the configurations stand against the best one here, not against an outside reference.")
    if a.unmeasured:
        out.append(f"Not normalised: {', '.join(a.unmeasured)} (a score to be measured has no scored run, or the "
                   "random score equals the reference).")
    if not a.normalised and len(a.envs) > 1:
        out.append("No normalisation: the aggregate across envs is in raw units, dominated by the envs with "
                   "the largest scores; compare configurations per env.")
    if len(a.envs) == 1:
        out.append(f"One env ({a.envs[0]}): nothing here says how the configurations do on other envs.")
    excluded = [s for s in a.scored if s.excluded is not None]
    if excluded:
        out.append(f"Left out of every number: {len(excluded)} cell{'s' if len(excluded) != 1 else ''} "
                   "without a score (listed below).")
    budgets = {c: _budgets([x for x in d.cells if x.configuration == c]) for c in a.configurations}
    distinct = {b for bs in budgets.values() for b in bs}
    if len(distinct) > 1:
        out.append("Budgets differ (" + "; ".join(f"{c}: {', '.join('–' if b is None else str(b) for b in bs)}"
                                                  for c, bs in budgets.items())
                   + "): a difference in score may come from the budget, not from the configuration.")
    else:
        (budget,) = distinct or {None}
        out.append(f"Budget: the same for every cell ({'not stated' if budget is None else budget}).")
    return out


def _overlapping(intervals: dict[str, stats.Interval], configurations: list[str]) -> list[tuple[str, str]]:
    present = [c for c in configurations if c in intervals]
    return [(x, y) for i, x in enumerate(present) for y in present[i + 1:] if _overlap(intervals[x], intervals[y])]


def render_markdown(a: _Analysis) -> str:
    lines = _what_was_run(a) + _results(a) + _late_section(a)
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


def shared_curves(curves: list[tuple[tuple[float, ...], tuple[float, ...]]]) -> tuple[np.ndarray, np.ndarray]:
    """Runs' curves on shared env-step values: the values they logged (inside the range every run covers)
    when there are at most ``CURVE_POINTS`` of them, else ``CURVE_POINTS`` evenly spaced ones."""
    grid, values = stats.on_shared_x(curves)
    if len(grid) > CURVE_POINTS:
        grid, values = stats.on_shared_x(curves, points=CURVE_POINTS)
    return grid, values


# -- scores.csv, marl_eval.json ----------------------------------------------------------------------
FIXED_COLUMNS = ("cell_id", "configuration", "env", "seed", "status", "run_id", "final_score", "env_steps",
                 "late_change", "gain")


def _number(value: float | None) -> str:
    """Exact (``repr``), so the file gives back the very floats; whole numbers without ``.0``."""
    if value is None:
        return ""
    value = float(value)
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def render_csv(a: _Analysis) -> str:
    """One row per cell; ``final_score``, ``late_change`` and ``gain`` only where the cell counts (completed with a
    score)."""
    names = _unique([k for s in a.scored for k in s.cell.settings])
    header = list(FIXED_COLUMNS) + [f"setting.{n}" if n in FIXED_COLUMNS else n for n in names]
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    for s in a.scored:
        c, r = s.cell, s.result
        writer.writerow([c.cell_id, c.configuration, c.env, c.seed, c.status, c.run_id or "",
                         _number(r.final_score if r is not None and s.excluded is None else None),
                         _number(r.env_steps if r is not None else None),
                         _number(r.late_change if r is not None and s.excluded is None else None),
                         _number(r.gain if r is not None and s.excluded is None else None),
                         *[_json_value(c.settings[n]) if n in c.settings else "" for n in names]])
    return buffer.getvalue()


def marl_eval_data(a: _Analysis) -> dict[str, Any]:
    """The scored runs in marl-eval's raw-data format.

    Follows the "Data Structure for Raw Experiment data" section of marl-eval's README
    (github.com/instadeepai/marl-eval, commit 068d960) and the keys its ``JsonLogger`` writes
    (``marl_eval/json_tools/json_logger.py``, commit 3b460d3): ``{environment: {task: {algorithm:
    {"seed_<seed>": {"step_<k>": {"step_count": <env steps>, <metric>: [value]}, ...,
    "absolute_metrics": {<metric>: [final score]}}}}}}``, ``absolute_metrics`` last. The environment is
    the runs' env family (``mosaic`` when the manifests do not say), the task the env, the algorithm the
    configuration. marl-eval needs the same number of steps in every run: each env's curves are
    put on the same env-step values (:func:`shared_curves`; runs whose curves share no range keep their
    logged points).
    """
    metric = a.data.metric
    out: dict[str, Any] = {}
    for env in a.envs:
        cells = [s for c in a.configurations for s in a.included.get((c, env), [])]
        if not cells:
            continue
        family = next((s.result.env_family for s in cells if s.result and s.result.env_family), None) or "mosaic"
        curves = [(s.result.xs, s.result.ys) for s in cells if s.result and s.result.xs]
        grid = values = None
        if len(curves) == len(cells):
            try:
                grid, values = shared_curves(curves)
            except ValueError:
                grid = values = None
        task = out.setdefault(family, {}).setdefault(env, {})
        for i, s in enumerate(cells):
            assert s.result is not None
            if grid is not None and values is not None:
                points = list(zip(grid.tolist(), values[i].tolist()))
            else:
                points = list(zip(s.result.xs, s.result.ys))
            run: dict[str, Any] = {f"step_{k}": {"step_count": int(round(x)), metric: [y]}
                                   for k, (x, y) in enumerate(points)}
            run["absolute_metrics"] = {metric: [s.score]}
            task.setdefault(s.cell.configuration, {}).setdefault(f"seed_{s.cell.seed}", run)
    return out


# -- plots ------------------------------------------------------------------------------------------------
def _figure(panels: int, width: float = 5.0, height: float = 3.6) -> tuple[Any, list[Any]]:
    """A figure with ``panels`` axes side by side, not registered with pyplot: nothing global to close."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * max(1, panels), height), layout="constrained")
    axes = fig.subplots(1, max(1, panels), squeeze=False)[0]
    return fig, list(axes)


def _save(fig: Any, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # the Agg canvas: PNGs without a display, whatever pyplot's backend is
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})


def _colours(configurations: list[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {c: cmap(i % 10) for i, c in enumerate(configurations)}


def plot_sample_efficiency(a: _Analysis, path: Path) -> None:
    d = a.data
    fig, axes = _figure(len(a.envs))
    colours = _colours(a.configurations)
    for ax, env in zip(axes, a.envs):
        drawn = 0
        for conf in a.configurations:
            cells = [s for s in a.included.get((conf, env), []) if s.result and s.result.xs]
            if not cells:
                continue
            try:
                grid, values = shared_curves([(s.result.xs, s.result.ys) for s in cells])  # type: ignore[union-attr]
            except ValueError:
                continue
            point, low, high = stats.curve_intervals(values[:, None, :], stats.iqm, d.reps, d.confidence,
                                                     stats.derived_seed(f"curve:{env}:{conf}", d.seed))
            ax.plot(grid, point, color=colours[conf], label=f"{conf} ({len(cells)} seeds)")
            ax.fill_between(grid, low, high, color=colours[conf], alpha=0.2, linewidth=0)
            drawn += 1
        ax.set_title(env)
        ax.set_xlabel("env steps")
        ax.set_ylabel(f"IQM of {d.metric}")
        if drawn:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no curves", ha="center", va="center", transform=ax.transAxes)
    _save(fig, path)


def _interval_bars(ax: Any, labels: list[str], ivs: list[stats.Interval], colours: list[Any]) -> None:
    for i, (iv, colour) in enumerate(zip(ivs, colours)):
        ax.plot([float(iv.low), float(iv.high)], [i, i], color=colour, linewidth=6, alpha=0.5,
                solid_capstyle="butt")
        ax.plot([float(iv.point)], [i], marker="|", color="black", markersize=14)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.invert_yaxis()


def plot_aggregates(a: _Analysis, path: Path) -> None:
    titles = {k: t for k, (t, _) in _metric_set(a.normalised, per_env=False).items()}
    fig, axes = _figure(len(titles), width=3.6, height=0.5 * len(a.configurations) + 1.6)
    colours = _colours(a.configurations)
    for ax, (key, title) in zip(axes, titles.items()):
        present = [c for c in a.configurations if c in a.aggregate[key]]
        _interval_bars(ax, present, [a.aggregate[key][c] for c in present], [colours[c] for c in present])
        ax.set_title(f"{title}{' (normalised)' if a.normalised else ''}")
        if ax is not axes[0]:
            ax.set_yticklabels([])
    _save(fig, path)


def plot_performance_profiles(a: _Analysis, path: Path) -> None:
    """Normalised: one profile over every env. Raw: one panel per env (raw scores do not pool)."""
    d = a.data
    if a.normalised:
        panels = [("all envs (normalised)", {c: m for c in a.configurations
                                               if (m := aggregate_matrix(a, c)) is not None})]
    else:
        panels = [(env, {c: m for c in a.configurations if (m := env_matrix(a, c, env)) is not None})
                  for env in a.envs]
    fig, axes = _figure(len(panels))
    colours = _colours(a.configurations)
    sign = a.direction
    for ax, (title, matrices) in zip(axes, panels):
        if not matrices:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(title)
            continue
        everything = np.concatenate([m.ravel() for m in matrices.values()])
        taus = np.linspace(everything.min(), everything.max(), PROFILE_POINTS)
        for conf, matrix in matrices.items():
            profile, low, high = stats.performance_profile_band(sign * matrix, sign * taus, d.reps, d.confidence,
                                                                stats.derived_seed(f"profile:{title}:{conf}", d.seed))
            ax.plot(taus, profile, color=colours[conf], label=conf)
            ax.fill_between(taus, low, high, color=colours[conf], alpha=0.2, linewidth=0)
        ax.set_title(title)
        ax.set_xlabel("score τ")
        ax.set_ylabel(f"fraction of runs with score {'>' if sign > 0 else '<'} τ")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize="small")
    _save(fig, path)


def plot_probability_of_improvement(a: _Analysis, path: Path) -> None:
    pairs = [(x, y) for x in a.configurations for y in a.configurations if (x, y) in a.poi]
    fig, axes = _figure(1, width=6.0, height=0.45 * len(pairs) + 1.6)
    ax = axes[0]
    if pairs:
        colours = _colours(a.configurations)
        _interval_bars(ax, [f"P({x} > {y})" for x, y in pairs], [a.poi[p] for p in pairs],
                       [colours[x] for x, _ in pairs])
        ax.axvline(0.5, color="grey", linestyle="--", linewidth=1)
        ax.set_xlim(-0.04, 1.04)
    else:
        ax.text(0.5, 0.5, "fewer than two configurations with data", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_title("probability of improvement")
    _save(fig, path)


PLOTTERS: dict[str, Callable[[_Analysis, Path], None]] = {
    "sample_efficiency.png": plot_sample_efficiency, "aggregates.png": plot_aggregates,
    "performance_profiles.png": plot_performance_profiles,
    "probability_of_improvement.png": plot_probability_of_improvement,
}


# -- writing ---------------------------------------------------------------------------------------------
def write_report(out_dir: Path, data: ReportInput) -> Path:
    """Write the report folder ``out_dir`` (replacing one already there, all at once); returns report.md's path."""
    out_dir = Path(out_dir)
    analysis = analyse(data)
    with staged_folder(out_dir, replace=True, suffix=".tmp", mode=0o755, sweep=True) as staging:
        (staging / "report.md").write_text(render_markdown(analysis), encoding="utf-8")
        (staging / "scores.csv").write_text(render_csv(analysis), encoding="utf-8")
        (staging / "marl_eval.json").write_text(json.dumps(marl_eval_data(analysis), indent=2) + "\n",
                                                encoding="utf-8")
        for name in PLOTS:
            PLOTTERS[name](analysis, staging / name)
    return out_dir / "report.md"
