"""A study's ``tuning`` section as written, and what one of its fields says of another (pure: no Optuna import).

    tuning:
      space:                                  # shared names (settings, translate) -> a distribution
        learning_rate: {type: log_uniform, low: 1.0e-4, high: 3.0e-3}
        clip_range: {type: uniform, low: 0.1, high: 0.3}
        epochs: {type: int, low: 3, high: 10}             # step 1 unless given; log: true for a log scale
        hidden_layers: {type: categorical, choices: [[64, 64], [128, 128]]}
      extra:                                  # a contender's worker may add parameters under its own names
        ray: {algo_params.kl_coeff: {type: uniform, low: 0.0, high: 0.3}}
      trials: 16                              # per contender (a pruned or failed trial counts as one)
      seeds: [100, 101]                       # tuning seeds: each trial is one cell per seed, their mean scores it
      sampler: {name: random, seed: 0}        # or tpe
      pruner: {name: none}                    # or median, hyperband
      parallel: 2                             # trials in flight at once, over all contenders
      storage: journal                        # Optuna's journal file in the experiment's folder, or an RDB URL

The experiment's ``seeds`` are the **test seeds**: each contender's best configuration (best by the tuning
seeds' mean score) is run on them, and only they are reported. A contender is one of the grid's
configurations (its axes' values, e.g. worker × algorithm).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Annotated, Any

from mosaic.configkit import option
from mosaic.errors import UserError

DISTRIBUTIONS = ("uniform", "log_uniform", "int", "categorical")
SAMPLERS = ("random", "tpe")
PRUNERS = ("none", "median", "hyperband")
#: the storage kept in the experiment's folder (a text journal a report folder can carry to another machine)
JOURNAL = "journal"
JOURNAL_FILE = "study.journal"
#: RDB URLs Optuna takes (SQLAlchemy's): ``sqlite:///path``, ``postgresql://...``, ``mysql://...``
RDB_URL = re.compile(r"(journal|(sqlite|postgresql|mysql)(\+\w+)?://.+)")
#: Fewer test seeds than this and a study's comparison is refused (the issue of held-out seeds is their number).
MIN_TEST_SEEDS = 5
#: What a library may round a trial's env-step budget by and still count as an equal budget.
BUDGET_TOLERANCE = 0.02
_SEED = Annotated[int, option(min=0, allowed="a seed: an integer >= 0")]


@dataclass
class Param:
    """One dimension of the search space."""

    type: str = option(choices=DISTRIBUTIONS, what="a distribution",
                       help="uniform, log_uniform, int (log: true for a log scale) or categorical")
    low: float | None = option(None, finite=True, help="the smallest value (uniform, log_uniform, int)")
    high: float | None = option(None, finite=True, help="the largest value (uniform, log_uniform, int)")
    step: float | None = option(None, finite=True, help="the grid the values lie on (int: 1 unless given)")
    log: bool = option(False, help="int: sample on a log scale")
    choices: list[Any] | None = option(None, help="categorical: the values")


@dataclass
class Sampler:
    name: str = option("random", choices=SAMPLERS, what="a sampler",
                       help="random (the default: the trials are independent, as the expected-best curve assumes) "
                            "or tpe")
    seed: int = option(0, min=0, allowed="an integer >= 0", help="the sampler's seed: the same study samples the "
                                                                 "same points")


@dataclass
class Pruner:
    name: str = option("none", choices=PRUNERS, what="a pruner", help="none, median or hyperband (Optuna's)")
    startup_trials: int = option(5, min=0, allowed="an integer >= 0",
                                 help="median: trials completed before any is pruned")
    warmup_steps: int = option(0, min=0, allowed="env steps >= 0",
                               help="median: env steps a trial runs before it may be pruned")
    min_resource: int = option(1, min=1, allowed="env steps >= 1",
                               help="hyperband: the env steps of its first rung")
    reduction_factor: int = option(3, min=2, allowed="an integer >= 2", help="hyperband: the rungs' ratio")


@dataclass
class Tuning:
    """A study: every contender tuned with the same trials, each trial one cell per tuning seed."""

    trials: int | dict[str, Annotated[int, option(min=1, allowed="an integer >= 1")]] = option(
        min=1, max=100_000, allowed="trials per contender: an integer >= 1 (or contender -> trials, all equal)",
        help="trials per contender")
    seeds: list[_SEED] = option(min_items=1, allowed="a non-empty list of distinct integers >= 0",
                                help="the tuning seeds (apart from the test seeds, the spec's seeds)")
    space: dict[str, Param] = option(default_factory=dict, help="shared name (settings, translate) -> its "
                                                                "distribution")
    extra: dict[str, dict[str, Param]] = option(default_factory=dict,
                                                help="worker -> its own config path -> a distribution")
    sampler: Sampler = option(default_factory=Sampler, help="Optuna's sampler and its seed")
    pruner: Pruner = option(default_factory=Pruner, help="Optuna's pruner (none by default)")
    parallel: int = option(2, min=1, max=1000, allowed="an integer from 1 to 1000",
                           help="trials in flight at once, over all contenders")
    storage: str = option(JOURNAL, pattern=RDB_URL, what="a study storage",
                          allowed=f"{JOURNAL} (a text journal in the experiment's folder) or an RDB URL "
                                  "(sqlite:///PATH, postgresql://...)",
                          help="where Optuna keeps the study")


@dataclass(frozen=True)
class Dimension:
    """A checked dimension: ``name`` is a shared name (``space``) or a worker's config path (``extra``)."""

    name: str
    type: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    worker: str | None = None  # extra: the one worker whose cells take it

    @property
    def field(self) -> str:
        return f"tuning.extra.{self.worker}.{self.name}" if self.worker else f"tuning.space.{self.name}"

    def sample_point(self) -> Any:
        """A value for the plan's example: the middle of the range (geometric on a log scale), the first choice."""
        if self.type == "categorical":
            return self.choices[0]
        low, high = float(self.low), float(self.high)  # type: ignore[arg-type]
        mid = math.sqrt(low * high) if self.type == "log_uniform" or self.log else (low + high) / 2
        if self.type == "int":
            step = int(self.step or 1)
            return int(low + round((mid - low) / step) * step)
        if self.step:
            return low + round((mid - low) / self.step) * self.step
        return mid

    def describe(self) -> str:
        if self.type == "categorical":
            return f"one of {', '.join(_compact(c) for c in self.choices)}"
        scale = " (log scale)" if self.type == "log_uniform" or self.log else ""
        kind = "integer" if self.type == "int" else "number"
        step = f", step {_compact(self.step)}" if self.step and not (self.type == "int" and self.step == 1) else ""
        return f"{kind} from {_compact(self.low)} to {_compact(self.high)}{scale}{step}"


def _compact(value: Any) -> str:
    import json

    if isinstance(value, float):
        return f"{value:g}"
    return value if isinstance(value, str) else json.dumps(value)


def check_param(param: Param, name: str, where: str, worker: str | None = None) -> Dimension:
    """The dimension ``param`` describes, or :class:`UserError` naming ``where`` (``tuning.space.NAME``)."""
    if param.type == "categorical":
        if not param.choices:
            raise UserError(f"{where}.choices: a categorical needs at least one choice; allowed: a non-empty list")
        for key in ("low", "high", "step"):
            if getattr(param, key) is not None:
                raise UserError(f"{where}.{key}: a categorical has choices, not a range; allowed: leave it out")
        return Dimension(name, "categorical", choices=tuple(param.choices), worker=worker)
    if param.choices is not None:
        raise UserError(f"{where}.choices: only a categorical has choices; allowed: type categorical, or low and high")
    for key in ("low", "high"):
        if getattr(param, key) is None:
            raise UserError(f"{where}.{key}: a {param.type} distribution needs it; allowed: a number")
    low, high = float(param.low), float(param.high)  # type: ignore[arg-type]
    if low >= high:
        raise UserError(f"{where}: low ({low:g}) must be below high ({high:g}); allowed: low < high")
    log = param.type == "log_uniform" or param.log
    if param.log and param.type != "int":
        raise UserError(f"{where}.log: only for int (log_uniform is the log scale of numbers); allowed: leave it out")
    if log and low <= 0:
        raise UserError(f"{where}.low: a log scale needs bounds above 0, got {low:g}; allowed: low > 0")
    if param.step is not None and param.step <= 0:
        raise UserError(f"{where}.step: {param.step:g} is not above 0; allowed: a step > 0")
    if param.type == "int":
        for key in ("low", "high", "step"):
            value = getattr(param, key)
            if value is not None and float(value) != int(value):
                raise UserError(f"{where}.{key}: {value!r} is not an integer; allowed: integers for type int")
        if log and param.step not in (None, 1):
            raise UserError(f"{where}.step: a log scale takes no step (Optuna's); allowed: leave it out")
        return Dimension(name, "int", int(low), int(high), int(param.step or 1), param.log, worker=worker)
    if param.type == "log_uniform" and param.step is not None:
        raise UserError(f"{where}.step: a log scale takes no step (Optuna's); allowed: leave it out")
    return Dimension(name, param.type, low, high, param.step, worker=worker)


@dataclass
class Study:
    """A spec's tuning section, checked: ``dimensions`` in the spec's order (shared ones first)."""

    dimensions: list[Dimension]
    trials: int
    seeds: list[int]
    sampler: str = "random"
    sampler_seed: int = 0
    pruner: Pruner = field(default_factory=Pruner)
    parallel: int = 2
    storage: str = JOURNAL

    def shared(self) -> list[Dimension]:
        return [d for d in self.dimensions if d.worker is None]

    def extra_for(self, worker: str) -> list[Dimension]:
        return [d for d in self.dimensions if d.worker == worker]

    def for_worker(self, worker: str) -> list[Dimension]:
        return self.shared() + self.extra_for(worker)


def check_tuning(tuning: Tuning, test_seeds: list[int], workers: list[str]) -> Study:
    """The study ``tuning`` describes, checked against the spec's test seeds and workers."""
    if not tuning.space and not tuning.extra:
        raise UserError("tuning.space: the space is empty; allowed: at least one parameter, e.g. "
                        "learning_rate: {type: log_uniform, low: 1.0e-4, high: 1.0e-2}")
    dims = [check_param(p, n, f"tuning.space.{n}") for n, p in tuning.space.items()]
    for worker, params in tuning.extra.items():
        if worker not in workers:
            raise UserError(f"tuning.extra.{worker}: no contender runs worker {worker!r}; allowed: "
                            f"{', '.join(workers)}")
        dims += [check_param(p, n, f"tuning.extra.{worker}.{n}", worker) for n, p in params.items()]
    for dim in dims:
        if dim.name in ("seed", "worker", "run_id", "total_timesteps"):
            raise UserError(f"{dim.field}: not a hyperparameter (every trial has the same seeds and env-step budget);"
                            " allowed: learning settings such as learning_rate, gamma, batch_size")
    if isinstance(tuning.trials, dict):
        counts = sorted(set(tuning.trials.values()))
        if not counts:
            raise UserError("tuning.trials: no contender named; allowed: an integer >= 1")
        if len(counts) > 1:
            listed = ", ".join(f"{k}: {v}" for k, v in tuning.trials.items())
            raise UserError(f"tuning.trials: unequal trials across contenders ({listed}); allowed: the same number "
                            "for every contender (a comparison at equal tuning effort)")
        trials = counts[0]
    else:
        trials = tuning.trials
    if len(set(tuning.seeds)) != len(tuning.seeds):
        raise UserError(f"tuning.seeds: {tuning.seeds} repeats a seed; allowed: distinct integers")
    overlap = sorted(set(tuning.seeds) & set(test_seeds))
    if overlap:
        raise UserError(f"tuning.seeds: seed(s) {', '.join(map(str, overlap))} are also test seeds (seeds); allowed: "
                        "tuning seeds apart from the test seeds, which only the best configurations run")
    if len(test_seeds) < MIN_TEST_SEEDS:
        raise UserError(f"seeds: a study tests each contender's best configuration on held-out seeds; "
                        f"{len(test_seeds)} given; allowed: at least {MIN_TEST_SEEDS}")
    return Study(dims, trials, list(tuning.seeds), tuning.sampler.name, tuning.sampler.seed, tuning.pruner,
                 tuning.parallel, tuning.storage)


def sample_point(study: Study, worker: str) -> dict[str, Any]:
    """The plan's example point for a contender of ``worker``: each dimension's middle value (or first choice)."""
    return {d.name: d.sample_point() for d in study.for_worker(worker)}
