"""Where an experiment's cells run: the backend interface (a backend is one module of this package).

A backend takes a cell's run (its run id and config), gets its telemetry into this machine's run store
(``MOSAIC_HOME/trainer/runs/RUN_ID``: config, manifest, ``telemetry.jsonl``, as any run), says how each
run stands and why it ended, and cancels a run. The coordinator knows nothing else about it, so a Ray
cluster or Slurm backend is one more module here, not a change to the experiment logic.

* ``local``: the trainer daemon serving ``MOSAIC_HOME`` (:mod:`mosaic.experiments.backends.local`).
* ``ray``: a Ray cluster (:mod:`mosaic.experiments.backends.ray`).

The interface is :mod:`mosaic.experiments.backends.base` (the backends import it, not this package).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from mosaic.errors import UserError
from mosaic.experiments.backends.base import Backend, BackendUnavailable, RunStatus, status_from_run_store

__all__ = ["BACKENDS", "Backend", "BackendUnavailable", "RunStatus", "backend_for", "status_from_run_store"]

BACKENDS = ("local", "ray")


def backend_for(name: str, home: Path, announce: Callable[[str], None] | None = None, start: bool = True,
                **options: Any) -> Backend:
    """The named backend; with ``start`` false, only one already running (:class:`BackendUnavailable` if none).
    ``options`` are the backend's own (``address`` for a cluster)."""
    if name == "local":
        from mosaic.experiments.backends.local import LocalDaemon

        if options.get("address"):
            raise UserError("--address: the local backend runs on this machine's daemon; allowed: no address, "
                            "or --backend ray --address ADDR")
        return LocalDaemon(home, announce, start=start)
    if name == "ray":
        from mosaic.experiments.backends.ray import RayBackend

        return RayBackend(home, options.get("address"), announce, start=start, storage=options.get("storage"),
                          node_home=options.get("node_home"))
    raise UserError(f"backend: {name!r} is not one of {', '.join(BACKENDS)}")
