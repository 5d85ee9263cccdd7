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
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping

from mosaic.configkit import from_dict, option, read_document, set_path
from mosaic.errors import UserError
from mosaic.experiments.backends import BACKENDS
from mosaic.experiments.study.space import Study, Tuning, check_tuning, sample_point
from mosaic.runs import NAME_PATTERN, NAME_RULE

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


#: a dotted config path: field names joined by dots (``algo_params.lambda_``)
CONFIG_PATH = re.compile(r"[^.]+(\.[^.]+)*")
_FRACTION = {"min": 0.0, "max": 1.0, "finite": True, "allowed": "a number from 0 to 1"}


@dataclass(frozen=True)
class Score:
    """What a run scores: ``metric`` of its ``metrics`` events, averaged over the last ``final_fraction`` of
    its env steps (evaluators: their final value)."""

    metric: str = option("episode_return_mean", pattern=re.compile(".+", re.S), what="a metric name",
                         allowed="a metric name such as episode_return_mean", help="the metric a run is scored by")
    higher_is_better: bool = option(True, help="whether a higher score is better")
    final_fraction: float = option(0.1, **_FRACTION, help="the last share of a run's env steps its score averages")
    #: a report calls a configuration's curves levelled off when their last ``final_fraction`` of env steps added
    #: less than this share of their whole gain (the whole interval)
    level_within: float = option(0.02, **_FRACTION, help="the share of its whole gain a levelled-off curve adds "
                                                          "over the last final_fraction")


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
    reps: int = option(2000, min=100, max=100_000, allowed="an integer from 100 to 100000",
                       help="bootstrap resamples of the intervals")
    confidence: float = option(0.95, min=0.5, max=0.999, finite=True, allowed="a number from 0.5 to 0.999",
                               help="the intervals' confidence level")
    seed: int = option(0, min=0, allowed="an integer >= 0", help="the bootstrap's seed")


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
    #: a study's tuning cell: its trial's number in its contender's study (test cells and grid cells: None)
    trial: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"cell_id": self.cell_id, "worker": self.worker, "seed": self.seed, "settings": self.settings,
                "configuration": self.configuration, "env": self.env, "config": self.config,
                **({"baseline": True} if self.baseline else {}),
                **({"trial": self.trial} if self.trial is not None else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Cell":
        trial = data.get("trial")
        return cls(str(data["cell_id"]), str(data["worker"]), int(data["seed"]), dict(data["settings"]),
                   dict(data["config"]), str(data["configuration"]), str(data["env"]), bool(data.get("baseline")),
                   None if trial is None else int(trial))


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
    #: A study (the spec's ``tuning``): ``seeds`` are then its test seeds.
    study: Study | None = None

    def contenders(self) -> list[dict[str, Any]]:
        """The grid's configurations, in order: every combination of the axes (or their zip)."""
        names = list(self.axes)
        values = [self.axes[n] for n in names]
        combos = list(zip(*values)) if self.combine == "zip" else list(itertools.product(*values))
        return [dict(zip(names, combo)) for combo in combos or [()]]

    def cells(self) -> list[Cell]:
        """The grid: every combination of the axes (or their zip) crossed with every seed. A study's cells are
        made as it goes (its trials', then its test cells: :mod:`mosaic.experiments.study.driver`)."""
        if self.study is not None:
            return []
        out: list[Cell] = []
        for chosen in self.contenders():
            for seed in self.seeds:
                out.append(self.cell(f"c{len(out):03d}", chosen, seed))
        return out + self.baseline_cells(out)

    def cell(self, cell_id: str, chosen: Mapping[str, Any], seed: int,
             params: Mapping[str, Any] | None = None) -> Cell:
        """One run: the worker's base config, then ``settings``, the axis values ``chosen``, ``params`` (a study's
        trial: shared names and the worker's own paths), the derived values, and the seed."""
        worker = self._worker_of(chosen)
        where = f"cell {cell_id} ({label(chosen) or 'the only configuration'})"
        config = copy.deepcopy(self.base.get(worker, {}))
        config.pop("run_id", None)
        named = {**self.settings, **{k: v for k, v in chosen.items() if k != "worker"}, **(params or {})}
        derived = []
        for name, value in named.items():
            entry = self.translate.get(name, {}).get(worker)
            if isinstance(entry, dict) and entry.get("derive"):
                derived.append((name, entry))
                continue
            set_path(config, self.path_for(name, worker, where), copy.deepcopy(self.value_for(name, worker, value)),
                     where)
        for name, entry in derived:
            value = evaluate(entry["derive"], named, f"translate.{name}.{worker}.derive")
            set_path(config, str(entry["path"]), value, where)
        config["worker"] = worker
        config["seed"] = seed
        return Cell(cell_id, worker, seed, dict(chosen), config,
                    label({k: v for k, v in chosen.items() if not self.is_env_axis(k)}) or "default",
                    self.env_word(named, worker) or env_label(config))

    def env_word(self, named: Mapping[str, Any], worker: str) -> str | None:
        """The spec's own word for a cell's env, where a translated name gives the worker's env id
        (``environment.env_id``): one label for every library, whatever each calls the env (MPE's
        simple_spread_v3 is BenchMARL's simple_spread), so that a report compares them on one env."""
        for name, value in named.items():
            entry = self.translate.get(name, {}).get(worker)
            path = entry.get("path") if isinstance(entry, dict) else entry
            if path == "environment.env_id" and isinstance(value, str):
                return value
        return None

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
        if (isinstance(entry, dict) and isinstance(value, (str, int, float, bool))
                and str(value) in entry.get("values", {})):
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


#: What a derivation may use: numbers, the spec's names, arithmetic, and these functions.
_FUNCTIONS = {"min": min, "max": max, "round": round, "int": int, "float": float, "abs": abs}


def evaluate(expression: str, names: Mapping[str, Any], where: str) -> Any:
    """``expression`` (a translation's ``derive``: arithmetic over the spec's names) evaluated over ``names``;
    :class:`UserError` naming ``where`` for anything else (no attribute, no other call, no unknown name)."""
    import ast
    import operator

    ops = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
           ast.USub: operator.neg, ast.UAdd: operator.pos}
    allowed = "arithmetic (+ - * / // % **) over numbers and the spec's names, and min, max, round, int, float, abs"

    def walk(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value,
                                                                                                      bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise UserError(f"{where}: {node.id!r} is not a name of the spec's settings, axes or space; "
                                f"allowed: {', '.join(sorted(names)) or 'none here'}")
            value = names[node.id]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UserError(f"{where}: {node.id} is {value!r}, not a number; allowed: {allowed}")
            return value
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](walk(node.left), walk(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in ops:
            return ops[type(node.op)](walk(node.operand))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS
                and not node.keywords):
            return _FUNCTIONS[node.func.id](*(walk(a) for a in node.args))
        raise UserError(f"{where}: {ast.unparse(node)!r} is not allowed; allowed: {allowed}")

    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError:
        raise UserError(f"{where}: {expression!r} is not an expression; allowed: {allowed}") from None
    try:
        return walk(tree)
    except ZeroDivisionError:
        raise UserError(f"{where}: {expression!r} divides by zero here ({', '.join(f'{k}={v}' for k, v in names.items() if isinstance(v, (int, float)))})") from None


# -- reading and checking ------------------------------------------------------------------------------
def read_spec(path: str | Path) -> ExperimentSpec:
    """The spec at ``path``, checked; :class:`UserError` naming the field for anything wrong."""
    path = Path(path)
    data = read_document(path, "spec")
    return parse_spec(data, base_dir=path.parent)


@dataclass
class Translation:
    """A translated name's path for one worker, with the library's own words for some of its values."""

    path: str = option(pattern=CONFIG_PATH, what="a config path", help="where the worker's config has it",
                       allowed="dotted field names such as algo_params.lambda_")
    values: dict[str, Any] = option(default_factory=dict, help="a value as the spec words it -> the library's word "
                                                               "(a value not listed is written as it is)")
    derive: str | None = option(None, pattern=re.compile(r".+", re.S), what="an expression",
                                allowed="an arithmetic expression over the spec's names, e.g. "
                                        "rollout_env_steps // minibatches",
                                help="the value written is this expression of the cell's named values (a "
                                     "library that takes a setting only in another form: a size for a count)")


#: a worker's path for a translated name: a path, null (the worker has no such setting), or {path, values}
_TRANSLATED = ("dotted field names such as algo_params.lambda_, null, or {path: ..., values: {...}} or "
               "{path: ..., derive: EXPRESSION}")
_TRANSLATED_TO = Annotated[Annotated[str, option(pattern=CONFIG_PATH, what="a config path", allowed=_TRANSLATED)]
                           | Translation | None, option(allowed=_TRANSLATED)]
_BASE = Annotated[str | dict[str, Any], option(allowed="a base config: an object, or a config file's path "
                                                       "(relative to the spec)")]


@dataclass
class Normalisation:
    """An env's random and reference scores, between which its normalised scores go from 0 to 1."""

    random: float | Literal["measure"] = option(finite=True, help="the env's random score",
                                                allowed=f"a random score, or {MEASURE} (runs of the random worker "
                                                        "measure it)")
    reference: float | Literal["best"] = option(finite=True, help="the env's reference score",
                                                allowed=f"a reference score, or {BEST} (the best configuration's "
                                                        "mean score there)")
    measure_timesteps: int | None = option(None, min=1, allowed="a number of env steps >= 1",
                                           help="env steps of each random-play run (random: measure)")


@dataclass
class SpecFields:
    """An experiment spec as written (the module's docstring says what each field means)."""

    name: str = option(pattern=NAME_PATTERN, what="a valid experiment name", allowed=NAME_RULE,
                       help="the experiment's folder under MOSAIC_HOME/experiments")
    description: str = option("", help="what the experiment is for")
    base: dict[str, _BASE] = option(default_factory=dict, help="worker -> its base config",
                                    allowed="worker -> a base config")
    settings: dict[str, Any] = option(default_factory=dict, help="config path or translated name -> its value in "
                                                                 "every cell")
    translate: dict[str, dict[str, _TRANSLATED_TO]] = option(default_factory=dict,
                                                             help="name -> worker -> the worker's path for it")
    axes: dict[str, Annotated[list[Any], option(min_items=1, allowed="a non-empty list of values")]] = option(
        default_factory=dict, help="config path or translated name -> its values")
    combine: str = option("product", choices=COMBINE, what="a way to combine the axes", help="product or zip")
    seeds: int | list[Annotated[int, option(min=0, allowed="a seed: an integer >= 0")]] = option(
        3, min=1, max=10_000, min_items=1, help="a count (seeds 0..N-1) or a list of seeds",
        allowed="a count from 1 to 10000, or a non-empty list of distinct integers >= 0")
    retries: int = option(2, min=0, max=100, allowed="an integer from 0 to 100",
                          help="reruns of a failed or cancelled cell")
    retry_from: str = option("start", choices=RETRY_FROM, what="where a retry starts",
                             help="start, or checkpoint: the last one saved before")
    continue_from: str | None = option(
        None, pattern=NAME_PATTERN, what="an experiment name", help="an earlier experiment each cell goes on from",
        allowed="the name of an experiment in this MOSAIC_HOME (`mosaic experiment list`)")
    score: Score = option(default_factory=Score, help="what a run scores")
    normalise: dict[str, Normalisation] = option(default_factory=dict, help="env -> its random and reference "
                                                                            "scores")
    report: ReportSettings = option(default_factory=ReportSettings, help="the report's intervals")
    backend: str = option("local", choices=BACKENDS, what="a backend here", help="where the cells run")
    tuning: Tuning | None = option(None, help="a study: each contender tuned with the same trials over the same "
                                              "space and tuning seeds, then its best configuration run on the "
                                              "test seeds (`seeds`); docs/studies.md")


def parse_spec(data: Mapping[str, Any], base_dir: Path = Path(".")) -> ExperimentSpec:
    """The spec in ``data``, checked (:class:`SpecFields`, then what one field says of another); base configs
    given as paths are read relative to ``base_dir``."""
    spec = from_dict(SpecFields, data)
    base: dict[str, dict[str, Any]] = {}
    for worker, value in spec.base.items():
        if isinstance(value, str):
            value = read_document(base_dir / value, f"base.{worker}")
        value = dict(value)
        named = value.pop("worker", worker)
        if named != worker:
            raise UserError(f"base.{worker}: the config names worker {named!r}; allowed: {worker!r} or no worker")
        base[worker] = value
    for axis in spec.axes:
        if axis in ("seed", "run_id"):
            raise UserError(f"axes.{axis}: not an axis; allowed: seeds are given by 'seeds', run ids are made "
                            "by the experiment")
    workers = [str(w) for w in spec.axes.get("worker", [])]
    for w in workers:
        if not w:
            raise UserError(f"axes.worker: {w!r} is not a worker name")
    if not workers and len(base) != 1:
        raise UserError("base: name exactly one worker's base config, or vary 'worker' under axes; "
                        f"got {', '.join(base) or 'none'}")
    if spec.combine == "zip" and len({len(v) for v in spec.axes.values()}) > 1:
        lengths = ", ".join(f"{k} {len(v)}" for k, v in spec.axes.items())
        raise UserError(f"axes: combine 'zip' needs every axis to have as many values ({lengths}); "
                        "allowed: equal lengths, or combine 'product'")
    seeds = list(range(spec.seeds)) if isinstance(spec.seeds, int) else spec.seeds
    if len(set(seeds)) != len(seeds):
        raise UserError(f"seeds: {seeds} repeats a seed; allowed: distinct integers")
    for key in ("seed", "worker", "run_id"):
        if key in spec.settings:
            raise UserError(f"settings.{key}: not a setting; allowed: 'seeds' for seeds, axes.worker for workers")
    if spec.continue_from is not None and spec.continue_from == spec.name:
        raise UserError(f"continue_from: {spec.name!r} is this experiment; allowed: an earlier experiment's name")
    normalise: dict[str, tuple[float | None, float | None]] = {}
    measure_timesteps: dict[str, int] = {}
    for env, pair in spec.normalise.items():
        low = None if pair.random == MEASURE else pair.random
        high = None if pair.reference == BEST else pair.reference
        if low is not None and low == high:
            raise UserError(f"normalise.{env}: random and reference are both {low:g}; allowed: two different scores")
        if pair.measure_timesteps is not None:
            if low is not None:
                raise UserError(f"normalise.{env}.measure_timesteps: only with random: {MEASURE}; allowed: leave it "
                                "out, or measure the random score")
            measure_timesteps[str(env)] = pair.measure_timesteps
        normalise[str(env)] = (low, high)
    translate = {name: {worker: {"path": path.path, "values": {str(k): v for k, v in path.values.items()},
                                 **({"derive": path.derive} if path.derive else {})}
                        if isinstance(path, Translation) else path for worker, path in mapping.items()}
                 for name, mapping in spec.translate.items()}
    source = {**{k: copy.deepcopy(v) for k, v in data.items()}, "base": copy.deepcopy(base)}
    parsed = ExperimentSpec(name=spec.name, base=base, axes=spec.axes, seeds=seeds, settings=spec.settings,
                            translate=translate, combine=spec.combine, retries=spec.retries,
                            retry_from=spec.retry_from, continue_from=spec.continue_from, score=spec.score,
                            normalise=normalise, measure_timesteps=measure_timesteps, report=spec.report,
                            backend=spec.backend, description=spec.description, source=source)
    for worker in workers:
        parsed.base.setdefault(worker, {})
    if spec.tuning is not None:
        parsed.study = check_study(parsed, spec.tuning)
    return parsed


def check_study(spec: ExperimentSpec, tuning: Tuning) -> Study:
    """``tuning`` checked against the rest of ``spec``: contenders, translations, score, budgets."""
    contenders = spec.contenders()
    workers = list(dict.fromkeys(spec._worker_of(c) for c in contenders))
    study = check_tuning(tuning, spec.seeds, workers)
    env_axes = [a for a in spec.axes if spec.is_env_axis(a)]
    if env_axes:
        raise UserError(f"axes.{env_axes[0]}: a study tunes on one env; allowed: the env under settings (or a base "
                        "config), and one study per env")
    if spec.normalise and any(low is None for low, _ in spec.normalise.values()):
        raise UserError("normalise: a study cannot measure the random score (random: measure); allowed: a number")
    if spec.continue_from:
        raise UserError("continue_from: a study's trials start from scratch; allowed: leave it out")
    if spec.score.metric not in COMMON_METRICS:
        raise UserError(f"score.metric: {spec.score.metric!r} is not a metric every contender's worker reports, so a "
                        f"trial could not be scored; allowed: {', '.join(COMMON_METRICS)}")
    labels = [label(c) or "default" for c in contenders]
    if isinstance(tuning.trials, dict):
        unknown = sorted(set(tuning.trials) - set(labels))
        missing = [x for x in labels if x not in tuning.trials]
        if unknown or missing:
            raise UserError(f"tuning.trials: {'unknown contender ' + repr(unknown[0]) if unknown else 'no count for ' + repr(missing[0])}; "
                            f"allowed: an integer, or every contender ({', '.join(labels)}) -> the same number")
    for dim in study.shared():
        for worker in workers:
            mapping = spec.translate.get(dim.name, {})
            if worker in mapping and mapping[worker] is None:
                raise UserError(f"{dim.field}: worker {worker!r} has no such setting (translate.{dim.name}.{worker} "
                                "is null); allowed: a parameter every contender's worker has, or the worker's own "
                                f"under tuning.extra.{worker}")
    for contender in contenders:  # every derivation evaluates at the space's sample point, before anything runs
        spec.cell("plan", contender, study.seeds[0], sample_point(study, spec._worker_of(contender)))
    return study
