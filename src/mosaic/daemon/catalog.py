"""The workers the daemon can start: discovery results, the interpreter to
start each with, and the algo_params JSON Schemas a GUI renders forms from.

A worker publishes schemas by shipping a module ``<package>.algo_params``
with ``schema(ALGORITHM) -> dict`` (the Ray worker does); it must be cheap to
import (no RL library), like ``get_worker_metadata``.
"""

from __future__ import annotations

import importlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any, Mapping

from mosaic.discovery import DiscoveredWorker, Discovery, discover_workers


@dataclass
class WorkerCatalog:
    pythons: Mapping[str, str] = field(default_factory=dict)  # worker → interpreter
    discovery: Discovery = field(default_factory=Discovery)
    _schemas: dict[str, dict[str, str]] = field(default_factory=dict)

    def refresh(self) -> None:
        self.discovery = discover_workers()
        self._schemas.clear()

    def get(self, name: str) -> DiscoveredWorker:
        """The worker named ``name``; :class:`~mosaic.errors.UserError` if unknown or broken."""
        return self.discovery.get(name)

    def python_for(self, name: str) -> str:
        """``--python`` given to the daemon, else the worker's own environment's, else MOSAIC's."""
        if self.pythons.get(name):
            return self.pythons[name]
        worker = next((w for w in self.discovery.workers if w.name == name), None)
        return (worker.python if worker is not None else None) or sys.executable

    def algo_params_schemas(self, worker: DiscoveredWorker) -> dict[str, str]:
        """Algorithm → JSON Schema text; empty when the worker publishes none."""
        if worker.name not in self._schemas:
            self._schemas[worker.name] = _load_schemas(worker)
        return self._schemas[worker.name]


def _load_schemas(worker: DiscoveredWorker) -> dict[str, str]:
    package = worker.entry_point.split(":", 1)[0].split(".", 1)[0]
    try:
        module = importlib.import_module(f"{package}.algo_params")
    except ImportError:
        return {}
    schema = getattr(module, "schema", None)
    if not callable(schema):
        return {}
    out: dict[str, str] = {}
    for algorithm in worker.capabilities.algorithms:
        try:
            value: Any = schema(algorithm)
            out[algorithm] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
        except Exception:  # a worker's schema bug must not break ListWorkers
            continue
    return out
