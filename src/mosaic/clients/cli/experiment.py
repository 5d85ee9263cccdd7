"""``mosaic experiment plan|run|status|cancel|resume|report|list``: grids of runs (docs/experiments.md)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from mosaic.clients.cli.common import _table
from mosaic.errors import UserError
from mosaic.workerkit.progress_line import format_duration as _fmt_duration


def _store() -> Any:
    from mosaic.experiments.store import ExperimentStore

    return ExperimentStore()


def _say(line: str) -> None:
    print(line, file=sys.stderr)


class GridProgress:
    """Cells done, running, queued and failed, with the time left: one redrawn line on a TTY, else a
    line whenever the counts change."""

    def __init__(self, name: str, stream: Any = None) -> None:
        self.name = name
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.last = ""

    def __call__(self, p: Any) -> None:
        for line in p.events:
            self._line(line)
        c = p.counts
        width = 20
        filled = int(width * p.done / p.total) if p.total else width
        bar = "#" * filled + "-" * (width - filled)
        text = (f"{self.name} [{bar}] {p.done}/{p.total} done · {c['running']} running · "
                f"{c['queued'] + c['pending']} waiting · {c['failed']} failed · {c['cancelled']} cancelled"
                + (f" · {p.retrying} retrying" if p.retrying else "") + f" · ETA {_fmt_duration(p.eta_s)}")
        if self.tty:
            self.stream.write("\r\033[K" + text)
            self.stream.flush()
        elif text.split(" · ETA")[0] != self.last.split(" · ETA")[0]:
            self.stream.write(text + "\n")
            self.stream.flush()
        self.last = text

    def _line(self, line: str) -> None:
        self.stream.write(("\r\033[K" if self.tty else "") + line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self.last:
            self.stream.write("\n")


def _read_spec(spec_path: str) -> Any:
    """The spec at ``spec_path``; a YAML syntax error named with its line and column, another kind of file (a run
    config, a tournament spec) named with the command that takes it."""
    from mosaic.clients.cli.common import refuse_other_kind, yaml_syntax
    from mosaic.configkit import read_document
    from mosaic.experiments.spec import read_spec

    yaml_syntax(spec_path, "spec")
    try:
        data = read_document(spec_path, "spec")
    except UserError:
        data = None  # read_spec says what is wrong
    refuse_other_kind(spec_path, data, "experiment spec", "spec")
    return read_spec(spec_path)


def _plan_of(spec_path: str, check: bool = True) -> tuple[Any, Any]:
    spec = _read_spec(spec_path)
    return spec, _make_plan(spec, check)


def _make_plan(spec: Any, check: bool = True) -> Any:
    """The spec's plan; with ``continue_from``, each cell set to restore the earlier experiment's run."""
    from mosaic.experiments.plan import make_plan
    from mosaic.experiments.store import continue_cells

    cells = continue_cells(spec.continue_from, spec.cells(), _store().home) if spec.continue_from else None
    return make_plan(spec, validate=check, cells=cells)


def _plan_table(plan: Any) -> str:
    from mosaic.workerkit.run_fields import summarize

    rows = []
    for cell in plan.cells:
        summary = summarize(cell.config, worker=cell.worker)
        budget = f"{summary.budget} {summary.budget_unit}".strip() if summary.budget is not None else "-"
        rows.append([cell.cell_id, cell.worker, summary.algorithm or "-", cell.env, str(cell.seed),
                     budget, cell.configuration])
    return _table(rows, ["CELL", "WORKER", "ALGORITHM", "ENV", "SEED", "BUDGET", "CONFIGURATION"])


def _grid_summary(plan: Any) -> str:
    if plan.study is not None:
        study = plan.study
        return (f"study: {len(study['contenders'])} contender(s) × {study['trials']} trials × "
                f"{len(study['tuning_seeds'])} tuning seed(s), then {len(study['test_seeds'])} test seeds each; a "
                f"failed cell is retried up to {plan.retries} time(s) (a trial keeps its number)")
    configurations = sorted({c.configuration for c in plan.cells})
    envs = sorted({c.env for c in plan.cells})
    seeds = sorted({c.seed for c in plan.cells})
    return (f"{len(plan.cells)} cells: {len(configurations)} configuration(s) × {len(envs)} env(s) × "
            f"{len(seeds)} seed(s); a failed cell is retried up to {plan.retries} time(s)")


def _warn_of(spec: Any) -> None:
    from mosaic.experiments.spec import metric_warning

    warning = metric_warning(spec.score)
    if warning:
        _say(warning)


def cmd_plan(args: argparse.Namespace) -> int:
    spec, plan = _plan_of(args.spec, check=not args.no_check)
    _warn_of(spec)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
        return 0
    if plan.study is not None:
        from mosaic.experiments.study.describe import plan_text

        print(plan_text(plan, spec, _store().home, plan.backend))
        if args.no_check:
            print("(not checked by the workers: --no-check)")
        return 0
    print(_plan_table(plan))
    print(_grid_summary(plan) + ("" if args.no_check else "; every cell checked by its worker"))
    return 0


def _backend(exp: Any, args: argparse.Namespace | None = None, start: bool = True) -> Any:
    """The experiment's backend: ``--backend``/``--address`` if given (kept for later commands), else what the
    experiment last ran on, else the spec's."""
    from mosaic.experiments.backends import backend_for
    from mosaic.runs import write_json_atomic

    saved_path = exp.root / "backend.json"
    try:
        saved = json.loads(saved_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = {}
    name = getattr(args, "backend", None) or saved.get("name") or exp.plan.backend
    same = name == saved.get("name")
    chosen = {"name": name}
    for option in ("address", "storage", "node_home"):
        chosen[option] = getattr(args, option, None) or (saved.get(option) if same else None)
    backend = backend_for(name, _store().home, announce=_say, start=start,
                          **{k: v for k, v in chosen.items() if k != "name"})
    if start and chosen != saved:
        write_json_atomic(saved_path, chosen)
    return backend


def _run(exp: Any, args: argparse.Namespace | None = None) -> int:
    from mosaic.experiments import coordinator

    backend = _backend(exp, args)
    _say(f"experiment {exp.name}: {exp.root}; cells run on {backend.describe()}")
    view = GridProgress(exp.name)
    try:
        code = coordinator.run(exp, backend, report=view)
    except KeyboardInterrupt:
        view.close()
        _say(f"stopped watching: the cells in flight go on in the backend; `mosaic experiment resume {exp.name}` "
             f"takes them up, `mosaic experiment cancel {exp.name}` stops them")
        return 130
    finally:
        backend.close()
    view.close()
    print(_status_table(exp, refresh=False))
    if code == coordinator.EXIT_CANCELLED:
        _say(f"experiment {exp.name} cancelled; `mosaic experiment resume {exp.name}` runs what is left")
    else:
        _say(f"next: mosaic experiment report {exp.name}")
    return code


def cmd_run(args: argparse.Namespace) -> int:
    from mosaic.experiments.plan import spec_digest

    store = _store()
    spec = _read_spec(args.spec)
    if args.name:
        from mosaic.experiments.spec import parse_spec

        spec = parse_spec({**spec.source, "name": args.name}, base_dir=Path(args.spec).parent)
    if store.exists(spec.name):
        exp = store.get(spec.name)
        if exp.plan.spec_digest != spec_digest(spec):
            raise UserError(f"name: an experiment named {spec.name!r} exists with other cells; allowed: another "
                            f"name (--name), or `mosaic experiment resume {spec.name}` to finish that one")
        _say(f"experiment {spec.name} exists with the same cells: resuming it (finished cells are kept)")
        return _run(exp, args)
    plan = _make_plan(spec)
    files = {}
    if getattr(args, "study_journal", None):
        from mosaic.experiments.study.driver import carried_journal

        files = {"study.journal": carried_journal(Path(args.study_journal), plan)}
    _warn_of(spec)
    _say(_grid_summary(plan) + "; every cell checked by its worker")
    return _run(store.create(plan, spec.source, files), args)


def cmd_resume(args: argparse.Namespace) -> int:
    exp = _store().get(args.name)
    if args.retries is not None and args.retries < 0:
        raise UserError(f"--retries: must be >= 0, got {args.retries}")
    if args.retries is not None or args.retry_from is not None:
        from mosaic.runs import write_json_atomic

        if args.retries is not None:
            exp.stored_plan.retries = args.retries
        if args.retry_from is not None:
            exp.stored_plan.retry_from = args.retry_from
        write_json_atomic(exp.root / "plan.json", exp.stored_plan.to_dict())
    return _run(exp, args)


def _refresh(exp: Any) -> None:
    """Bring the journal up to date from the backend when one is reachable (nothing is started for this); when
    none is, from the run folders here: a run whose manifest says it ended is journaled so, the rest stay as the
    journal has them (a daemon stopped after an experiment cancel leaves its runs ended, and nothing running)."""
    from mosaic.experiments.backends import BackendUnavailable, status_from_run_store
    from mosaic.experiments.store import EXPERIMENT_CANCELLED, refresh_attempts

    cells = exp.cells()
    in_flight = [a.run_id for c in cells.values() for a in c.attempts if not a.ended]
    if not in_flight:
        return
    journaled = {a.run_id: (a.state, a.cause) for c in cells.values() for a in c.attempts}
    home, cancel_asked = _store().home, exp.cancel_requested()

    def from_folder(run_id: str) -> tuple[str, str]:
        found = status_from_run_store(home, run_id)
        if found is None:
            return journaled[run_id]
        state, cause = found
        if state == "cancelled" and cancel_asked and EXPERIMENT_CANCELLED not in cause:
            # the worker's own words ("received SIGTERM"); the daemon's reason was the experiment's cancel
            cause = f"{EXPERIMENT_CANCELLED} ({cause})" if cause else EXPERIMENT_CANCELLED
        return state, cause

    try:
        backend = _backend(exp, start=False)
    except BackendUnavailable:
        refresh_attempts(exp, cells, from_folder)
        return
    try:
        refresh_attempts(exp, cells, backend.status(in_flight).get)
    except BackendUnavailable:
        refresh_attempts(exp, cells, from_folder)
    finally:
        backend.close()


def _status_rows(exp: Any, refresh: bool = True) -> list[dict[str, Any]]:
    from mosaic.experiments.coordinator import cell_states

    if refresh:
        _refresh(exp)
    cells = exp.cells()
    states = cell_states(exp, cells)
    rows = []
    for cell in exp.plan.cells:
        state = cells[cell.cell_id]
        last = state.last
        rows.append({"cell": cell.cell_id, "configuration": cell.configuration, "env": cell.env, "seed": cell.seed,
                     "state": states[cell.cell_id], "attempts": len(state.attempts),
                     "run_id": last.run_id if last else None,
                     "causes": [a.cause for a in state.attempts if a.cause],
                     "last_cause": next((f"attempt {a.number}: {a.cause}" for a in reversed(state.attempts)
                                         if a.cause), "")})
    return rows


def _status_table(exp: Any, refresh: bool = True) -> str:
    rows = _status_rows(exp, refresh)
    table = _table([[r["cell"], r["configuration"], r["env"], str(r["seed"]), r["state"], str(r["attempts"]),
                     r["run_id"] or "-", r["last_cause"][:70]] for r in rows],
                   ["CELL", "CONFIGURATION", "ENV", "SEED", "STATE", "ATTEMPTS", "RUN", "LAST CAUSE"])
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    return table + "\n" + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))


def _study_table(status: dict[str, Any]) -> str:
    rows = []
    for c in status["contenders"]:
        best = c["best"]
        best_text = "-" if best is None else f"{best['value']:.4g} (trial {best['trial']})"
        rows.append([c["contender"], f"{c['asked']}/{c['trials']}", str(c["running"]), str(c["completed"]),
                     str(c["pruned"]), str(c["failed"]), best_text])
    return (f"study: {status['phase']}\n"
            + _table(rows, ["CONTENDER", "TRIALS", "RUNNING", "COMPLETED", "PRUNED", "FAILED", "BEST SO FAR"]))


def cmd_status(args: argparse.Namespace) -> int:
    exp = _store().get(args.name)
    study = None
    if exp.plan.study is not None:
        from mosaic.experiments.study.describe import study_status

        study = study_status(exp)
    if args.json:
        coordinator = exp.coordinator()
        print(json.dumps({"name": exp.name, "folder": str(exp.root), "coordinator_pid": coordinator and
                          coordinator.get("pid"), "cells": _status_rows(exp),
                          **({"study": study} if study is not None else {})}, indent=2))
        return 0
    coordinator = exp.coordinator()
    print(f"experiment {exp.name}: {exp.root}; "
          + (f"coordinator pid {coordinator['pid']}" if coordinator else "no coordinator running"))
    if study is not None:
        print(_study_table(study))
    print(_status_table(exp))
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    from mosaic.experiments import coordinator
    from mosaic.experiments.backends import BackendUnavailable

    exp = _store().get(args.name)
    running, backend = exp.coordinator(), None
    if running is None:  # otherwise the coordinator cancels its runs itself
        try:
            backend = _backend(exp, start=False)
        except BackendUnavailable:
            pass
    try:
        stopped = coordinator.cancel(exp, backend)
    finally:
        if backend is not None:
            backend.close()
    deadline = time.monotonic() + args.wait
    while exp.coordinator() is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    if running is not None:
        _say(f"experiment {exp.name}: cancel asked; its coordinator (pid {running['pid']}) stops the runs in flight")
    else:
        _say(f"experiment {exp.name}: cancel asked; {stopped} run(s) in flight asked to stop"
             + ("" if backend is not None else " (no daemon is running: nothing was in flight)"))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    from mosaic.experiments.coordinator import cell_states

    store = _store()
    rows = []
    for name in store.names():
        exp = store.get(name)
        states = cell_states(exp, exp.cells())
        counts = {s: sum(v == s for v in states.values()) for s in ("completed", "failed", "cancelled")}
        running = "yes" if exp.coordinator() else "no"
        rows.append([name, str(len(states)), str(counts["completed"]), str(counts["failed"]),
                     str(counts["cancelled"]), running])
    if not rows:
        print(f"no experiments yet in {store.root}")
        return 0
    print(_table(rows, ["EXPERIMENT", "CELLS", "COMPLETED", "FAILED", "CANCELLED", "COORDINATOR"]))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mosaic.experiments.collect import joint_report_input, report_input
    from mosaic.experiments.report import analyse, write_report
    from mosaic.experiments.report.tables import terminal_summary

    store = _store()
    exps = [store.get(name) for name in (args.name, *(args.joined or ()))]
    for exp in exps:
        _refresh(exp)
    exp = exps[0]
    if len(exps) == 1:
        data = report_input(exp, store.home)
        out = Path(args.out) if args.out else exp.root / "report"
    else:
        data = joint_report_input(exps, store.home)
        out = Path(args.out) if args.out else exp.root / ("report-with-" + "-".join(e.name for e in exps[1:]))
    data = _with_marl_eval(data, args)  # read and checked whole before anything is written
    analysis = analyse(data) if data.cells else None  # a study still tuning has no comparison yet
    path = write_report(out, data, analysis)
    # the table and where the files are on stderr: stdout stays the path of report.md, for scripts
    if analysis is not None:
        _say(terminal_summary(analysis))
    _say(f"files: {path.parent}/ ({', '.join(sorted(p.name for p in path.parent.iterdir()))})")
    sys.stderr.flush()
    print(path)
    return 0


#: The options that say how to read ``--marl-eval`` files: option -> its attribute.
MARL_EVAL_OPTIONS = {"--marl-eval-metric": "marl_eval_metric", "--marl-eval-return": "marl_eval_return",
                     "--marl-eval-steps": "marl_eval_steps", "--marl-eval-env": "marl_eval_env"}


def _with_marl_eval(data: Any, args: argparse.Namespace) -> Any:
    """``data`` with the algorithms of the ``--marl-eval`` files as contenders (:mod:`mosaic.experiments.marl_eval`),
    their stated units checked first; ``data`` itself without ``--marl-eval``."""
    from mosaic.experiments.marl_eval import DEFAULT_METRIC, check_units, join_marl_eval, read_marl_eval
    from mosaic.experiments.results import MOSAIC_UNITS, RETURN_UNITS, STEP_UNITS, Units

    files = getattr(args, "marl_eval", None) or []
    if not files:
        for option, attr in MARL_EVAL_OPTIONS.items():
            if getattr(args, attr, None):
                raise UserError(f"{option}: says how to read a marl-eval file, but no --marl-eval FILE is given")
        return data
    if not data.cells:
        raise UserError(f"--marl-eval: {data.name} is a study still tuning: nothing is compared yet to join a file to")
    metrics = _per_file(args.marl_eval_metric, files, "--marl-eval-metric", DEFAULT_METRIC)
    returns = _per_file(args.marl_eval_return, files, "--marl-eval-return", None, RETURN_UNITS, MOSAIC_UNITS.returns)
    steps = _per_file(args.marl_eval_steps, files, "--marl-eval-steps", None, STEP_UNITS, MOSAIC_UNITS.steps)
    units = [Units(r, x) for r, x in zip(returns, steps)]
    for u in units:
        check_units(u, data.metric)
    env_map = _env_map(args.marl_eval_env or [])
    read = [read_marl_eval(Path(f), m, data.final_fraction) for f, m in zip(files, metrics)]
    return join_marl_eval(data, list(zip(read, units)), env_map)


def _per_file(values: list[str] | None, files: list[str], option: str, default: str | None,
              words: dict[str, str] | None = None, ours: str | None = None) -> list[str]:
    """One value of ``option`` per file: given once (for every file) or once per file in their order; ``default``
    when not given (None: it is required, and the refusal lists ``words``, this experiment's ``ours`` named)."""
    if not values:
        if default is None:
            assert words is not None
            raise UserError(f"{option}: required with --marl-eval, since a marl-eval file carries no units; one of "
                            + ", ".join(f"{k} = {v}" for k, v in words.items()) + f"; this experiment's: {ours}")
        return [default] * len(files)
    if len(values) == 1:
        return values * len(files)
    if len(values) != len(files):
        plural = "s" if len(files) != 1 else ""
        raise UserError(f"{option}: given {len(values)} times for {len(files)} file{plural}; allowed: once (for every "
                        "file) or once per file, in the order of the files")
    return values


def _env_map(items: list[str]) -> dict[str, str]:
    """``--marl-eval-env TASK=ENV`` items as TASK -> ENV."""
    out: dict[str, str] = {}
    for item in items:
        task, sep, env = item.partition("=")
        if not sep or not task or not env:
            raise UserError(f"--marl-eval-env: {item!r} is not TASK=ENV (a task of the file, an env of the report)")
        if task in out:
            raise UserError(f"--marl-eval-env: the task {task!r} is mapped twice; allowed: once")
        out[task] = env
    return out


def _backend_flags(q: argparse.ArgumentParser) -> None:
    from mosaic.experiments.backends import BACKENDS

    q.add_argument("--backend", choices=BACKENDS, help="where the cells run (default: the spec's, or where the "
                                                       "experiment last ran; local: this machine's daemon; ray: an "
                                                       "existing Ray cluster, docs/cluster.md)")
    q.add_argument("--address", help="the backend's address (a Ray cluster: HOST:PORT)")
    q.add_argument("--storage", help="ray: a folder every node sees, where run folders are written (default: "
                                     "node-local folders copied to this machine when a cell ends)")
    q.add_argument("--node-home", dest="node_home", help="ray: MOSAIC_HOME on the nodes (worker environments are "
                                                         "found or built there; default: this machine's)")


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("experiment", help="grids of runs across workers, seeds and settings (docs/experiments.md)",
                       description="Plan, run, watch, cancel, resume and report experiments: grids of runs "
                                   "across workers, seeds and settings.")
    esub = p.add_subparsers(dest="action", required=True)
    q = esub.add_parser("plan", help="check every cell of a spec with its worker and print the grid; runs nothing")
    q.add_argument("spec", help="experiment spec (YAML or JSON)")
    q.add_argument("--json", action="store_true", help="the plan as JSON (each cell's normalised config)")
    q.add_argument("--no-check", action="store_true", help="expand the grid without asking the workers")
    q.set_defaults(func=cmd_plan)
    q = esub.add_parser("run", help="plan and run a spec (a spec already run resumes)")
    q.add_argument("spec", help="experiment spec (YAML or JSON)")
    q.add_argument("--name", help="the experiment's name (default: the spec's)")
    q.add_argument("--study-journal", metavar="FILE",
                   help="a study only: go on from this Optuna journal (a study's report folder carries it as "
                        "study.journal): its ended trials are kept, its trials in flight are run again")
    _backend_flags(q)
    q.set_defaults(func=cmd_run)
    q = esub.add_parser("resume", help="run what is left of an experiment: never repeats a completed cell")
    q.add_argument("name")
    q.add_argument("--retries", type=int, help="raise (or lower) how often a failed cell is run again")
    from mosaic.experiments.spec import RETRY_FROM

    q.add_argument("--retry-from", choices=RETRY_FROM,
                   help="where a retried cell starts from now on (the spec's retry_from): from scratch, or from "
                        "the newest checkpoint its earlier attempts saved")
    _backend_flags(q)
    q.set_defaults(func=cmd_resume)
    q = esub.add_parser("status", help="every cell's state, attempts, run and last failure cause")
    q.add_argument("name")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=cmd_status)
    q = esub.add_parser("cancel", help="stop an experiment: its runs in flight are cancelled")
    q.add_argument("name")
    q.add_argument("--wait", type=float, default=10.0, help="seconds to wait for its coordinator to stop")
    q.set_defaults(func=cmd_cancel)
    q = esub.add_parser("report", help="write the report folder: report.md, plots, scores.csv, marl_eval.json")
    q.add_argument("name")
    q.add_argument("--with", dest="joined", action="append", metavar="EXPERIMENT",
                   help="another experiment whose cells join this report, scored the same way (repeatable): "
                        "e.g. two libraries run as two experiments at one budget")
    q.add_argument("--out", help="folder to write (default: the experiment's report/, or report-with-OTHERS/ "
                                 "for a joint report)")
    from mosaic.experiments.results import RETURN_UNITS, STEP_UNITS

    q.add_argument("--marl-eval", dest="marl_eval", action="append", metavar="FILE",
                   help="a marl-eval JSON file (BenchMARL's, a published one, another report's marl_eval.json) whose "
                        "algorithms join the report as contenders MOSAIC did not run, scored the same way "
                        "(repeatable); its units must be stated and be this experiment's")
    q.add_argument("--marl-eval-metric", action="append", metavar="NAME",
                   help="the metric's key in the file (default: return, BenchMARL's); once for every file, or once "
                        "per file in their order")
    q.add_argument("--marl-eval-return", action="append", choices=list(RETURN_UNITS),
                   help="required with --marl-eval: what the file's return counts, summed over agents or per agent "
                        "(BenchMARL's return is per agent); a file joins only as summed, MOSAIC's units; once, or "
                        "once per file")
    q.add_argument("--marl-eval-steps", action="append", choices=list(STEP_UNITS),
                   help="required with --marl-eval: what the file's step_count counts (BenchMARL's: env steps); a "
                        "file joins only as env_steps, MOSAIC's units; once, or once per file")
    q.add_argument("--marl-eval-env", action="append", metavar="TASK=ENV",
                   help="join the files' task TASK to this report's env ENV (default: the env of the task's name; "
                        "repeatable)")
    q.set_defaults(func=cmd_report)
    q = esub.add_parser("list", help="every experiment with its counts")
    q.set_defaults(func=cmd_list)
