"""An experiment spec, and the grid of cells it stands for (pure: no workers, no files but the spec's own).

A spec is one YAML or JSON file::

    name: spread-equal-settings      # the experiment's folder under MOSAIC_HOME/experiments
    base:                            # a base config per worker: inline, or a config file's path
      ray: ../examples/ray_spread_mappo.json
      xuance: {algorithm: mappo, environment: {family: mpe, env_id: simple_spread_v3}}
    settings:                        # the same for every cell
      total_timesteps: 30000
      gae_lambda: 0.95
    translate:                       # a name stated once, mapped to each worker's own config path
      gae_lambda: {ray: algo_params.lambda_, xuance: algo_params.gae_lambda}
      algorithm:                     # ... and, where a library words a value otherwise, its values too
        ray: {path: policy_configuration, values: {mappo: SHARED_VALUE_FUNCTION, ippo: INDEPENDENT}}
    axes:                            # what varies: a config path (or a translated name) -> its values
      worker: [ray, xuance]
      algorithm: [mappo, ippo]
    combine: product                 # or zip: the axes' i-th values together
    seeds: 5                         # seeds 0..4, or a list [1, 7, 11]
    retries: 2                       # a failed or cancelled cell is run again up to this many times
    retry_from: start                # or checkpoint: a retry continues from the last checkpoint saved before
    continue_from: spread-200k       # optional: each cell goes on from the same cell's run of that experiment
    score: {metric: episode_return_mean, final_fraction: 0.1}
    normalise: {simple_spread_v3: {random: -120.0, reference: -40.0}}   # or random: measure, reference: best

Every cell is one run: the worker's base config, then ``settings``, then the cell's axis values, then
its seed. A path names a config field with dots (``algo_params.clip_param``, ``environment.env_id``);
a value replaces what is at its path (an object replaces the whole section). A name listed under
``translate`` is written at the path given for the cell's worker (a worker missing from the mapping
takes the name as its path; ``null`` says the worker has no such setting, and a cell that needs it is
refused; ``{path: ..., values: {...}}`` also rewords values: a value listed is written as the library's own
word for it, one not listed as it is). A cell's *configuration* is its axis values except the environment's and the seed: the
statistics compare configurations over seeds, per environment.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mosaic.configkit import read_document, set_path
from mosaic.errors import UserError
from mosaic.experiments.backends import BACKENDS
from mosaic.runs import NAME_PATTERN

#: The spec's own keys.
SPEC_KEYS = ("name", "description", "base", "settings", "translate", "axes", "combine", "seeds", "retries",
             "retry_from", "continue_from", "score", "normalise", "report", "backend")
COMBINE = ("product", "zip")
#: Where a retried cell starts: from scratch, or from the newest checkpoint its earlier attempts saved.
RETRY_FROM = ("start", "checkpoint")
#: Paths that say which environment a cell runs: kept out of its configuration's label.
ENV_PATHS = ("environment", "env_id", "env")
#: ``normalise.ENV.random``: measure the random score (runs of the random reference worker)
MEASURE = "measure"
#: ``normalise.ENV.reference``: the best configuration's mean score on that env
BEST = "best"
#: the worker that measures a random score, and the configuration label of its runs
RANDOM_WORKER = "random"
RANDOM_PLAY = "random play"


@dataclass(frozen=True)
class Score:
    """What a run scores: ``metric`` of its ``metrics`` events, averaged over the last ``final_fraction`` of
    its env steps (evaluators: their final value)."""

    metric: str = "episode_return_mean"
    higher_is_better: bool = True
    final_fraction: float = 0.1
    #: a report calls a configuration's curves levelled off when their last ``final_fraction`` of env steps added
    #: less than this share of their whole gain (the whole interval)
    level_within: float = 0.02


#: Scores every training worker's ``metrics`` events carry (docs/telemetry.md): a spec may name another metric
#: (a worker's own, as Tianshou's ``test_return_mean``), which is then said to hold only for the runs that log it.
COMMON_METRICS = ("episode_return_mean", "episode_return_min", "episode_return_max", "episode_len_mean",
                  "env_steps_per_s")


def metric_warning(score: Score) -> str | None:
    """What a plan says when ``score.metric`` is not one every training worker logs (a worker's own, or a typo):
    a run that never logs it is left out of the report, which is known only once the runs have run."""
    if score.metric in COMMON_METRICS:
        return None
    import difflib

    close = difflib.get_close_matches(score.metric, COMMON_METRICS, n=1)
    return (f"warning: score.metric: {score.metric!r} is not one of the metrics every training worker logs "
            f"({', '.join(COMMON_METRICS)}){f'; did you mean {close[0]!r}?' if close else ''}: a cell whose runs "
            "never log it is left out of the report")


@dataclass(frozen=True)
class ReportSettings:
    reps: int = 2000
    confidence: float = 0.95
    seed: int = 0


@dataclass(frozen=True)
class Cell:
    """One run of the grid: ``config`` is what the worker is given (before it fills its defaults)."""

    cell_id: str
    worker: str
    seed: int
    settings: dict[str, Any]
    config: dict[str, Any]
    configuration: str
    env: str
    #: a run of the random reference worker that measures the env's random score (``normalise``: measure)
    baseline: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"cell_id": self.cell_id, "worker": self.worker, "seed": self.seed, "settings": self.settings,
                "configuration": self.configuration, "env": self.env, "config": self.config,
                **({"baseline": True} if self.baseline else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Cell":
        return cls(str(data["cell_id"]), str(data["worker"]), int(data["seed"]), dict(data["settings"]),
                   dict(data["config"]), str(data["configuration"]), str(data["env"]), bool(data.get("baseline")))


@dataclass
class ExperimentSpec:
    name: str
    base: dict[str, dict[str, Any]]
    axes: dict[str, list[Any]]
    seeds: list[int]
    settings: dict[str, Any] = field(default_factory=dict)
    translate: dict[str, dict[str, Any]] = field(default_factory=dict)
    combine: str = "product"
    retries: int = 2
    retry_from: str = "start"
    #: An earlier experiment whose cells this one continues (a larger budget): each cell restores the newest
    #: checkpoint of the earlier cell with the same worker, configuration, env and seed (see ``continue_cells``).
    continue_from: str | None = None
    score: Score = field(default_factory=Score)
    #: env -> (random score, reference score); a random score of None is measured by the experiment: it runs
    #: the random reference worker on that env once per seed (``baseline_cells``); a reference of None is the
    #: best configuration's mean score on that env (``best``)
    normalise: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    #: env -> env steps of each random-play run (default: the smallest budget of that env's cells)
    measure_timesteps: dict[str, int] = field(default_factory=dict)
    report: ReportSettings = field(default_factory=ReportSettings)
    backend: str = "local"
    description: str = ""
    #: The spec as read (base files inlined): what the experiment folder keeps.
    source: dict[str, Any] = field(default_factory=dict)

    def cells(self) -> list[Cell]:
        """The grid: every combination of the axes (or their zip) crossed with every seed."""
        names = list(self.axes)
        values = [self.axes[n] for n in names]
        combos = list(zip(*values)) if self.combine == "zip" else list(itertools.product(*values))
        out: list[Cell] = []
        for combo in combos or [()]:
            chosen = dict(zip(names, combo))
            worker = self._worker_of(chosen)
            for seed in self.seeds:
                index = len(out)
                config = copy.deepcopy(self.base.get(worker, {}))
                config.pop("run_id", None)
                for name, value in [*self.settings.items(), *chosen.items()]:
                    if name == "worker":
                        continue
                    where = f"cell c{index:03d} ({label(chosen) or 'the only configuration'})"
                    set_path(config, self.path_for(name, worker, where),
                             copy.deepcopy(self.value_for(name, worker, value)), where)
                config["worker"] = worker
                config["seed"] = seed
                out.append(Cell(f"c{index:03d}", worker, seed, chosen, config,
                                label({k: v for k, v in chosen.items() if not self.is_env_axis(k)}) or "default",
                                env_label(config)))
        return out + self.baseline_cells(out)

    def baseline_cells(self, grid: list[Cell]) -> list[Cell]:
        """For every env whose random score is measured (``normalise``: ``random: measure``), one run of the
        random reference worker per seed, on the environment of that env's first cell, for
        ``measure_timesteps`` env steps (default: the smallest budget of that env's cells). Its score, as any
        run's, is the mean metric over its last ``score.final_fraction``; the env's random score is their mean."""
        out: list[Cell] = []
        for env, (random_score, _) in self.normalise.items():
            if random_score is not None:
                continue
            cells = [c for c in grid if c.env == env]
            if not cells:
                continue  # an env the grid does not have: make_plan names it
            budgets = [c.config["total_timesteps"] for c in cells if isinstance(c.config.get("total_timesteps"), int)]
            steps = self.measure_timesteps.get(env) or (min(budgets) if budgets else None)
            if steps is None:
                raise UserError(f"normalise.{env}.measure_timesteps: the cells of {env} give no total_timesteps; "
                                f"allowed: a number of env steps for the random-play runs")
            for seed in self.seeds:
                config = {"worker": RANDOM_WORKER, "seed": seed, "total_timesteps": steps,
                          "environment": copy.deepcopy(cells[0].config.get("environment")),
                          "reporting": {"every_timesteps": max(1, steps // 100)}}
                out.append(Cell(f"c{len(grid) + len(out):03d}", RANDOM_WORKER, seed, {"worker": RANDOM_WORKER},
                                config, RANDOM_PLAY, env, baseline=True))
        return out

    def _worker_of(self, chosen: Mapping[str, Any]) -> str:
        if "worker" in chosen:
            return str(chosen["worker"])
        return next(iter(self.base))

    def path_for(self, name: str, worker: str, where: str) -> str:
        mapping = self.translate.get(name)
        if mapping is None or worker not in mapping:
            return name
        path = mapping[worker]
        if isinstance(path, dict):
            return str(path["path"])
        if path is None:
            raise UserError(f"{where}: {name}: worker {worker!r} has no such setting (translate.{name}.{worker} "
                            "is null); allowed: leave it out of the cells of that worker")
        return path

    def value_for(self, name: str, worker: str, value: Any) -> Any:
        """``value`` in the worker's own words (a translation's ``values``), else as it is."""
        entry = self.translate.get(name, {}).get(worker)
        if isinstance(entry, dict) and isinstance(value, (str, int, float, bool)) and str(value) in entry["values"]:
            return entry["values"][str(value)]
        return value

    def is_env_axis(self, name: str) -> bool:
        paths = [name, *((p["path"] if isinstance(p, dict) else p) for p in self.translate.get(name, {}).values()
                         if p)]
        return any(p.split(".")[0] in ENV_PATHS for p in paths)


def label(values: Mapping[str, Any]) -> str:
    """``worker=ray algorithm=mappo``: axis values in the spec's order, compact JSON for objects."""
    return " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v, sort_keys=True)}" for k, v in values.items())


def env_label(config: Mapping[str, Any]) -> str:
    env = config.get("environment")
    if isinstance(env, Mapping):
        for key in ("env_id", "env_ids"):
            value = env.get(key)
            if value:
                return value if isinstance(value, str) else "+".join(map(str, value))
        if env.get("family"):
            return str(env["family"])
    return str(env) if isinstance(env, str) and env else "default"


# -- reading and checking ------------------------------------------------------------------------------
def read_spec(path: str | Path) -> ExperimentSpec:
    """The spec at ``path``, checked; :class:`UserError` naming the field for anything wrong."""
    path = Path(path)
    data = read_document(path, "spec")
    return parse_spec(data, base_dir=path.parent)


def _score_or(value: Any, word: str, where: str, what: str, meaning: str) -> float | None:
    """A score given as a number, or None for ``word`` (what the experiment finds out itself)."""
    if value == word:
        return None
    if isinstance(value, str):
        raise UserError(f"{where}: {value!r} is neither a number nor {word}; allowed: {what}, or {word} ({meaning})")
    return float(_number(value, where))


def _number(value: Any, where: str, *, low: float | None = None, high: float | None = None,
            integer: bool = False) -> Any:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or (not integer and not math.isfinite(value)):
        raise UserError(f"{where}: expected {'an integer' if integer else 'a number'}, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"{'>= ' + format(low, 'g') if low is not None else ''}" + \
                 (f"{' and ' if low is not None else ''}<= {high:g}" if high is not None else "")
        raise UserError(f"{where}: {value!r} is out of range; allowed: {bounds}")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _keys(value: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in value:
        if key not in allowed:
            raise UserError(f"{where}{key}: unknown field; allowed: {', '.join(allowed)}")


def parse_spec(data: Mapping[str, Any], base_dir: Path = Path(".")) -> ExperimentSpec:
    _keys(data, SPEC_KEYS, "")
    name = data.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        what = "not given" if name is None else f"{name!r} is not a valid experiment name"
        raise UserError(f"name: {what}; allowed: letters, digits, '.', '_', '-', 1 to 64 characters, starting with "
                        "a letter or digit")
    base_in = _object(data.get("base", {}), "base")
    base: dict[str, dict[str, Any]] = {}
    for worker, value in base_in.items():
        if isinstance(value, str):
            file = (base_dir / value)
            value = read_document(file, f"base.{worker}")
        value = dict(_object(value, f"base.{worker}"))
        named = value.pop("worker", worker)
        if named != worker:
            raise UserError(f"base.{worker}: the config names worker {named!r}; allowed: {worker!r} or no worker")
        base[worker] = value
    axes_in = _object(data.get("axes", {}), "axes")
    axes: dict[str, list[Any]] = {}
    for axis, values in axes_in.items():
        if axis in ("seed", "run_id"):
            raise UserError(f"axes.{axis}: not an axis; allowed: seeds are given by 'seeds', run ids are made "
                            "by the experiment")
        if not isinstance(values, list) or not values:
            raise UserError(f"axes.{axis}: expected a non-empty list of values, got {values!r}")
        axes[axis] = values
    workers = [str(w) for w in axes.get("worker", [])]
    for w in workers:
        if not isinstance(w, str) or not w:
            raise UserError(f"axes.worker: {w!r} is not a worker name")
    if not workers and len(base) != 1:
        raise UserError("base: name exactly one worker's base config, or vary 'worker' under axes; "
                        f"got {', '.join(base) or 'none'}")
    combine = data.get("combine", "product")
    if combine not in COMBINE:
        raise UserError(f"combine: {combine!r} is not a way to combine the axes; allowed: {', '.join(COMBINE)}")
    if combine == "zip" and len({len(v) for v in axes.values()}) > 1:
        lengths = ", ".join(f"{k} {len(v)}" for k, v in axes.items())
        raise UserError(f"axes: combine 'zip' needs every axis to have as many values ({lengths}); "
                        "allowed: equal lengths, or combine 'product'")
    seeds_in = data.get("seeds", 3)
    if isinstance(seeds_in, list):
        if not seeds_in:
            raise UserError("seeds: expected a count or a non-empty list of integers, got []")
        seeds = [_number(s, f"seeds[{i}]", low=0, integer=True) for i, s in enumerate(seeds_in)]
        if len(set(seeds)) != len(seeds):
            raise UserError(f"seeds: {seeds} repeats a seed; allowed: distinct integers")
    else:
        seeds = list(range(_number(seeds_in, "seeds", low=1, high=10_000, integer=True)))
    settings = dict(_object(data.get("settings", {}), "settings"))
    for key in ("seed", "worker", "run_id"):
        if key in settings:
            raise UserError(f"settings.{key}: not a setting; allowed: 'seeds' for seeds, axes.worker for workers")
    translate: dict[str, dict[str, str | None]] = {}
    for name_, mapping in _object(data.get("translate", {}), "translate").items():
        mapping = _object(mapping, f"translate.{name_}")
        for worker, path in mapping.items():
            where = f"translate.{name_}.{worker}"
            if isinstance(path, dict):
                _keys(path, ("path", "values"), f"{where}.")
                values = path.get("values", {})
                if not isinstance(values, dict):
                    raise UserError(f"{where}.values: expected an object of spec value -> the library's value")
                mapping[worker] = path = {"path": path.get("path"), "values": {str(k): v for k, v in values.items()}}
                path = path["path"]
                where += ".path"
            if path is not None and (not isinstance(path, str) or any(not p for p in path.split("."))):
                raise UserError(f"{where}: {path!r} is not a config path; allowed: dotted field names such as "
                                "algo_params.lambda_, null, or {path: ..., values: {...}}")
        translate[name_] = dict(mapping)
    retries = _number(data.get("retries", 2), "retries", low=0, high=100, integer=True)
    retry_from = data.get("retry_from", "start")
    if retry_from not in RETRY_FROM:
        raise UserError(f"retry_from: {retry_from!r} is not where a retry starts; allowed: {', '.join(RETRY_FROM)}")
    continue_from = data.get("continue_from")
    if continue_from is not None and (not isinstance(continue_from, str) or not NAME_PATTERN.match(continue_from)):
        raise UserError(f"continue_from: {continue_from!r} is not an experiment name; allowed: the name of an "
                        "experiment in this MOSAIC_HOME (`mosaic experiment list`)")
    if continue_from is not None and continue_from == name:
        raise UserError(f"continue_from: {name!r} is this experiment; allowed: an earlier experiment's name")
    score_in = _object(data.get("score", {}), "score")
    _keys(score_in, ("metric", "higher_is_better", "final_fraction", "level_within"), "score.")
    metric = score_in.get("metric", Score.metric)
    if not isinstance(metric, str) or not metric:
        raise UserError(f"score.metric: expected a metric name such as episode_return_mean, got {metric!r}")
    hib = score_in.get("higher_is_better", True)
    if not isinstance(hib, bool):
        raise UserError(f"score.higher_is_better: expected true or false, got {hib!r}")
    score = Score(metric, hib, float(_number(score_in.get("final_fraction", 0.1), "score.final_fraction",
                                             low=0.0, high=1.0)),
                  float(_number(score_in.get("level_within", Score.level_within), "score.level_within",
                                low=0.0, high=1.0)))
    normalise: dict[str, tuple[float | None, float | None]] = {}
    measure_timesteps: dict[str, int] = {}
    for env, pair in _object(data.get("normalise", {}), "normalise").items():
        pair = _object(pair, f"normalise.{env}")
        _keys(pair, ("random", "reference", "measure_timesteps"), f"normalise.{env}.")
        if "random" not in pair or "reference" not in pair:
            raise UserError(f"normalise.{env}: give both scores; allowed: {{random: NUMBER or {MEASURE}, "
                            f"reference: NUMBER or {BEST}}}")
        measured = pair["random"] == MEASURE
        low = _score_or(pair["random"], MEASURE, f"normalise.{env}.random", "a random score",
                        "runs of the random worker measure it")
        high = _score_or(pair["reference"], BEST, f"normalise.{env}.reference", "a reference score",
                         "the best configuration's mean score there")
        if low is not None and low == high:
            raise UserError(f"normalise.{env}: random and reference are both {low:g}; allowed: two different scores")
        if "measure_timesteps" in pair:
            if not measured:
                raise UserError(f"normalise.{env}.measure_timesteps: only with random: {MEASURE}; allowed: leave it "
                                "out, or measure the random score")
            measure_timesteps[str(env)] = int(_number(pair["measure_timesteps"],
                                                      f"normalise.{env}.measure_timesteps", low=1, integer=True))
        normalise[str(env)] = (low, high)
    report_in = _object(data.get("report", {}), "report")
    _keys(report_in, ("reps", "confidence", "seed"), "report.")
    report = ReportSettings(int(_number(report_in.get("reps", 2000), "report.reps", low=100, high=100_000,
                                        integer=True)),
                            float(_number(report_in.get("confidence", 0.95), "report.confidence",
                                          low=0.5, high=0.999)),
                            int(_number(report_in.get("seed", 0), "report.seed", low=0, integer=True)))
    backend = data.get("backend", "local")
    if backend not in BACKENDS:
        raise UserError(f"backend: {backend!r} is not a backend here; allowed: {', '.join(BACKENDS)}")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise UserError("description: expected text")
    source = {**{k: copy.deepcopy(v) for k, v in data.items()}, "base": copy.deepcopy(base)}
    spec = ExperimentSpec(name=name, base=base, axes=axes, seeds=seeds, settings=settings, translate=translate,
                          combine=combine, retries=retries, retry_from=retry_from, continue_from=continue_from,
                          score=score,
                          normalise=normalise, measure_timesteps=measure_timesteps, report=report,
                          backend=backend, description=description, source=source)
    for worker in workers:
        spec.base.setdefault(worker, {})
    return spec
