"""What ``plan`` and ``status`` say of a study: its space and budget, and its trials so far (text and JSON)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from mosaic.configkit import get_path
from mosaic.experiments.plan import Plan


def budget_rows(plan: Plan) -> list[dict[str, Any]]:
    """Per contender: trials × tuning seeds × env steps, the tuning's total env steps, and the test's."""
    from mosaic.workerkit.run_fields import summarize

    study = plan.study or {}
    rows = []
    for c in study.get("contenders", []):
        summary = summarize(c["sample"], worker=c["worker"])
        steps = summary.budget
        trials, seeds, tests = study["trials"], len(study["tuning_seeds"]), len(study["test_seeds"])
        rows.append({"contender": c["label"], "worker": c["worker"], "trials": trials, "tuning_seeds": seeds,
                     "env_steps": steps, "unit": summary.budget_unit,
                     "tuning_env_steps": None if steps is None else trials * seeds * steps,
                     "test_env_steps": None if steps is None else tests * steps})
    return rows


def resolved_values(plan: Plan, spec: Any) -> list[tuple[str, list[tuple[str, Any]]]]:
    """Per contender, each parameter's value at the sample point where its worker's config has it (``path = value``),
    and the values derived from it: what each library is given for one point of the space."""
    out = []
    for c in (plan.study or {}).get("contenders", []):
        pairs = []
        for name, value in c["sample_point"].items():
            entry = spec.translate.get(name, {}).get(c["worker"])
            path = entry.get("path") if isinstance(entry, dict) else entry if isinstance(entry, str) else name
            derived = f" = {entry['derive']}" if isinstance(entry, dict) and entry.get("derive") else ""
            shown = f"{name} = {json.dumps(value)} -> {path}{derived}" if derived else f"{name} -> {path}"
            pairs.append((shown, get_path(c["sample"], str(path), value)))
        for name, mapping in spec.translate.items():
            entry = mapping.get(c["worker"])
            if isinstance(entry, dict) and entry.get("derive") and name not in c["sample_point"]:
                pairs.append((f"{name} -> {entry['path']} = {entry['derive']}",
                              get_path(c["sample"], str(entry["path"]), None)))
        out.append((c["label"], pairs))
    return out


def steps_per_second(home: Path, worker: str, env: str, newest: int = 200) -> tuple[float, int] | None:
    """Env steps per second of this worker's completed runs on ``env`` in the run store (the newest ``newest`` run
    folders looked at): (the median rate, how many runs), or None if there is none."""
    from mosaic.run_status import RunState
    from mosaic.runs import RunDir, RunStore

    store = RunStore(home)
    if not store.runs_dir.is_dir():
        return None
    folders = sorted(store.runs_dir.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True)[:newest]
    rates = []
    for folder in folders:
        run = RunDir(folder)
        manifest = run.read_manifest()
        env_id = (manifest.get("env") or {}).get("env_id") if isinstance(manifest.get("env"), dict) else None
        if manifest.get("worker") != worker or manifest.get("status") != RunState.COMPLETED.manifest \
                or env_id != env:
            continue
        first = last = steps = None
        try:
            with open(run.telemetry_path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    first = event.get("ts") if first is None else first
                    last = event.get("ts", last)
                    if event.get("type") == "metrics" and isinstance(event.get("timesteps_total"), (int, float)):
                        steps = event["timesteps_total"]
        except OSError:
            continue
        if first and last and steps and last > first:
            rates.append(steps / (last - first))
    if not rates:
        return None
    rates.sort()
    return rates[len(rates) // 2], len(rates)


def plan_text(plan: Plan, spec: Any, home: Path, backend: str, parallel_note: str = "") -> str:
    study = plan.study or {}
    lines = [f"study {plan.name}: {len(study.get('contenders', []))} contender(s), each tuned with "
             f"{study['trials']} trials ({study['sampler']} search, sampler seed {study['sampler_seed']}; pruner "
             f"{study['pruner']}), each trial one run per tuning seed ({', '.join(map(str, study['tuning_seeds']))}), "
             f"scored by the mean of their {spec.score.metric} over the last {spec.score.final_fraction:g} of their "
             "env steps; then each contender's best trial on the test seeds "
             f"({', '.join(map(str, study['test_seeds']))}), which only the report compares", "", "space:"]
    for d in study.get("space", []):
        lines.append(f"  {d['field']}: {d['describe']}")
    lines += ["", "each contender at the space's middle point (what its library is given):"]
    for label, pairs in resolved_values(plan, spec):
        lines.append(f"  {label}:")
        lines += [f"    {name}: {json.dumps(value)}" for name, value in pairs]
    lines += ["", "budget (equal for every contender):"]
    total_s = 0.0
    known = True
    for row, c in zip(budget_rows(plan), study.get("contenders", [])):
        steps = row["env_steps"]
        rate = steps_per_second(home, row["worker"], c["env"])
        runs = row["trials"] * row["tuning_seeds"] + len(study["test_seeds"])
        if rate is not None and steps:
            seconds = runs * steps / rate[0]
            total_s += seconds
            estimate = (f"~{_hours(seconds)} of runs at {rate[0]:.0f} env steps/s (the median of {rate[1]} earlier "
                        f"{row['worker']} run(s) on {c['env']} here)")
        else:
            known = False
            estimate = f"no estimate: no completed {row['worker']} run on {c['env']} in this run store yet"
        seeds = f"{row['tuning_seeds']} seed{'s' if row['tuning_seeds'] != 1 else ''}"
        lines.append(f"  {row['contender']}: {row['trials']} trials × {seeds} × {steps} "
                     f"{row['unit']} = {row['tuning_env_steps']} env steps to tune, + {len(study['test_seeds'])} × "
                     f"{steps} = {row['test_env_steps']} to test; {estimate}")
        if c.get("rounded_budget"):
            lines.append(f"    its library rounds the budget: {c['rounded_budget']['message']}")
    parallel = study.get("parallel", 1)
    if known and total_s:
        lines.append(f"  wall time on {backend}: about {_hours(total_s / max(1, parallel))} with {parallel} trial(s) "
                     f"in flight (if the backend runs them side by side){parallel_note}")
    return "\n".join(lines)


def _hours(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min" if seconds >= 60 else f"{seconds:.0f} s"


def study_status(exp: Any) -> dict[str, Any]:
    """Per contender: trials by state (``asked`` = in Optuna's storage) and the best so far; the phase."""
    from mosaic.experiments.study.driver import StudyDriver

    driver = StudyDriver(exp, read_only=True)
    trials = driver.trials()
    out = []
    for i, label in enumerate(driver.labels):
        mine = [t for t in trials if t.contender == i]
        counts = {s: sum(t.state == s for t in mine) for s in ("RUNNING", "COMPLETE", "PRUNED", "FAIL")}
        best = driver.best(i)
        out.append({"contender": label, "trials": driver.study.trials, "asked": len(mine),
                    "running": counts["RUNNING"], "completed": counts["COMPLETE"], "pruned": counts["PRUNED"],
                    "failed": counts["FAIL"],
                    "best": None if best is None else {"trial": best.number, "value": best.value,
                                                       "params": best.params},
                    "trials_list": [{"number": t.number, "state": t.state, "value": t.value, "params": t.params,
                                     **({"cause": t.cause} if t.cause else {})} for t in mine]})
    tests = [c for c in exp.plan.cells if c.trial is None]
    phase = "testing" if tests else "tuning"
    return {"phase": phase, "contenders": out, "checked_at": time.time()}
