"""What a worker writes beside a library's checkpoint so MOSAIC can resume and evaluate it.

A checkpoint is a folder ``<run>/checkpoints/checkpoint_<iteration:06d>/`` holding
whatever the library saves plus :data:`STATE_FILE`: the run's counters
(iteration, env steps, episodes), the run it came from, a ``format`` naming the
worker and its version, and the worker's own fields (a subclass of
:class:`CheckpointState` declares them, typed). The state file is written last
and atomically, so a folder holding it is a complete checkpoint; a folder
without it (a save that was interrupted) is never taken for one.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping, TypeVar

from mosaic.errors import ConfigError
from mosaic.runs import write_json_atomic

STATE_FILE = "mosaic_state.json"
CHECKPOINTS_DIR = "checkpoints"
RESTORE_FIELD = "checkpoint.restore_from"

S = TypeVar("S", bound="CheckpointState")


def checkpoint_folder(run_root: str | Path, iteration: int) -> Path:
    return Path(run_root) / CHECKPOINTS_DIR / f"checkpoint_{iteration:06d}"


def is_checkpoint(folder: str | Path) -> bool:
    return (Path(folder) / STATE_FILE).is_file()


def run_checkpoints(run_root: str | Path) -> list[Path]:
    """A run's complete checkpoints, oldest first."""
    folder = Path(run_root) / CHECKPOINTS_DIR
    return sorted(c for c in folder.glob("checkpoint_*") if is_checkpoint(c)) if folder.is_dir() else []


class PeriodicCheckpoints:
    """A run's periodic checkpoints, oldest first: ``checkpoint.keep`` says how many stay.

    Each one saved is :meth:`add`-ed; the oldest beyond the newest ``keep`` are deleted then
    (``None``: all stay). A final checkpoint (the run's end, a cancel) is not added: it always stays.
    """

    def __init__(self, keep: int | None) -> None:
        self.keep = keep
        self.folders: list[Path] = []

    def add(self, folder: str | Path) -> None:
        self.folders.append(Path(folder))
        while self.keep is not None and len(self.folders) > self.keep:
            shutil.rmtree(self.folders.pop(0), ignore_errors=True)


def resolve(path: str | Path, field: str = "checkpoint", worker: str = "this worker") -> Path:
    """A checkpoint folder, or a run folder (its latest checkpoint); ConfigError naming ``field``."""
    p = Path(path)
    if is_checkpoint(p):
        return p
    found = run_checkpoints(p)
    if found:
        return found[-1]
    if not p.exists():
        raise ConfigError(field, f"{str(p)!r} does not exist")
    raise ConfigError(field, f"{str(p)!r} is neither a checkpoint of {worker} (no {STATE_FILE} in it) "
                             "nor a run folder with checkpoints")


@dataclass
class CheckpointState:
    """The counters every worker keeps; subclasses add their own typed fields."""

    #: ``<worker>/<version>`` of the layout; a reader refuses another worker's checkpoint.
    FORMAT: ClassVar[str] = "mosaic/1"

    iteration: int
    timesteps_total: int
    episodes: int
    run_id: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"format": self.FORMAT, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls: type[S], data: Mapping[str, Any], where: str = "checkpoint") -> S:
        if not isinstance(data, Mapping):
            raise ConfigError(where, f"its {STATE_FILE} must hold an object")
        if data.get("format") != cls.FORMAT:
            raise ConfigError(where, f"is a {data.get('format')!r} checkpoint, expected {cls.FORMAT!r}")
        fields = {f.name: f for f in dataclasses.fields(cls)}
        hints = typing.get_type_hints(cls)
        missing = [name for name, f in fields.items() if name not in data
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            raise ConfigError(where, f"its {STATE_FILE} lacks {', '.join(missing)}")
        values = {}
        for name in fields:
            if name in data:
                value = data[name]
                if hints[name] is int and not (isinstance(value, int) and not isinstance(value, bool)):
                    raise ConfigError(where, f"its {STATE_FILE} has {name}={value!r}, not an integer")
                values[name] = value
        return cls(**values)

    def write(self, folder: str | Path) -> Path:
        """Write the state file into ``folder`` (last, once the library's files are there)."""
        path = Path(folder) / STATE_FILE
        write_json_atomic(path, self.to_dict())
        return path

    @classmethod
    def read(cls: type[S], path: str | Path, field: str = "checkpoint", worker: str = "this worker") -> S:
        """The state of the checkpoint at ``path`` (or of a run folder's latest checkpoint)."""
        folder = resolve(path, field, worker)
        try:
            data = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(field, f"cannot read {folder / STATE_FILE}: {exc}") from None
        return cls.from_dict(data, field)


def format_worker(fmt: Any) -> str:
    """The worker a state file's ``format`` names (``mosaic-ray-worker/1`` -> ``ray``), or ""."""
    found = re.fullmatch(r"mosaic-([a-z0-9_]+)-worker/\d+", fmt) if isinstance(fmt, str) else None
    return found.group(1) if found else ""


def env_words(environment: Any) -> str:
    """``family/env_id`` of an env config or of its section as saved (a mapping); "" when it names no env."""
    get = environment.get if isinstance(environment, Mapping) else lambda name: getattr(environment, name, None)
    family, env_id = get("family"), get("env_id")
    return (f"{family}/{env_id}" if family else str(env_id)) if env_id else ""


@dataclass(frozen=True)
class TrainedAs:
    """What a run trains, as far as a restore cares: its worker, algorithm, env and policy layout (in words).

    A checkpoint restores only into a config that says the same; a field left "" (an old checkpoint that did
    not record it) is not compared.
    """

    worker: str
    algorithm: str = ""
    env: str = ""
    policies: str = ""

    def describe(self, names: "tuple[str, ...]") -> str:
        return ", ".join(f"policy layout [{self.policies}]" if name == "policies" else f"{name} {getattr(self, name)}"
                         for name in names)


def check_restore_matches(checkpoint: TrainedAs, config: TrainedAs, field: str = RESTORE_FIELD) -> None:
    """The one comparison of a restore: a ConfigError naming ``field`` and what differs, or nothing."""
    names = ("worker", "algorithm", "env", "policies")

    def same(name: str) -> bool:
        then, now = getattr(checkpoint, name), getattr(config, name)
        # algorithm names are the same in any case (canonical_algorithm); "" is not recorded, so not compared
        return not then or not now or then == now or (name == "algorithm" and then.lower() == now.lower())

    differs = tuple(n for n in names if not same(n))
    if "worker" in differs:  # another worker's fields mean nothing here
        differs = ("worker",)
    if not differs:
        return
    wanted = f"a checkpoint of a {config.worker} run" if differs == ("worker",) else \
        f"a checkpoint of a {config.worker} run with {config.describe(differs)}"
    raise ConfigError(field, f"was trained with {checkpoint.describe(differs)}; this config has "
                             f"{config.describe(differs)}; allowed: {wanted}")


def read_for_restore(state_class: "type[S]", path: str | Path, config: TrainedAs,
                     trained: "Any", field: str = RESTORE_FIELD) -> "tuple[Path, S]":
    """(folder, state) of the checkpoint to restore, once it was checked against what ``config`` trains.

    ``trained(state)`` says what the checkpoint trained (a :class:`TrainedAs`); another worker's checkpoint is
    refused by the worker its format names, before its state is read as this worker's.
    """
    worker = f"the {config.worker} worker"
    folder = resolve(path, field, worker)
    try:
        data = json.loads((folder / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(field, f"cannot read {folder / STATE_FILE}: {exc}") from None
    other = format_worker(data.get("format")) if isinstance(data, Mapping) else ""
    if other and data.get("format") != state_class.FORMAT:
        check_restore_matches(TrainedAs(other), config, field)
    state = state_class.from_dict(data, field)
    check_restore_matches(trained(state), config, field)
    return folder, state


class CheckpointCadence:
    """When a run saves, and the save itself, the same for every worker.

    Periodic: at the first safe point past each multiple of ``checkpoint.every_timesteps`` env steps
    (:meth:`due`), pruned to ``checkpoint.keep``; final: at the end (``checkpoint.at_end``) unless the run's
    last steps were just saved (:meth:`final_due`). :meth:`save` writes one: the folder, the library's files
    (the worker's ``write_files``), the state file last, and the ``checkpoint_saved`` event.
    """

    def __init__(self, every: int | None, at_end: bool = True, keep: int | None = None) -> None:
        self.every, self.at_end = every, at_end
        self.periodic = PeriodicCheckpoints(keep)
        #: env steps of the last checkpoint saved or restored; -1: none yet
        self.last_saved = -1

    @classmethod
    def of(cls, checkpoint: Any) -> "CheckpointCadence":
        """From a run config's ``checkpoint`` section (``every_timesteps``, ``at_end``, ``keep``)."""
        return cls(checkpoint.every_timesteps, checkpoint.at_end, getattr(checkpoint, "keep", None))

    def due(self, timesteps: int) -> bool:
        return bool(self.every) and timesteps // self.every > max(self.last_saved, 0) // self.every

    def final_due(self, timesteps: int) -> bool:
        return self.at_end and self.last_saved != timesteps

    def save(self, emitter: Any, run_root: str | Path, state: CheckpointState,
             write_files: Any = None, periodic: bool = False) -> Path:
        folder = save_checkpoint(emitter, run_root, state, write_files)
        self.last_saved = state.timesteps_total
        if periodic:
            self.periodic.add(folder)
        return folder


def save_checkpoint(emitter: Any, run_root: str | Path, state: CheckpointState, write_files: Any = None) -> Path:
    """One checkpoint: its folder, the library's files (``write_files(folder)``), the state file last, and the
    ``checkpoint_saved`` event."""
    folder = checkpoint_folder(run_root, state.iteration)
    folder.mkdir(parents=True, exist_ok=True)
    if write_files is not None:
        write_files(folder)
    state.write(folder)
    emitter.checkpoint_saved(path=str(folder), iteration=state.iteration, timesteps_total=state.timesteps_total)
    return folder
