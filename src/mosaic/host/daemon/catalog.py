"""The workers the daemon can start: discovery results, the interpreter to
start each with, and each worker's describe document (config JSON Schema,
default config, algo_params schemas, envs) that a GUI renders forms from.

Describe documents come from the worker's own interpreter
(``python -m <worker>.cli --describe``, cached by :mod:`mosaic.host.describe_cache`):
the daemon never imports a worker's runtime, nor its schemas.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mosaic.host import describe_cache
from mosaic.host.discovery import DiscoveredWorker, Discovery, discover_workers


@dataclass
class WorkerCatalog:
    pythons: Mapping[str, str] = field(default_factory=dict)  # worker → interpreter
    discovery: Discovery = field(default_factory=Discovery)
    _descriptions: dict[str, dict[str, Any]] = field(default_factory=dict)

    def refresh(self) -> None:
        self.discovery = discover_workers()
        self._descriptions.clear()

    def get(self, name: str) -> DiscoveredWorker:
        """The worker named ``name`` (or MOSAIC's internal one of that name, which discovery does not list:
        :data:`mosaic.host.discovery.INTERNAL_WORKERS`); :class:`~mosaic.errors.UserError` if unknown or broken."""
        from mosaic.host.discovery import internal_worker

        if name not in self.discovery.names():
            internal = internal_worker(name)
            if internal is not None:
                return internal
        return self.discovery.get(name)

    def python_for(self, name: str) -> str:
        """``--python`` given to the daemon, else the worker's own environment's, else MOSAIC's."""
        if self.pythons.get(name):
            return self.pythons[name]
        worker = next((w for w in self.discovery.workers if w.name == name), None)
        return (worker.python if worker is not None else None) or sys.executable

    def description(self, name: str, refresh: bool = False) -> dict[str, Any]:
        """The worker's describe document (blocking: run it in a thread); UserError if it cannot say."""
        worker = self.get(name)
        if refresh or name not in self._descriptions:
            python = self.python_for(name)
            if worker.description is not None and not refresh and python == worker.python:
                document = dict(worker.description)
            else:
                document = describe_cache.load(python, worker.cli_module, _source_folders(worker), refresh=refresh)
            self._descriptions[name] = document
        return self._descriptions[name]

    def algo_params_schemas(self, worker: DiscoveredWorker) -> dict[str, str]:
        """Algorithm → JSON Schema text; empty when the worker publishes none or cannot describe itself."""
        try:
            schemas = self.description(worker.name)["algo_params_schemas"]
        except Exception:  # a worker's describe bug must not break ListWorkers
            return {}
        return {algorithm: json.dumps(schema, sort_keys=True) for algorithm, schema in schemas.items()}


def _source_folders(worker: DiscoveredWorker) -> list[Path]:
    """The worker package's folder (an editable install's edits describe again), found without importing it."""
    package = worker.entry_point.split(":", 1)[0].split(".", 1)[0]
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.origin:
        return []
    return [Path(spec.origin).parent]
