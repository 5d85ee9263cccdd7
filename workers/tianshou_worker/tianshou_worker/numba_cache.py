"""Numba's on-disk cache for Tianshou's jitted functions, which Tianshou compiles afresh in every process.

Tianshou builds a policy, a vector buffer or a prioritised buffer by first compiling a few numba functions
(discounted returns, buffer indices, segment trees): 10-11 CPU-seconds a process on a busy 2-core machine.
It declares them ``@njit`` without ``cache=True``. :func:`cache_numba_functions` turns numba's cache on for
them before anything compiles them (the dispatcher's ``enable_caching``, which is what ``cache=True`` calls),
so the first process in an environment compiles and saves them, and every later one loads the same machine
code (0.3 CPU-seconds). Numba keys the cache by the source file, the argument types and the CPU, and
recompiles when any of them differs; where it can write no cache, a process compiles as before.

One thing numba's cache leaves open is processes saving at once. A save reads the function's index, picks the
first free data file number for a new signature, and writes the index and then the data. Two processes adding
two *different* signatures at the same moment can pick the same number, and the index of one then names the
other's data: a later process would load machine code compiled for other argument types. (Two processes adding
the same signature write the same entry, which is harmless; Tianshou's start-up compiles its signatures in one
order everywhere, so only later ones could race.) Every load and save here therefore holds an exclusive
``flock`` on one lock file in the cache folder, which makes read-index-pick-write one step.
"""

from __future__ import annotations

import fcntl
import importlib
from pathlib import Path
from typing import Any, Callable

#: Tianshou's modules that jit (tests check the installed Tianshou has no other).
NUMBA_MODULES = ("tianshou.algorithm.algorithm_base", "tianshou.data.buffer.manager", "tianshou.data.utils.segtree")
#: The lock file, one per cache folder.
LOCK_NAME = "mosaic-numba-cache.lock"


def cache_numba_functions() -> list[Any]:
    """Turn numba's cache on for every jitted function of :data:`NUMBA_MODULES` that has none, each load and
    save under the folder's lock. Call it before Tianshou builds anything; calling it again changes nothing.
    Returns the dispatchers (their ``.stats`` count cache hits and misses)."""
    from numba.core.caching import NullCache
    from numba.core.dispatcher import Dispatcher

    found: dict[int, Any] = {}
    for name in NUMBA_MODULES:
        for value in vars(importlib.import_module(name)).values():
            if not isinstance(value, Dispatcher) or id(value) in found:
                continue
            found[id(value)] = value
            if isinstance(value._cache, NullCache):  # Tianshou's own declaration: no cache
                try:
                    value.enable_caching()
                except RuntimeError:  # no folder numba can write its cache to: compile per process, as before
                    continue
                cache = value._cache
                cache.load_overload = locked(Path(cache.cache_path), cache.load_overload)
                cache.save_overload = locked(Path(cache.cache_path), cache.save_overload)
    return list(found.values())


def locked(folder: Path, method: Callable[..., Any]) -> Callable[..., Any]:
    """``method`` called while holding an exclusive ``flock`` on ``folder``'s lock file. Where the lock file
    cannot be made (the folder cannot be created or written), it is called without: numba then cannot save
    there either, and a load of a folder that does not exist finds nothing."""
    def call(*args: Any) -> Any:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle = open(folder / LOCK_NAME, "a")
        except OSError:
            return method(*args)
        with handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
            return method(*args)
    return call
