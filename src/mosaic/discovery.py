"""Find workers through the ``mosaic.workers`` entry-point group.

Each entry point names a callable returning ``(WorkerMetadata,
WorkerCapabilities)``. A plugin that fails to load or describes itself wrongly
is reported as :class:`BrokenWorker` with its reason; it never hides the
others.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import metadata
from typing import Iterable

from mosaic.errors import UserError
from mosaic.worker import WorkerCapabilities, WorkerMetadata

ENTRY_POINT_GROUP = "mosaic.workers"


@dataclass(frozen=True)
class DiscoveredWorker:
    name: str
    entry_point: str
    metadata: WorkerMetadata
    capabilities: WorkerCapabilities

    @property
    def cli_module(self) -> str:
        """Module run as ``python -m <cli_module>``: the plugin package's ``cli``."""
        package = self.entry_point.split(":", 1)[0].split(".", 1)[0]
        return f"{package}.cli"


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
    if caps.worker_type != ep.name:
        raise ValueError(f"worker_type {caps.worker_type!r} does not match entry-point name {ep.name!r}")
    problems = caps.problems()
    if problems:
        raise ValueError("; ".join(problems))
    return DiscoveredWorker(ep.name, ep.value, meta, caps)


def discover_workers(group: str = ENTRY_POINT_GROUP) -> Discovery:
    workers: list[DiscoveredWorker] = []
    broken: list[BrokenWorker] = []
    seen: set[str] = set()
    for ep in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
        if ep.name in seen:  # the same distribution found twice on sys.path
            continue
        seen.add(ep.name)
        try:
            workers.append(_describe(ep))
        except Exception as exc:  # any plugin failure is data, not a crash
            broken.append(BrokenWorker(ep.name, ep.value, f"{type(exc).__name__}: {exc}"))
    return Discovery(tuple(workers), tuple(broken))
