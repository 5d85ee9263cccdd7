"""A study's part of its report: the protocol, the expected best score against the trials spent, each contender's
best configuration, the parameters' importances and the trials (``trials.csv``, ``expected_best.png``,
``parameters.png``, and Optuna's ``study.journal``, so the folder carries the whole study).

With random search (the default), a contender's curve is the expected best of ``n`` trials drawn from its trials
without replacement (Tang et al. 2020's unbiased form of Dodge et al. 2019's expected maximum,
:func:`mosaic.scoring.expected_best.expected_best_band`) with its bootstrap band; the band's coverage was measured by
simulation (:mod:`mosaic.scoring.expected_best`) and falls as ``n`` nears the number of trials, which the report
says. With TPE the trials are not independent draws, so the curve is the best so far in trial order.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from mosaic.experiments.report.formatting import fmt
from mosaic.experiments.report.inputs import StudyInput, StudyTrial

STUDY_FILES = ("trials.csv", "expected_best.png", "parameters.png", "study.journal")
#: the trial counts the report's table of expected best scores shows (those up to the number of trials)
TABLE_NS = (1, 2, 4, 8, 16, 32, 64, 128)
#: parameters drawn against the score, per contender: the most important ones (or all, up to this many)
PARAMETERS_DRAWN = 4


def _completed(study: StudyInput, contender: str) -> list[StudyTrial]:
    return [t for t in study.trials if t.contender == contender and t.state == "COMPLETE" and t.value is not None]


def contenders(study: StudyInput) -> list[str]:
    return [c["label"] for c in study.protocol.get("contenders", [])]


def curve(study: StudyInput, contender: str, higher_is_better: bool, reps: int, confidence: float,
          seed: int) -> tuple[str, Any]:
    """``("expected", Interval)`` under random search, ``("best so far", array)`` under TPE; ("", None) if no
    trial completed."""
    from mosaic.scoring import expected_best, stats

    done = _completed(study, contender)
    if not done:
        return "", None
    if study.protocol.get("sampler") == "random":
        values = np.array([t.value for t in done], dtype=float)
        return "expected", expected_best.expected_best_band(
            values, reps=reps, confidence=confidence, seed=stats.derived_seed(f"expected-best:{contender}", seed),
            higher_is_better=higher_is_better)
    ordered = sorted((t for t in study.trials if t.contender == contender), key=lambda t: t.number)
    values = np.array([t.value if t.state == "COMPLETE" and t.value is not None else math.nan for t in ordered])
    return "best so far", expected_best.best_so_far(values, higher_is_better)


def render_study(study: StudyInput, metric: str, higher_is_better: bool, reps: int, confidence: float,
                 seed: int) -> list[str]:
    p = study.protocol
    names = contenders(study)
    lines = ["## The study", "",
             f"Each contender was tuned with the same {p['trials']} trials of {p['sampler']} search (Optuna; sampler "
             f"seed {p['sampler_seed']}, each trial's sampler seeded from it and the trial's number; pruner: "
             f"{p['pruner']}). A trial is one run per tuning seed ({', '.join(map(str, p['tuning_seeds']))}); its value "
             f"is the mean of their scores ({metric}, the mean over each run's last stretch). Each contender's best "
             "trial, chosen on the tuning seeds alone, is then run on the test seeds "
             f"({', '.join(map(str, p['test_seeds']))}), and only those runs are compared. A failed or pruned "
             "trial counts as one of the trials.", "", "Space:", ""]
    lines += [f"- `{d['field']}`: {d['describe']}" for d in p.get("space", [])]
    lines += ["", "### Budget spent", ""]
    rows = []
    for name in names:
        mine = [t for t in study.trials if t.contender == name]
        counts = {s: sum(t.state == s for t in mine) for s in ("COMPLETE", "PRUNED", "FAIL", "RUNNING")}
        steps = [t.env_steps for t in mine if t.env_steps is not None]
        walls = [t.wall_s for t in mine if t.wall_s is not None]
        rows.append([name, f"{len(mine)} of {p['trials']}", counts["COMPLETE"], counts["PRUNED"], counts["FAIL"],
                     counts["RUNNING"], fmt(sum(steps)) if steps else "–",
                     f"{sum(walls) / 3600:.2f} h" if walls else "–"])
    lines += _table(["contender", "trials", "completed", "pruned", "failed", "running", "env steps trained",
                     "trial wall time (sum)"], rows)
    lines += ["", "### Expected best score against trials spent", ""]
    if p.get("sampler") == "random":
        lines += [f"With random search the trials are independent draws, so the expected best of n of them is "
                  "estimated from all of them: Tang et al. (2020)'s unbiased estimator of Dodge et al. (2019)'s "
                  f"expected maximum, without replacement, with a {confidence:.0%} bootstrap band over the trials "
                  f"({reps} resamples). The band under-covers as n nears the number of trials (measured by "
                  "simulation: about 0.93 at n = 1, 0.86 at n = N/6, 0.77 at n = N/3 and 0.45 at n = N for N = 30); "
                  "read the right end of each curve as a lower bound at best. `expected_best.png` draws them.", ""]
        most = max((len(_completed(study, c)) for c in names), default=0)
        ns = sorted({n for n in TABLE_NS if n <= most} | ({most} if most else set()))  # and all of them
        rows = []
        for name in names:
            kind, iv = curve(study, name, higher_is_better, reps, confidence, seed)
            row: list[Any] = [name]
            for n in ns:
                if iv is None or n > len(iv.x):
                    row.append("–")
                else:
                    k = n - 1
                    row.append(f"{fmt(iv.point[k])} [{fmt(iv.low[k])}, {fmt(iv.high[k])}]")
            rows.append(row)
        lines += _table(["contender", *[f"n = {n}" for n in ns]], rows) if ns else ["No trial completed."]
    else:
        lines += ["With TPE each trial depends on the ones before it, so the trials are not independent draws and "
                  "no expected best is estimated: `expected_best.png` draws each contender's best so far, in trial "
                  "order (one study, one sampler seed: another seed would give another curve)."]
    lines += ["", "### Best configuration per contender (by the tuning seeds)", ""]
    rows = [[name, study.best[name]["trial"], fmt(study.best[name]["value"]),
             ", ".join(f"{k} = {_value(v)}" for k, v in study.best[name]["params"].items())]
            if name in study.best else [name, "–", "–", "no trial completed"] for name in names]
    lines += _table(["contender", "trial", "value on the tuning seeds", "parameters"], rows)
    lines += ["", "### Which parameters mattered", "", f"Importance by {study.importance_method}. "
              "`parameters.png` draws each trial's value against the most important parameters.", ""]
    for name in names:
        found = study.importances.get(name)
        if isinstance(found, dict):
            lines.append(f"- {name}: " + ", ".join(f"{k} {v:.2f}" for k, v in found.items()))
        else:
            lines.append(f"- {name}: {found or 'not computed'}")
    failed = [t for t in study.trials if t.state == "FAIL"]
    if failed:
        lines += ["", "### Failed trials", ""]
        lines += [f"- {t.contender} trial {t.number}: {t.cause or 'no cause recorded'}" for t in failed]
    lines += ["", "What the study does not support: a gap between the tested contenders holds at this tuning budget "
              f"({p['trials']} trials over this space) and these env steps; with more trials, another space or "
              "another budget per run the ranking may change. The best configuration's value on the tuning seeds is "
              "biased upwards (it is the maximum of noisy trials): the test seeds' scores above are the unbiased "
              "comparison. Files: " + ", ".join(f"`{f}`" for f in STUDY_FILES) + ".", ""]
    return lines


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    from mosaic.experiments.report.tables import _table as table

    return table(header, rows)


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return value if isinstance(value, str) else json.dumps(value)


def trials_csv(study: StudyInput) -> str:
    params = list(dict.fromkeys(k for t in study.trials for k in t.params))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["contender", "trial", "state", "value", "seed_scores", "env_steps", "wall_s", "cause", *params])
    for t in sorted(study.trials, key=lambda t: (contenders(study).index(t.contender)
                                                  if t.contender in contenders(study) else 0, t.number)):
        writer.writerow([t.contender, t.number, t.state, "" if t.value is None else repr(t.value),
                         "" if t.seed_scores is None else json.dumps(t.seed_scores),
                         "" if t.env_steps is None else f"{t.env_steps:g}",
                         "" if t.wall_s is None else f"{t.wall_s:.1f}", t.cause,
                         *[_value(t.params[k]) if k in t.params else "" for k in params]])
    return out.getvalue()


def plot_expected_best(study: StudyInput, metric: str, higher_is_better: bool, reps: int, confidence: float,
                       seed: int, path: Path) -> None:
    from mosaic.experiments.report.plots import _colours, _figure, _save

    names = contenders(study)
    fig, (ax,) = _figure(1, width=6.0, height=4.0)
    colours = _colours(names)
    for name in names:
        kind, found = curve(study, name, higher_is_better, reps, confidence, seed)
        if found is None:
            continue
        if kind == "expected":
            ax.plot(found.x, found.point, color=colours[name], label=f"{name} ({len(found.x)} trials)")
            ax.fill_between(found.x, found.low, found.high, color=colours[name], alpha=0.2, linewidth=0)
        else:
            ax.step(np.arange(1, len(found) + 1), found, where="post", color=colours[name], label=name)
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # a number of trials
    ax.set_xlabel("trials")
    ax.set_ylabel(f"{'expected best' if study.protocol.get('sampler') == 'random' else 'best so far'} {metric}")
    ax.set_title("best score against trials spent (tuning seeds)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize="small")
    _save(fig, path)


def plot_parameters(study: StudyInput, metric: str, path: Path) -> None:
    from mosaic.experiments.report.plots import _colours, _figure, _save

    names = contenders(study)
    drawn: list[str] = []
    for name in names:
        found = study.importances.get(name)
        keys = list(found)[:PARAMETERS_DRAWN] if isinstance(found, dict) else \
            list(dict.fromkeys(k for t in _completed(study, name) for k in t.params))[:PARAMETERS_DRAWN]
        drawn += [k for k in keys if k not in drawn]
    fig, axes = _figure(max(1, len(drawn)), width=4.0, height=3.4)
    colours = _colours(names)
    for ax, key in zip(axes, drawn):
        for name in names:
            points = [(t.params[key], t.value) for t in _completed(study, name) if key in t.params]
            numeric = [(x, y) for x, y in points if isinstance(x, (int, float)) and not isinstance(x, bool)]
            if numeric:
                ax.scatter([x for x, _ in numeric], [y for _, y in numeric], s=14, color=colours[name], label=name)
            else:
                labels = sorted({_value(x) for x, _ in points})
                ax.scatter([labels.index(_value(x)) for x, _ in points], [y for _, y in points], s=14,
                           color=colours[name], label=name)
                ax.set_xticks(range(len(labels)), labels, fontsize="small")
        ax.set_xlabel(key)
        ax.set_ylabel(f"trial's {metric}")
        if any(isinstance(t.params.get(key), float) and t.params[key] > 0 for t in study.trials) and \
                _log_scale(study, key):
            ax.set_xscale("log")
    if drawn and axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize="small")
    _save(fig, path)


def _log_scale(study: StudyInput, key: str) -> bool:
    return any(d.get("name") == key and "log scale" in d.get("describe", "") for d in study.protocol.get("space", []))
