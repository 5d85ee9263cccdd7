"""What a worker is to the shared command line: a :class:`WorkerProgram`, and what its runtime is given.

Kept apart from :mod:`mosaic.workerkit.cli` (the process) and :mod:`mosaic.workerkit.describe` (the describe
document) so that both import it and neither imports the other.

A worker's ``cli.py`` names the worker, its config class and its runtime; everything else has a default
here. A hook may be given as ``"module:attribute"``: it is imported when first called, so describing or
validating a worker does not import its library.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import operator
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from mosaic.runs import RunDir
from mosaic.workerkit.contract import SINGLE_AGENT, Packages, WorkerConfig, WorkerRuntime  # noqa: F401
from mosaic.workerkit.lifecycle import ProgressTracker, RunControl
from mosaic.workerkit.telemetry import TelemetryEmitter

#: Seconds between heartbeats of a config without ``reporting.heartbeat_interval_s``.
DEFAULT_HEARTBEAT_S = 5.0


class Lazy:
    """``"module:attribute"``, imported on its first call (a worker's hooks stay cheap to name)."""

    def __init__(self, target: str) -> None:
        module, sep, attribute = target.partition(":")
        if not sep or not module or not attribute:
            raise ValueError(f"a hook named by a string is 'module:attribute', not {target!r}")
        self.target = target
        self._resolved: Callable[..., Any] | None = None

    def resolve(self) -> Callable[..., Any]:
        if self._resolved is None:
            module, _, attribute = self.target.partition(":")
            self._resolved = operator.attrgetter(attribute)(importlib.import_module(module))
        return self._resolved

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def __repr__(self) -> str:
        return f"Lazy({self.target!r})"


def hook(value: Any) -> Any:
    """A hook as given: a callable as is, ``"module:attribute"`` as a :class:`Lazy`, None as None."""
    return Lazy(value) if isinstance(value, str) else value


def run_started(emitter: TelemetryEmitter, config: Any, *, worker: str, packages: "Packages | Iterable[str]",
                resources: Mapping[str, Any], versions: Mapping[str, str] | None = None,
                **fields: Any) -> dict | None:
    """A run's first event with the fields every worker gives it the same way: the worker, the config's digest
    and the versions of its packages (the list ``--describe`` reports; ``versions`` adds to or overrides
    them); ``fields`` are the worker's own."""
    from mosaic.provenance import config_digest

    return emitter.run_started(worker=worker, config_digest=config_digest(config.to_dict()),
                               versions={**Packages.of(packages).versions(), **(versions or {})},
                               resources=resources, **fields)


@dataclass
class WorkerContext:
    """What a runtime gets besides its config."""

    emitter: TelemetryEmitter
    control: RunControl
    run_dir: RunDir
    #: Tick it after each iteration; register threads the run depends on.
    progress: ProgressTracker = field(default_factory=ProgressTracker)


@dataclass(frozen=True)
class EvaluateRequest:
    """``--evaluate TARGET`` and its options, the same for every worker."""

    target: str  # a run folder (its latest checkpoint) or a checkpoint
    episodes: int = 20
    opponent: str | None = None  # 'random', or another run/checkpoint for the other seat(s)
    video: int = 0  # record the first N episodes
    seed: int = 0
    json: bool = False
    fastlane: bool = False


def _heartbeat_of(config: Any) -> float:
    reporting = getattr(config, "reporting", None)
    interval = getattr(reporting, "heartbeat_interval_s", None)
    return float(interval) if interval is not None else DEFAULT_HEARTBEAT_S


#: The hooks that may be named by ``"module:attribute"``.
_HOOKS = ("config_from_dict", "make_runtime", "default_config", "deep_validate", "heartbeat_interval_s",
          "describe", "algo_params_schema", "envs", "dry_run", "rounded_budget", "evaluate", "make_player")


@dataclass
class WorkerProgram:
    """A worker as the shared command line runs it. ``name``, ``config_class`` and ``make_runtime`` are
    enough; every hook may be a callable or ``"module:attribute"`` (``".runtime:MyRuntime"``: relative to the
    worker's package, the one ``config_class`` comes from). ``describe`` and ``packages`` default to that
    package's ``get_worker_metadata`` and ``PACKAGES``."""

    name: str
    #: ``(dict) -> config``; default: ``config_class.from_dict``.
    config_from_dict: Callable[[Mapping[str, Any]], WorkerConfig] | str | None = None
    #: ``(config, WorkerContext) -> WorkerRuntime``: usually the runtime class, named by string.
    make_runtime: Callable[[Any, WorkerContext], WorkerRuntime] | str | None = None
    #: ``() -> dict``; default: ``config_class``'s defaults without ``run_id`` and ``worker``. A mapping is
    #: laid over those defaults (its sections merged key by key).
    default_config: Callable[[], dict[str, Any]] | Mapping[str, Any] | str | None = None
    #: Extra checks that need more than the dict (e.g. building the env once); what it
    #: returns is handed to ``dry_run``.
    deep_validate: Callable[[Any], Any] | str | None = None
    #: ``(config) -> seconds``; default: ``config.reporting.heartbeat_interval_s``, else 5.
    heartbeat_interval_s: Callable[[Any], float] | str = _heartbeat_of
    #: The entry point's function: ``() -> (WorkerMetadata, WorkerCapabilities)``.
    describe: Callable[[], tuple[Any, Any]] | str | None = None
    #: The typed (``mosaic.configkit``) config class: ``--describe`` gives its JSON Schema.
    config_class: type | None = None
    #: Distributions whose installed versions ``--describe`` and ``run_started`` report (:class:`Packages`,
    #: or the required ones as a tuple).
    packages: Packages | tuple[str, ...] = ()
    #: ``ALGORITHM -> JSON Schema`` of ``algo_params`` (``--schema``).
    algo_params_schema: Callable[[str], dict[str, Any]] | str | None = None
    #: ``() -> {family: [env ids]}``: the envs this worker offers, as installed.
    envs: Callable[[], Mapping[str, Sequence[str]]] | str | None = None
    #: ``(config, deep_validate's result) -> dict`` printed by ``--dry-run`` beside the config.
    dry_run: Callable[[Any, Any], dict[str, Any]] | str | None = None
    #: ``(config, start) -> RoundedBudget | None`` (mosaic.workerkit.run_fields): how the library rounds the budget
    #: from ``start`` (the steps of the checkpoint it restores, else 0), said up front by ``--dry-run`` and by the
    #: run (a warning after ``run_started``). Default: the config's own ``rounded_budget([start])`` where it has
    #: one; None: it takes total_timesteps.
    rounded_budget: Callable[[Any, int], Any] | str | None = None
    #: Plays a trained run or checkpoint; returns the exit code. None: cannot evaluate.
    evaluate: Callable[[EvaluateRequest], int] | str | None = None
    #: ``(run or checkpoint, options) -> Player`` (mosaic.workerkit.player): serves a trained policy to a
    #: match (``--player``, ``--player-options``). None: this worker cannot serve a player.
    make_player: Callable[[str, dict[str, Any]], Any] | str | None = None
    #: Hook to add worker-specific flags; return an exit code to stop there.
    add_arguments: Callable[[argparse.ArgumentParser], None] | None = None
    handle_arguments: Callable[[argparse.Namespace], int | None] | None = None

    def __post_init__(self) -> None:
        cls = self.config_class
        package = _worker_package(cls)
        for name in _HOOKS:
            value = getattr(self, name)
            if isinstance(value, str) and value.startswith("."):
                if package is None:
                    raise TypeError(f"worker {self.name!r}: {name}={value!r} is relative to the worker's package, "
                                    "which config_class names")
                value = package.__name__ + value
            setattr(self, name, hook(value))
        if package is not None:  # what the worker's package says of itself (its __init__.py)
            if self.describe is None:
                self.describe = getattr(package, "get_worker_metadata", None)
            if not self.packages:
                self.packages = getattr(package, "PACKAGES", ())
        self.packages = Packages.of(self.packages)
        if self.config_from_dict is None:
            if cls is None:
                raise TypeError(f"worker {self.name!r}: WorkerProgram needs config_from_dict or config_class")
            self.config_from_dict = cls.from_dict
        if self.make_runtime is None:
            raise TypeError(f"worker {self.name!r}: WorkerProgram needs make_runtime")
        if self.default_config is None or isinstance(self.default_config, Mapping):
            if cls is None:
                raise TypeError(f"worker {self.name!r}: WorkerProgram needs default_config or config_class")
            self.default_config = _class_defaults(cls, dict(self.default_config or {}))
        if self.rounded_budget is None and cls is not None and callable(getattr(cls, "rounded_budget", None)):
            self.rounded_budget = _config_rounds(cls)


def _worker_package(cls: type | None) -> Any:
    """The top-level package a config class comes from (a worker's package), or None."""
    if cls is None:
        return None
    import sys

    top = cls.__module__.partition(".")[0]
    return sys.modules.get(top) if top not in ("mosaic", "__main__", "builtins") else None


def _class_defaults(cls: type, overrides: dict[str, Any]) -> Callable[[], dict[str, Any]]:
    def default_config() -> dict[str, Any]:
        data = cls(run_id="unset").to_dict()
        data.pop("run_id", None)
        data.pop("worker", None)
        for key, value in overrides.items():
            if isinstance(value, Mapping) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return data

    return default_config


def _config_rounds(cls: type) -> Callable[[Any, int], Any]:
    """The config's ``rounded_budget``, given the restored steps where it takes them."""
    takes_start = len(inspect.signature(cls.rounded_budget).parameters) > 1

    def rounded_budget(config: Any, start: int) -> Any:
        return config.rounded_budget(start) if takes_start else config.rounded_budget()

    return rounded_budget
