"""What the numbers of a report do not support, worked out from them: report.md's last section."""

from __future__ import annotations

from pathlib import Path

from mosaic.experiments.report.analysis import Analysis, cell_budgets, metric_set, verdict
from mosaic.experiments.report.formatting import fmt, fmt_interval, fmt_percent_interval, fmt_steps
from mosaic.scoring import stats

#: Seeds below which bootstrap intervals are too narrow to trust (they cover less than they state).
FEW_SEEDS = 10


def _overlap(p: stats.Interval, q: stats.Interval) -> bool:
    return float(p.low) <= float(q.high) and float(q.low) <= float(p.high)


def caveats(a: Analysis) -> list[str]:
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
    metrics_titles = metric_set(a.normalised, per_env=False)
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
        return ", ".join(f"{Path(p).name} at {'?' if x is None else fmt_steps(x)} env steps" for p, x in before)

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
              if verdict(a, (c, e)) == "still improving"]
    if rising:
        out.append(f"Still improving at the end: {'; '.join(rising)} over the last {share}% of the env steps: "
                   "these scores are at this budget, not where the curves level off; a larger budget may change "
                   "them and any ranking.")
    levelled = [f"{c} on {e} ({fmt_percent_interval(a.share[(c, e)][0])} of the gain; the change "
                f"{fmt_interval(iv)}, {better} of {n} runs up)" for (c, e), (iv, better, n) in a.late.items()
                if verdict(a, (c, e)) == "levelled off"]
    if levelled:
        out.append(f"Levelled off, not flat: {'; '.join(levelled)}. The last {share}% of the env steps added less than "
                   f"{fmt(100 * d.level_within)}% of the runs' whole gain (score.level_within), so these scores are "
                   "near where the curves end at these settings; a curve that still creeps may gain a little more "
                   "with a larger budget, and a ranking closer than that is not settled by this budget.")
    level = [f"{c} on {e}" for (c, e), (iv, _, _) in a.late.items()
             if verdict(a, (c, e)) == "no change detected"]
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
    out += _outside(a)
    excluded = [s for s in a.scored if s.excluded is not None]
    if excluded:
        out.append(f"Left out of every number: {len(excluded)} cell{'s' if len(excluded) != 1 else ''} "
                   "without a score (listed below).")
    budgets = {c: cell_budgets([x for x in d.cells if x.configuration == c]) for c in a.configurations}
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


def _outside(a: Analysis) -> list[str]:
    """What contenders read from marl-eval files do not support (nothing when none joined)."""
    labels = list(dict.fromkeys(conf for source in a.data.marl_eval for _, _, conf, _ in source.joined))
    if not labels:
        return []
    out = [f"Not run by MOSAIC: {', '.join(labels)} come from marl-eval files (\"Read from marl-eval files\"). "
           "Their settings, budgets and how each value was measured are not in the files: BenchMARL's and "
           "marl-eval's values are returns of evaluation episodes, MOSAIC's `episode_return_mean` those of the "
           "episodes each worker logs (for most, its training episodes). A difference in score may come from any "
           "of these, not only from the algorithm; the units are as the command was told."]
    absolute = sorted({s.cell.configuration for s in a.scored if s.cell.read is not None and s.excluded is None
                       and not s.cell.read.xs})
    if absolute:
        out.append(f"Scored from absolute_metrics ({', '.join(absolute)}): those seeds have no step points, so their "
                   "score is the file's own final number, which producers fill differently (BenchMARL 1.5.2: the "
                   "best episode of any evaluation, a best case; marl-eval's convention: the final policy's "
                   "evaluation), not the final window MOSAIC's runs are scored by, and they have no curve.")
    return out
