"""marl-eval files read back: runs made elsewhere (BenchMARL, a published file, another MOSAIC report's
``marl_eval.json``) scored as MOSAIC scores its own runs, to join a report as contenders
(``mosaic experiment report NAME --marl-eval FILE``).

The layout is marl-eval's raw experiment data, as BenchMARL 1.5.2's ``JsonWriter``
(``benchmarl/experiment/logger.py``) and MOSAIC's own report (:func:`mosaic.experiments.report.exports.marl_eval_data`)
write it::

    {ENVIRONMENT: {TASK: {ALGORITHM: {"seed_<n>": {"step_<k>": {"step_count": <steps>, METRIC: [values], ...},
                                                   ...,
                                                   "absolute_metrics": {METRIC: [values], ...}}}}}}

A file carries no units. What METRIC's return counts (summed over agents, or per agent) and what ``step_count``
counts (env steps, or agent steps) are the user's to state, and a file joins a report only in the units of
MOSAIC's own scores (:data:`~mosaic.experiments.results.MOSAIC_UNITS`): nothing is converted, and a difference is
refused naming it. BenchMARL's ``return`` is the return per agent (each group's episode reward is averaged over
its agents, then over the groups) over env steps (its ``total_frames``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from mosaic.errors import UserError
from mosaic.experiments.report.inputs import MarlEvalSource, ReportCell, ReportInput
from mosaic.experiments.results import (MOSAIC_RETURN, MOSAIC_UNITS, RETURN_UNITS, STEP_UNITS, RunResult, Units,
                                        final_score, late_change, whole_gain)
from mosaic.run_status import JobState, RunState
from mosaic.scoring.curves import increasing

#: The metric read when none is named: BenchMARL's mean return over its groups.
DEFAULT_METRIC = "return"
#: The layout, as the refusals quote it.
LAYOUT = ('{ENVIRONMENT: {TASK: {ALGORITHM: {"seed_<n>": {"step_<k>": {"step_count": <steps>, METRIC: [values]}, '
          '..., "absolute_metrics": {METRIC: [values]}}}}}}')
ABSOLUTE = "absolute_metrics"
_SEED = re.compile(r"seed_(-?\d+)")
_STEP = re.compile(r"step_(\d+)")


@dataclass(frozen=True)
class MarlEvalRuns:
    """One algorithm's runs on one task of a marl-eval file: seed -> what it scored, as
    :class:`~mosaic.experiments.results.RunResult` (``xs``: the step counts, ``ys``: the metric; ``final_score``
    None: the file holds no value of the metric for that seed)."""

    environment: str
    task: str
    algorithm: str
    seeds: dict[int, RunResult]

    @property
    def where(self) -> str:
        """``ENVIRONMENT/TASK``."""
        return f"{self.environment}/{self.task}"


@dataclass(frozen=True)
class MarlEvalFile:
    """A marl-eval file read for one metric: its runs per (environment, task, algorithm), and every metric it
    holds (for the refusals)."""

    path: Path
    metric: str
    runs: tuple[MarlEvalRuns, ...]
    metrics: tuple[str, ...]


def read_marl_eval(path: Path | str, metric: str = DEFAULT_METRIC, final_fraction: float = 0.1) -> MarlEvalFile:
    """Read ``path`` and score each seed of each (environment, task, algorithm) on ``metric``.

    A step's value is the mean of its list (the episodes evaluated there). A seed's curve is its step points in
    the order of ``step_count``; its final score is the mean over the points at ``step_count >= (1 -
    final_fraction) * the last step_count``, at least the last point: the window MOSAIC's report scores its own
    runs by (:func:`~mosaic.experiments.results.final_score`), with the report's ``score.final_fraction``.
    ``absolute_metrics`` gives the score only to a seed without step points for ``metric``, since producers fill
    it differently: marl-eval's convention is an evaluation of the final policy over more episodes, BenchMARL
    1.5.2's ``JsonWriter`` keeps the largest episode return of any evaluation (a best case, not a final score),
    MOSAIC's is the final-window score again. Such a seed has no curve (``xs`` empty).

    :class:`~mosaic.errors.UserError` (exit 2) when the file is missing, unreadable, not JSON, not in the layout
    (naming where), or holds no value of ``metric`` at all (listing the metrics it has).
    """
    path = Path(path)
    data = _load(path)
    runs, metrics = [], set()
    for environment, tasks in _object(path, "the top level", data, "an object of environments").items():
        for task, algorithms in _object(path, environment, tasks, "an object of tasks").items():
            where = f"{environment}/{task}"
            for algorithm, seeds in _object(path, where, algorithms, "an object of algorithms").items():
                here = f"{where}/{algorithm}"
                scored: dict[int, RunResult] = {}
                for key, run in _object(path, here, seeds, 'an object of "seed_<n>" runs').items():
                    found = _SEED.fullmatch(key)
                    if found is None:
                        _refuse_layout(path, here, f'the key {key!r} (a run is "seed_<n>", n a whole number)')
                    if int(found.group(1)) in scored:
                        _refuse_layout(path, here, f"the key {key!r} names seed {int(found.group(1))} again")
                    points, absolute = _points(path, f"{here}/{key}", run)
                    metrics.update(k for values in points.values() for k in values)
                    metrics.update(absolute)
                    scored[int(found.group(1))] = _score(environment, key, points, absolute, metric, final_fraction)
                runs.append(MarlEvalRuns(str(environment), str(task), str(algorithm), scored))
    metrics.discard("step_count")
    if metric not in metrics:
        raise UserError(f"--marl-eval-metric: {metric!r} is not in {path}; its metrics: "
                        f"{', '.join(sorted(metrics)) or 'none'}")
    return MarlEvalFile(path, metric, tuple(runs), tuple(sorted(metrics)))


def _load(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"--marl-eval: {path}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--marl-eval: {path}: cannot be read ({exc})") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise UserError(f"--marl-eval: {path} is not JSON ({exc})") from None


def _refuse_layout(path: Path, where: str, what: str) -> NoReturn:
    raise UserError(f"--marl-eval: {path} is not in marl-eval's layout {LAYOUT}: at {where}, {what}")


def _object(path: Path, where: str, value: Any, expected: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not value:
        _refuse_layout(path, where, f"{'an empty object' if value == {} else 'a JSON ' + type(value).__name__} "
                                    f"where {expected} belongs")
    return value


def _points(path: Path, where: str, run: Any) -> tuple[dict[int, dict[str, Any]], dict[str, Any]]:
    """A run's step points (their index k -> the point) and its ``absolute_metrics``, their layout checked."""
    points: dict[int, dict[str, Any]] = {}
    absolute: dict[str, Any] = {}
    for key, value in _object(path, where, run, 'an object of "step_<k>" points').items():
        if key == ABSOLUTE:
            absolute = _object(path, f"{where}/{key}", value, "an object of metrics")
            continue
        found = _STEP.fullmatch(key)
        if found is None:
            _refuse_layout(path, where, f'the key {key!r} (a run holds "step_<k>" points and "{ABSOLUTE}")')
        point = _object(path, f"{where}/{key}", value, 'an object with "step_count"')
        count = point.get("step_count")
        if isinstance(count, bool) or not isinstance(count, (int, float)) or not math.isfinite(count) \
                or count < 0 or count != int(count):
            _refuse_layout(path, f"{where}/{key}", f"step_count is {count!r}, not a whole number of steps >= 0")
        points[int(found.group(1))] = point
    for k, point in points.items():
        for name, value in point.items():
            if name != "step_count":
                _values(path, f"{where}/step_{k}/{name}", value)
    for name, value in absolute.items():
        _values(path, f"{where}/{ABSOLUTE}/{name}", value)
    return points, absolute


def _values(path: Path, where: str, value: Any) -> None:
    """Refuse a metric's value at a point that is not a list of numbers (or one number)."""
    items = value if isinstance(value, list) else [value]
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in items):
        _refuse_layout(path, where, f"{json.dumps(value)[:80]} is not a number or a list of numbers")


def _mean(value: Any) -> float | None:
    """The mean of a metric's values at a point (checked by :func:`_values`), non-finite ones left out; None when
    none is left."""
    finite = [float(v) for v in (value if isinstance(value, list) else [value]) if math.isfinite(v)]
    return math.fsum(finite) / len(finite) if finite else None


def _score(environment: str, seed_key: str, points: dict[int, dict[str, Any]], absolute: dict[str, Any],
           metric: str, final_fraction: float) -> RunResult:
    """One seed's curve and final score (see :func:`read_marl_eval`)."""
    pairs = []
    for _, point in sorted(points.items(), key=lambda item: (item[1]["step_count"], item[0])):
        value = _mean(point[metric]) if metric in point else None
        if value is not None:
            pairs.append((float(point["step_count"]), value))
    xs, ys = (tuple(v) for v in increasing([x for x, _ in pairs], [y for _, y in pairs]))
    if ys:
        final = final_score(xs, ys, final_fraction)
    else:
        final = _mean(absolute[metric]) if metric in absolute else None
    return RunResult(run_id=seed_key, status=RunState.COMPLETED.manifest, final_score=final, xs=xs, ys=ys,
                     env_steps=xs[-1] if xs else None, env_family=str(environment),
                     late_change=late_change(xs, ys, final_fraction) if ys else None,
                     gain=whole_gain(xs, ys, final_fraction))


# -- units ----------------------------------------------------------------------------------------------------
def check_units(units: Units, metric: str) -> None:
    """Refuse (exit 2) to join a file whose stated ``units`` are not those of the experiment's scores, naming the
    option and the value allowed; or any file when the experiment scores ``metric``, whose units MOSAIC does not
    state (anything but :data:`~mosaic.experiments.results.MOSAIC_RETURN`)."""
    if metric != MOSAIC_RETURN:
        raise UserError(f"--marl-eval: this experiment's score is {metric!r} (score.metric), whose units MOSAIC does "
                        f"not state; a marl-eval file joins a report scored on {MOSAIC_RETURN} "
                        f"({MOSAIC_UNITS.describe()})")
    if units.returns != MOSAIC_UNITS.returns:
        raise UserError(f"--marl-eval-return: {units.returns}, but this experiment's scores are "
                        f"{RETURN_UNITS[MOSAIC_UNITS.returns]} ({MOSAIC_RETURN}); allowed: {MOSAIC_UNITS.returns} "
                        "(MOSAIC does not convert one into the other)")
    if units.steps != MOSAIC_UNITS.steps:
        raise UserError(f"--marl-eval-steps: {units.steps}, but this experiment's curves are over "
                        f"{STEP_UNITS[MOSAIC_UNITS.steps]} (timesteps_total); allowed: {MOSAIC_UNITS.steps} "
                        "(MOSAIC does not convert one into the other)")


# -- joining a report ---------------------------------------------------------------------------------------------
def contender_label(algorithm: str, file_label: str) -> str:
    """The configuration label of a file's algorithm in a report: ``marl-eval:ALGORITHM (FILE)``."""
    return f"marl-eval:{algorithm} ({file_label})"


def join_marl_eval(data: ReportInput, files: list[tuple[MarlEvalFile, Units]],
                   env_map: dict[str, str] | None = None) -> ReportInput:
    """``data`` with each file's algorithms as contenders: one cell per seed, its result read from the file
    (:attr:`ReportCell.read`), labelled :func:`contender_label` (by the file's name; by its path where two files
    share a name). A task joins the report's env of its name, or the one ``env_map`` (TASK -> ENV) names; tasks
    that match no env are left out and listed (:class:`MarlEvalSource`).

    :class:`~mosaic.errors.UserError` (exit 2): units that differ from the experiment's (:func:`check_units`), a
    file given twice, a mapping whose task no file has or whose env the report lacks, a file none of whose tasks
    matches an env, two tasks of a file joining one env, a label the report already has.
    """
    env_map = dict(env_map or {})
    for _, units in files:
        check_units(units, data.metric)
    envs = list(dict.fromkeys(c.env for c in data.cells))
    paths = Counter(f.path.resolve() for f, _ in files)
    twice = [p for p, n in paths.items() if n > 1]
    if twice:
        raise UserError(f"--marl-eval: {twice[0]} is named twice; allowed: each file once")
    tasks = {r.task for f, _ in files for r in f.runs}
    for task, env in env_map.items():
        if task not in tasks:
            raise UserError(f"--marl-eval-env: {task}={env}: no file has the task {task!r}; their tasks: "
                            f"{', '.join(sorted(tasks))}")
        if env not in envs:
            raise UserError(f"--marl-eval-env: {task}={env}: this report has no env {env!r}; its envs: "
                            f"{', '.join(envs)}")
    names = Counter(f.path.name for f, _ in files)
    cells, sources = list(data.cells), list(data.marl_eval)
    taken = {c.configuration for c in data.cells}
    for file, units in files:
        label = file.path.name if names[file.path.name] == 1 else str(file.path)
        new, source = _contenders(file, units, label, envs, env_map)
        clash = sorted({c.configuration for c in new} & taken)
        if clash:
            raise UserError(f"--marl-eval: {file.path}: the contender {clash[0]!r} is already a configuration of "
                            "this report; allowed: a file of another name")
        taken |= {c.configuration for c in new}
        cells += new
        sources.append(source)
    return dataclasses.replace(data, cells=cells, marl_eval=sources)


def _contenders(file: MarlEvalFile, units: Units, label: str, envs: list[str],
                env_map: dict[str, str]) -> tuple[list[ReportCell], MarlEvalSource]:
    """One file's cells (one per seed of each algorithm on a task that matches an env) and what the report says of
    the file."""
    joined, left_out, cells = [], [], []
    seen: dict[tuple[str, str], str] = {}
    for runs in file.runs:
        env = env_map.get(runs.task, runs.task)
        if env not in envs:
            left_out.append(runs.where)
            continue
        configuration = contender_label(runs.algorithm, label)
        if (configuration, env) in seen:
            raise UserError(f"--marl-eval: {file.path}: {seen[(configuration, env)]} and {runs.where} both give "
                            f"{runs.algorithm!r} on env {env}; allowed: one task per env in a file")
        seen[(configuration, env)] = runs.where
        joined.append((runs.where, runs.algorithm, configuration, env))
        for seed, result in sorted(runs.seeds.items()):
            cells.append(ReportCell(cell_id=f"{label}/{runs.where}/{runs.algorithm}/seed_{seed}",
                                    configuration=configuration, env=env, seed=seed, status=JobState.COMPLETED,
                                    run_id=None, run_dir=None, settings={}, worker="marl-eval",
                                    algorithm=runs.algorithm,
                                    budget=int(result.env_steps) if result.env_steps is not None else None,
                                    read=result))
    if not joined:
        raise UserError(f"--marl-eval: no task of {file.path} matches an env of this report: the file has "
                        f"{', '.join(sorted(set(left_out)))}; the report's envs: {', '.join(envs)}; map a task "
                        "with --marl-eval-env TASK=ENV")
    return cells, MarlEvalSource(path=file.path, metric=file.metric, units=units, joined=tuple(joined),
                                 left_out=tuple(dict.fromkeys(left_out)))
