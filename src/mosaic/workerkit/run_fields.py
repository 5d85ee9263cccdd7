"""The fields every run shares, whichever worker runs it.

Every worker's config class is a :class:`RunConfig`: the same names, types,
units and meanings for the algorithm, the env, the seed, the budget, the shared
hyperparameters, checkpointing, reporting, FastLane and resources. A worker adds
its own sections only for what is truly its own (RLlib's self-play, an LLM's
model), and keeps its library's knobs under ``algo_params`` with the library's
own names.

A worker that cannot honour a shared field says so in its :class:`FieldMap`
(``refused``, with the reason); giving that field anything but its default is
then refused naming the field. What it honours it maps onto the library's own
names (``honoured``: shared field -> where it goes), which ``--describe`` and
the worker's doc show.

Units:

* ``total_timesteps`` counts **environment steps**: calls of the env's ``step``.
  A PettingZoo parallel env steps all its agents at once (one step); an AEC
  env steps one agent's move (one step); each sub-env of a vectorised env
  counts its own steps. Agent steps are never what the budget counts.
* ``episodes`` is an evaluator's budget: episodes played (per task, where a run
  plays several tasks).
* ``checkpoint.every_timesteps`` and ``reporting.every_timesteps`` are env steps too.

Optional sections a worker adds only when it offers them: :class:`WandbTracking`
(``wandb``, ``wandb_project``, ``wandb_mode``: Weights & Biases, offline by default).

This module imports nothing beyond the standard library and MOSAIC's config kit:
everything above the workers (CLI, daemon, GUI) reads configs through it.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Mapping, Sequence

from mosaic import configkit
from mosaic.configkit import option
from mosaic.errors import ConfigError, one_of
from mosaic.fastlane.config import FastLaneConfig

#: The shared top-level fields, in the order a config shows them.
SHARED_FIELDS = ("worker", "algorithm", "environment", "seed", "total_timesteps", "episodes", "num_envs",
                 "learning_rate", "gamma", "batch_size", "checkpoint", "reporting", "fastlane", "resources",
                 "algo_params")
#: Every leaf of the shared fields a worker must either honour or refuse (its :class:`FieldMap`).
SHARED_PATHS = ("algorithm", "environment.family", "environment.env_id", "environment.env_ids",
                "environment.env_kwargs", "seed", "total_timesteps", "episodes", "num_envs", "learning_rate",
                "gamma", "batch_size", "checkpoint.every_timesteps", "checkpoint.at_end", "checkpoint.keep",
                "checkpoint.restore_from", "reporting.every_timesteps", "reporting.heartbeat_interval_s",
                "fastlane", "resources.threads", "resources.cpus", "resources.gpus", "algo_params")
#: Hyperparameters most libraries share, stated once and mapped onto each library's names.
HYPERPARAMETERS = ("learning_rate", "gamma", "batch_size")


@dataclass
class Environment:
    """Which env a run plays: one shape for every library's env registry."""

    family: str = option("", help="env family: a PettingZoo family (mpe, sisl, butterfly, classic), "
                                  "'gymnasium', 'jumanji', 'babyai', 'minigrid', ... (the worker's "
                                  "`mosaic workers show NAME` lists its families and ids)")
    env_id: str = option("", help="the env's id within its family (a versioned id where the family has "
                                  "versions); empty: the worker's default")
    env_ids: list[str] = option(default_factory=list,
                                help="several env ids played in one run, for evaluators that play a list of "
                                     "tasks; empty: just env_id")
    env_kwargs: dict = option(default_factory=dict, help="keyword arguments for the env's constructor")

    def ids(self) -> list[str]:
        """Every env id the run plays."""
        return list(self.env_ids) or ([self.env_id] if self.env_id else [])


@dataclass
class Checkpointing:
    """When a run saves checkpoints, how many it keeps and where it resumes from."""

    every_timesteps: int = option(0, min=0, help="save a checkpoint every N env steps; 0 = only at the end")
    at_end: bool = option(True, help="save a checkpoint when the run ends")
    keep: int | None = option(None, min=1, help="keep only the newest K periodic checkpoints; null = keep all")
    restore_from: str | None = option(None, help="a checkpoint of an earlier run to resume from "
                                                 "(<run folder>/checkpoints/<name>; not the run folder)")


@dataclass
class Reporting:
    """How often a run reports."""

    every_timesteps: int | None = option(None, min=1, help="a `metrics` event every N env steps; null = "
                                                           "once per iteration of the library's own loop")
    heartbeat_interval_s: float = option(5.0, min=0.0, help="seconds between heartbeats; 0 = off")


@dataclass
class Resources:
    """What a run may use of the machine."""

    threads: int | None = option(None, min=1, help="torch/BLAS threads of the worker process; null = the "
                                                   "library's own choice (one per core)")
    cpus: float | None = option(None, min=0.0, help="CPUs the daemon reserves for the run (its queue starts a "
                                                    "run only when they are free); null = the worker's own "
                                                    "estimate (`mosaic workers show NAME`)")
    gpus: float = option(0.0, min=0.0, help="GPUs the run trains on; 0 = CPU only")


#: W&B's modes a run may ask for: ``offline`` writes the run under a local folder and needs no network,
#: account or server; ``online`` streams it to W&B's server (or ``$WANDB_BASE_URL``) with the API key W&B
#: finds (``$WANDB_API_KEY`` or ``~/.netrc``).
WANDB_MODES = ("offline", "online")


@dataclass
class WandbTracking:
    """Weights & Biases tracking: the same three top-level fields for every worker that offers it.

    Not one of the fields every run shares (a worker without W&B has none of them):
    a worker that logs to W&B adds this section to its config class, before
    :class:`RunConfig` (``class MyConfig(WandbTracking, RunConfig)``), so the fields
    keep these names, defaults and meanings everywhere. Each worker's doc says how
    its library logs and where the files land (an offline run's folder is
    ``wandb/offline-run-<time>-<id>/``, which ``wandb sync`` uploads later).
    """

    wandb: bool = option(False, help="log to Weights & Biases")
    wandb_project: str = option("mosaic", help="W&B project")
    wandb_mode: str = option("offline", choices=WANDB_MODES, help="W&B mode; offline needs no network")

    def wandb_environment(self, directory: str) -> dict[str, str]:
        """The environment a W&B run started in another process needs: its mode, its folder
        (``directory``/wandb/), no console chatter and, offline, no error reports to W&B's servers."""
        env = {"WANDB_MODE": self.wandb_mode, "WANDB_DIR": str(directory), "WANDB_SILENT": "true"}
        if self.wandb_mode == "offline":
            env["WANDB_ERROR_REPORTING"] = "false"
        return env

    def check_wandb_online(self, environ: Mapping[str, str] | None = None) -> None:
        """Refuse ``wandb_mode: online`` when W&B would find no API key here (it would fail at its first call).

        A local check only (``$WANDB_API_KEY``, or a ``~/.netrc`` entry for W&B's host): nothing is sent.
        A key with no route to the server still fails in the run, with W&B's own error.
        """
        if not self.wandb or self.wandb_mode != "online":
            return
        import netrc
        import os
        from urllib.parse import urlparse

        environ = os.environ if environ is None else environ
        if environ.get("WANDB_API_KEY"):
            return
        host = urlparse(environ.get("WANDB_BASE_URL") or "https://api.wandb.ai").hostname or "api.wandb.ai"
        path = environ.get("NETRC") or os.path.join(os.path.expanduser("~"), ".netrc")
        try:
            if netrc.netrc(path).authenticators(host):
                return
        except (OSError, netrc.NetrcParseError):
            pass
        raise ConfigError("wandb_mode", f"'online' needs a W&B API key, and none is set here ($WANDB_API_KEY, "
                                        f"or {host} in {path}: `wandb login`); allowed: offline (the run "
                                        "is kept under the run folder; `wandb sync` uploads it later)")


@dataclass(frozen=True)
class FieldMap:
    """How a worker treats the shared fields.

    ``honoured``: shared field path -> the library's own name or what it becomes
    (``"learning_rate": "algo_params.lr (RLlib's AlgorithmConfig.training(lr=...))"``).
    ``refused``: shared field path -> why this worker cannot honour it; any value
    other than the default is refused naming the field. Paths are dotted
    (``checkpoint.keep``, ``resources.gpus``).
    """

    honoured: Mapping[str, str] = dataclasses.field(default_factory=dict)
    refused: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"honoured": dict(self.honoured), "refused": dict(self.refused)}


#: What every evaluator (a worker that plays episodes and trains nothing) refuses, and why; its
#: ``FieldMap.refused`` starts from this and adds its own (``{**EVALUATOR_REFUSALS, ...}``).
EVALUATOR_REFUSALS: Mapping[str, str] = {
    "total_timesteps": "an evaluator: its budget is episodes",
    "num_envs": "it plays one env at a time",
    **{name: "an evaluator: it trains nothing" for name in HYPERPARAMETERS},
    "algo_params": "an evaluator: it has no training hyperparameters",
    **{f"checkpoint.{name}": "an evaluator: it saves no checkpoints"
       for name in ("every_timesteps", "at_end", "keep", "restore_from")},
}


@dataclass
class RunConfig:
    """The fields every run shares; each worker's config class extends it.

    A subclass may redeclare a shared field to give it its own default (CleanRL's
    seed 1, RLlib's default env), never another type or meaning. It lists the
    algorithms it accepts in :meth:`algorithms` (canonical spellings, lower case,
    with the library's own spellings as aliases) and its :data:`FIELDS` map.
    """

    #: Set by each worker: which shared fields it honours, and which it refuses and why.
    FIELDS: ClassVar[FieldMap] = FieldMap()
    #: Library spellings of algorithms -> canonical (lower case) names, beyond case.
    ALGORITHM_ALIASES: ClassVar[Mapping[str, str]] = {}

    run_id: str = option(help="run id (set by MOSAIC when launched through `mosaic run`)")
    worker: str | None = option(None, help="the worker this config is for")
    algorithm: str = option("", help="the algorithm, in its canonical spelling (lower case); the "
                                     "library's own spelling is accepted and normalised")
    environment: Environment = option(default_factory=Environment, help="the env the run plays")
    seed: int = option(0, min=0, help="seeds the library, the envs and every random choice MOSAIC makes")
    total_timesteps: int | None = option(None, min=1, help="training budget in env steps (calls of the env's "
                                                          "step; see docs/worker-contract.md); null = the "
                                                          "worker's default")
    episodes: int | None = option(None, min=1, help="an evaluator's budget: episodes to play (per task)")
    num_envs: int | None = option(None, min=1, help="envs stepped side by side (vectorised); null = the "
                                                   "library's default")
    learning_rate: float | None = option(None, min=0.0, help="optimiser step size; null = the library's "
                                                            "default")
    gamma: float | None = option(None, min=0.0, max=1.0, help="discount factor; null = the library's default")
    batch_size: int | None = option(None, min=1, help="samples per gradient update (minibatch); null = the "
                                                     "library's default")
    checkpoint: Checkpointing = option(default_factory=Checkpointing, help="checkpoints and resume")
    reporting: Reporting = option(default_factory=Reporting, help="metrics and heartbeat cadence")
    fastlane: FastLaneConfig = option(default_factory=FastLaneConfig,
                                      help="stream rendered frames to `mosaic watch` (shared memory)")
    resources: Resources = option(default_factory=Resources, help="threads, CPUs and GPUs")
    algo_params: dict = option(default_factory=dict, help="the library's own hyperparameters by their own "
                                                          "names: `mosaic workers show NAME` lists them")

    @classmethod
    def algorithms(cls) -> Sequence[str]:
        """Canonical names of the algorithms this worker runs (empty: the field is not used)."""
        return ()

    def to_dict(self) -> dict[str, Any]:
        return configkit.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Any:
        config = configkit.from_dict(cls, data)
        config.check_shared()
        return config

    def check_shared(self) -> None:
        """Normalise the algorithm's spelling and refuse shared fields this worker cannot honour."""
        allowed = list(self.algorithms())
        if allowed:
            self.algorithm = canonical_algorithm(self.algorithm, allowed, self.ALGORITHM_ALIASES)
        defaults = type(self)(run_id="-")
        for path, reason in self.FIELDS.refused.items():
            # a key missing from a mapping (algo_params.X) reads as None
            value, default = configkit.get_path(self, path, None), configkit.get_path(defaults, path, None)
            if value != default:
                raise ConfigError(path, f"{json.dumps(configkit.to_dict(value))} is not supported by the "
                                        f"{self.worker or 'this'} worker: {reason}; allowed: "
                                        f"{json.dumps(configkit.to_dict(default))} (the default)")
        if self.checkpoint.restore_from and "checkpoint.restore_from" not in self.FIELDS.refused:
            self.checkpoint.restore_from = check_restore_from(self.checkpoint.restore_from)


@dataclass(frozen=True)
class RoundedBudget:
    """A library that steps its budget in whole units (the vector steps of ``num_envs`` envs, rollouts,
    iterations, epochs) takes another number of env steps than ``total_timesteps``: ``env_steps`` (None where it is
    not known in advance) and ``message``, which says why. A run says it
    up front: ``--dry-run`` lists it under ``warnings`` and a run logs it as a warning just after ``run_started``;
    the steps it reports are always the steps it ran."""

    requested: int
    env_steps: int | None
    message: str

    @classmethod
    def whole_units(cls, requested: int, unit_steps: int, unit: str, what: str, down: bool = False,
                    start: int = 0) -> "RoundedBudget | None":
        """``requested`` env steps taken in whole units of ``unit_steps`` (``what``: how the unit is made up) from
        ``start`` (a restored checkpoint's steps), rounded up (down: only whole units that fit); None when that is
        a whole number of them, or when ``start`` is already at or past ``requested``."""
        remaining = requested - start
        if remaining <= 0:
            return None
        units = remaining // unit_steps if down else -(-remaining // unit_steps)
        steps = start + units * unit_steps
        if steps == requested:
            return None
        plural = "" if units == 1 else "s"
        return cls(requested, steps, f"total_timesteps {requested} is not a whole number of {unit}s of {unit_steps} "
                                     f"env steps ({what})" + (f" past the checkpoint's {start}" if start else "")
                   + f": the run takes {units} {unit}{plural}, {steps} env steps" + (" in all" if start else ""))


def canonical_algorithm(value: str, allowed: Sequence[str], aliases: Mapping[str, str] | None = None,
                        field: str = "algorithm") -> str:
    """``value`` in its canonical spelling: any case of a canonical name, or a library alias."""
    if not isinstance(value, str) or not value:
        raise ConfigError(field, f"is required; allowed: {', '.join(allowed)}")
    by_lower = {a.lower(): a for a in allowed}
    by_lower.update({k.lower(): v for k, v in (aliases or {}).items()})
    found = by_lower.get(value.lower())
    if found is None:
        raise ConfigError(field, one_of(value, list(allowed)))
    return found


def check_restore_from(value: str, field: str = "checkpoint.restore_from") -> str:
    """``value`` as an absolute path to an existing checkpoint folder, or a ConfigError naming ``field``.

    A run folder is refused (it holds several checkpoints; the error lists them), so a
    resume never picks one the user did not mean. Checked before any run folder exists.
    """
    from pathlib import Path

    from mosaic.runs import RunDir

    path = Path(value).expanduser()
    if not path.exists():
        raise ConfigError(field, f"{value!r} does not exist; allowed: a checkpoint folder of an earlier run "
                                 "(<run folder>/checkpoints/<name>, listed by `mosaic show RUN`)")
    if RunDir(path).telemetry_path.is_file() and RunDir(path).manifest_path.is_file():
        folder = path / "checkpoints"
        found = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
        listed = ", ".join(str(folder / n) for n in found[-3:]) if found else "none: that run saved no checkpoint"
        raise ConfigError(field, f"{value!r} is a run folder, not a checkpoint; allowed: one of its "
                                 f"checkpoints ({listed})")
    return str(path.resolve())


def field_map(config_class: type | None) -> dict[str, Any] | None:
    """The ``shared_fields`` entry of a describe document, or None for a config that is no RunConfig."""
    if config_class is None or not (isinstance(config_class, type) and issubclass(config_class, RunConfig)):
        return None
    return config_class.FIELDS.to_dict()


# -- reading any run's config, old or new ----------------------------------------------
@dataclass(frozen=True)
class RunSummary:
    """What listings show of a run, read from its config alone (no worker needed)."""

    worker: str = ""
    algorithm: str = ""
    env_family: str = ""
    env_id: str = ""
    seed: int | None = None
    budget: int | None = None
    budget_unit: str = ""  # "env steps" or "episodes"

    @property
    def env(self) -> str:
        return self.env_id

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _env_label(ids: Iterable[str]) -> str:
    ids = [str(i) for i in ids if i]
    if not ids:
        return ""
    return ids[0] if len(ids) == 1 else f"{ids[0]} +{len(ids) - 1}"


def summarize(config: Mapping[str, Any] | None, worker: str = "") -> RunSummary:
    """Worker, algorithm, env, seed and budget of a config in the shared shape.

    Run folders written before the shared vocabulary are read too (``training.algorithm``,
    a top-level ``env_id``/``env_family``, Jumanji's ``environment`` string, BALROG's
    ``tasks`` and ``episodes_per_task``), so old runs still list.
    """
    c = dict(config or {})
    training = c.get("training") if isinstance(c.get("training"), Mapping) else {}
    env = c.get("environment")
    family, env_id = "", ""
    if isinstance(env, Mapping):
        family = str(env.get("family") or "")
        ids = list(env.get("env_ids") or []) or [env.get("env_id") or ""]
        env_id = _env_label(ids)
    elif isinstance(env, str):  # Jumanji, before the shared fields
        family, env_id = "jumanji", env
    if not env_id:
        env_id = _env_label([c.get("env_id") or ""]) or _env_label(c.get("tasks") or [])
        family = family or str(c.get("env_family") or "")
    algorithm = str(c.get("algorithm") or training.get("algorithm") or "")
    budget, unit = None, ""
    for value, label in ((c.get("total_timesteps"), "env steps"), (training.get("total_timesteps"), "env steps"),
                         (c.get("episodes"), "episodes"), (c.get("episodes_per_task"), "episodes")):
        if isinstance(value, int) and not isinstance(value, bool):
            budget, unit = value, label
            break
    seed = c.get("seed")
    return RunSummary(worker=str(c.get("worker") or worker or ""), algorithm=algorithm, env_family=family,
                      env_id=env_id, seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
                      budget=budget, budget_unit=unit)
