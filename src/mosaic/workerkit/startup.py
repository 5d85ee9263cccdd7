"""A worker process's start and Python's cyclic garbage collector.

Setting up a run imports torch and a library and builds the env and the model: hundreds of
thousands of objects that live as long as the process. While they are being built the cyclic
collector walks them again and again and finds almost nothing to free. Measured on this project's
2-core machine (``bench/worker_start.py``, docs/results.md), the imports of a XuanCe, Tianshou or
CleanRL run (torch, ``torch._dynamo``, which torch's optimisers import, and the library) took
0.78-0.81 of their CPU with the collector paused.

So :func:`mosaic.workerkit.cli.worker_main` pauses the collector when the process starts, and
:func:`resume` starts it again once the process is set up: when a run emits ``run_started``, when
an evaluation starts its first episode, when a player is loaded (before its first request), after
the first of many configs checked in one process, and whichever way ``worker_main`` returns.
``resume`` first freezes what exists (``gc.freeze``): those objects are never walked again, so the
collections during training are shorter too. Nothing a run computes depends on when the collector
runs; memory held by unreachable cycles built during set-up is freed at the first collection after
``resume`` (a run's peak memory grew by 1-3%).
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Stop the cyclic collector until :func:`resume` (a no-op where it is already off)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume(freeze: bool = True) -> None:
    """Start the collector again if :func:`pause` stopped it (else nothing), first freezing what exists."""
    global _paused
    if _paused:
        _paused = False
        if freeze:
            gc.freeze()
        gc.enable()


def paused() -> bool:
    """Whether :func:`pause` stopped the collector and :func:`resume` has not started it yet."""
    return _paused
