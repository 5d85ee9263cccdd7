"""Find workers through the ``mosaic.workers`` entry-point group.

Each entry point names a callable returning ``(WorkerMetadata,
WorkerCapabilities)``. Workers installed in MOSAIC's own environment are
described in-process (their entry-point modules are cheap to import). A
worker that declares a Python environment of its own
(``mosaic.host.environments``) is described by that environment's interpreter
(``--describe``, cached by ``mosaic.workerkit.describe``): MOSAIC never imports it. A
plugin that fails to load, describes itself wrongly, or whose environment is
missing or broken is reported as :class:`BrokenWorker` with its reason; it
never hides the others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Mapping

from mosaic.errors import UserError
from mosaic.workerkit.contract import ENTRY_POINT_GROUP, ResourceEstimate, WorkerCapabilities, WorkerMetadata



@dataclass(frozen=True)
class DiscoveredWorker:
    name: str
    entry_point: str
    metadata: WorkerMetadata
    capabilities: WorkerCapabilities
    #: The interpreter of the worker's own environment; None: MOSAIC's interpreter.
    python: str | None = None
    #: Its describe document, when discovery already has it (workers in their own environment).
    description: Mapping[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def cli_module(self) -> str:
        """Module run as ``python -m <cli_module>``: the plugin package's ``cli``."""
        if self.description and self.description.get("cli_module"):
            return str(self.description["cli_module"])
        package = self.entry_point.split(":", 1)[0].split(".", 1)[0]
        return f"{package}.cli"


#: MOSAIC's own jobs that run as runs (``name -> module``, run as ``python -m module`` in MOSAIC's
#: environment): not library shims, so no entry point; found by name only (``discover_workers(only=NAME)``,
#: :func:`internal_worker`), never listed with the workers.
INTERNAL_WORKERS = {"arena": "mosaic.arena.shard_worker"}


def internal_worker(name: str) -> DiscoveredWorker | None:
    """The internal worker ``name`` (:data:`INTERNAL_WORKERS`), or None."""
    module = INTERNAL_WORKERS.get(name)
    if module is None:
        return None
    import importlib

    meta, caps = importlib.import_module(module).get_worker_metadata()
    return _checked(name, f"{module}:get_worker_metadata", meta, caps, description={"cli_module": module})


@dataclass(frozen=True)
class BrokenWorker:
    name: str
    entry_point: str
    reason: str


@dataclass(frozen=True)
class Discovery:
    workers: tuple[DiscoveredWorker, ...] = ()
    broken: tuple[BrokenWorker, ...] = field(default_factory=tuple)

    def names(self) -> list[str]:
        return [w.name for w in self.workers]

    def get(self, name: str) -> DiscoveredWorker:
        for worker in self.workers:
            if worker.name == name:
                return worker
        for broken in self.broken:
            if broken.name == name:
                raise UserError(f"worker: {name!r} is installed but broken: {broken.reason}")
        raise UserError(f"worker: {name!r} is not one of {', '.join(self.names()) or '(none installed)'}")

    def filter(self, env_family: str | None = None, paradigm: str | None = None,
               algorithm: str | None = None) -> list[DiscoveredWorker]:
        """Workers supporting every given criterion (case-insensitive)."""
        def has(values: Iterable[str], wanted: str | None) -> bool:
            return wanted is None or wanted.lower() in {v.lower() for v in values}

        return [w for w in self.workers
                if has(w.capabilities.env_families, env_family)
                and has(w.capabilities.paradigms, paradigm)
                and has(w.capabilities.algorithms, algorithm)]


def _describe(ep: metadata.EntryPoint) -> DiscoveredWorker:
    factory = ep.load()
    if not callable(factory):
        raise TypeError(f"{ep.value} is not callable")
    result = factory()
    if not (isinstance(result, tuple) and len(result) == 2):
        raise TypeError(f"{ep.value}() returned {type(result).__name__}, "
                        "expected (WorkerMetadata, WorkerCapabilities)")
    meta, caps = result
    if not isinstance(meta, WorkerMetadata) or not isinstance(caps, WorkerCapabilities):
        raise TypeError(f"{ep.value}() returned ({type(meta).__name__}, {type(caps).__name__}), "
                        "expected (WorkerMetadata, WorkerCapabilities)")
    return _checked(ep.name, ep.value, meta, caps)


def _checked(name: str, entry_point: str, meta: WorkerMetadata, caps: WorkerCapabilities,
             **extra: Any) -> DiscoveredWorker:
    if caps.worker_type != name:
        raise ValueError(f"worker_type {caps.worker_type!r} does not match entry-point name {name!r}")
    problems = caps.problems()
    if problems:
        raise ValueError("; ".join(problems))
    return DiscoveredWorker(name, entry_point, meta, caps, **extra)


def from_description(document: Mapping[str, Any], python: str | None = None) -> DiscoveredWorker:
    """A worker from its describe document (``mosaic.workerkit.describe``); ValueError if inconsistent."""
    caps = dict(document["capabilities"])
    resources = ResourceEstimate(**caps.pop("resources", {}))
    caps = {key: tuple(value) if isinstance(value, list) else value for key, value in caps.items()}
    meta = WorkerMetadata(**document["metadata"])
    return _checked(document["worker"], document["entry_point"], meta,
                    WorkerCapabilities(resources=resources, **caps), python=python, description=document)


def discover_workers(group: str = ENTRY_POINT_GROUP, *, environments: bool = True,
                     only: str | None = None) -> Discovery:
    """Every worker: those in MOSAIC's environment, then (``environments``) those in their own.

    ``only``: just the worker of that name (nothing else is described or checked: what a command
    that runs one worker needs); the result is empty when there is none, so callers look again
    without ``only`` to name the installed ones in their error. An internal worker
    (:data:`INTERNAL_WORKERS`) is found this way only.
    """
    if only is not None and only in INTERNAL_WORKERS and group == ENTRY_POINT_GROUP:
        return Discovery((internal_worker(only),))
    workers: list[DiscoveredWorker] = []
    broken: list[BrokenWorker] = []
    seen: set[str] = set()
    if environments and group == ENTRY_POINT_GROUP:
        own, own_broken = environment_workers(only=only)
        workers += own
        broken += own_broken
        seen |= {w.name for w in own} | {b.name for b in own_broken}
    for ep in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
        if ep.name in seen or (only is not None and ep.name != only):  # seen: the same distribution twice
            continue
        seen.add(ep.name)
        try:
            workers.append(_describe(ep))
        except Exception as exc:  # any plugin failure is data, not a crash
            broken.append(BrokenWorker(ep.name, ep.value, f"{type(exc).__name__}: {exc}"))
    return Discovery(tuple(sorted(workers, key=lambda w: w.name)), tuple(sorted(broken, key=lambda b: b.name)))


def environment_workers(home: str | Path | None = None, only: str | None = None) -> tuple[list[Any], list[Any]]:
    """``(DiscoveredWorker list, BrokenWorker list)`` of the workers that declare an environment.

    Each is described by its environment's interpreter (``--describe``, cached);
    MOSAIC's own interpreter never imports it. A missing, stale or broken
    environment, or one where the worker does not run, makes it broken, with
    the command that builds it.
    """
    from mosaic.host import describe_cache
    from mosaic.host.environments import scan, status

    found = scan()
    workers, broken = [], []
    for name, reason in sorted(found.invalid.items()):
        broken.append(BrokenWorker(name, "", reason))
    for name, source in sorted(found.sources.items()):
        if not source.declared or (only is not None and name != only):
            continue
        current = status(source, home, check=False)
        if current.status != "ok":
            broken.append(BrokenWorker(name, source.entry_point, f"its environment is {current.status} "
                                       f"({current.reason}): build it with `mosaic envs build {name}`"))
            continue
        try:
            document = describe_cache.load(str(current.interpreter), f"{source.package}.cli", [source.root])
            workers.append(from_description(document, python=str(current.interpreter)))
        except (UserError, ValueError, TypeError, KeyError) as exc:
            broken.append(BrokenWorker(name, source.entry_point, f"it does not run in its environment "
                                       f"{current.path}: {exc} (rebuild it with `mosaic envs build {name} "
                                       "--force`)"))
    return workers, broken
