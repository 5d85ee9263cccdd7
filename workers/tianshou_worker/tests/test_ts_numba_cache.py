"""Tianshou compiles its numba functions in every process; the worker turns numba's on-disk cache on for them.

Real processes in the worker's environment build what compiles them (a policy's return functions, a vector
buffer's index functions, a prioritised buffer's segment tree), with NUMBA_CACHE_DIR set to a fresh folder so
that the first has nothing to load: the first compiles and saves every function, the second loads every one,
and a third, started while the test holds a cache folder's lock, waits for it before it loads.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import time
from pathlib import Path

LOCK_NAME = "mosaic-numba-cache.lock"  # tianshou_worker.numba_cache.LOCK_NAME (not importable here)

BUILD = """
import json
from tianshou_worker.numba_cache import cache_numba_functions
found = cache_numba_functions()
import numpy as np
from tianshou.algorithm.algorithm_base import Policy
from tianshou.data import VectorReplayBuffer
from tianshou.data.utils.segtree import SegmentTree
Policy._compile()
VectorReplayBuffer(10, 2)
SegmentTree(4)
print(json.dumps({f"{d.py_func.__module__}.{d.py_func.__name__}": {
    "path": d.stats.cache_path, "hits": sum(d.stats.cache_hits.values()),
    "misses": sum(d.stats.cache_misses.values()), "compiled": len(d.overloads)} for d in found}))
"""


def _start(python: Path, cache: Path) -> subprocess.Popen:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    return subprocess.Popen([str(python), "-c", BUILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def _result(proc: subprocess.Popen) -> dict[str, dict]:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    return json.loads(out.strip().splitlines()[-1])


def _build(python: Path, cache: Path) -> dict[str, dict]:
    return _result(_start(python, cache))


def _waits_for_lock(pid: int, lock: Path) -> bool:
    """Whether process ``pid`` is blocked on a ``flock`` of ``lock`` (a waiter's line in /proc/locks: ``->``)."""
    inode = os.stat(lock).st_ino
    rows = [line.split() for line in Path("/proc/locks").read_text().splitlines()]
    return any(len(r) > 6 and r[1] == "->" and r[5] == str(pid) and r[6].endswith(f":{inode}") for r in rows)


#: What the worker's start-up compiled in every process: a policy's returns, a vector buffer's indices, a
#: prioritised buffer's segment tree (Tianshou's other jitted functions compile when an algorithm first uses them).
AT_START = {"tianshou.algorithm.algorithm_base._gae", "tianshou.algorithm.algorithm_base._nstep_return",
            "tianshou.data.buffer.manager._prev_index", "tianshou.data.buffer.manager._next_index",
            "tianshou.data.utils.segtree._setitem", "tianshou.data.utils.segtree._reduce",
            "tianshou.data.utils.segtree._get_prefix_sum_idx"}


def test_the_second_process_loads_every_jitted_function_the_first_compiled(tianshou_env, tmp_path):
    python, cache = tianshou_env / "bin" / "python", tmp_path / "numba-cache"
    first = _build(python, cache)
    assert {name for name, seen in first.items() if seen["compiled"]} == AT_START, first
    for name, seen in first.items():  # every jitted function, compiled here or not, is set to cache
        assert seen["path"] and Path(seen["path"]).is_relative_to(cache), (name, "not cached in the folder given")
        assert seen["hits"] == 0 and seen["misses"] == seen["compiled"], (name, "a fresh folder has nothing to load")
    second = _build(python, cache)
    assert second.keys() == first.keys()
    for name, seen in second.items():
        assert seen["misses"] == 0 and seen["hits"] == first[name]["compiled"], (name, "compiled again", seen)

    # loads and saves hold the folder's lock: a process that would load waits while another holds it
    lock = Path(first["tianshou.algorithm.algorithm_base._gae"]["path"]) / LOCK_NAME
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        third = _start(python, cache)
        deadline = time.monotonic() + 240
        while not _waits_for_lock(third.pid, lock):
            assert third.poll() is None, ("it ended without waiting for the lock", third.communicate())
            assert time.monotonic() < deadline, "the third process never waited for the lock"
            time.sleep(0.05)
    assert _result(third) == second  # let go, it loads everything


def test_every_tianshou_module_with_numba_functions_is_listed(tianshou_env):
    """A Tianshou that jits in another module would compile it per process again: NUMBA_MODULES must name it."""
    python = tianshou_env / "bin" / "python"
    listed = subprocess.run([str(python), "-c", "import json; from tianshou_worker.numba_cache import NUMBA_MODULES; "
                             "print(json.dumps(NUMBA_MODULES))"], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr[-2000:]
    (package,) = (tianshou_env / "lib").glob("python3.*/site-packages/tianshou")
    jitting = sorted(".".join(path.relative_to(package.parent).with_suffix("").parts)
                     for path in package.rglob("*.py") if re.search(r"^\s*@(numba\.)?n?jit\b", path.read_text(
                         encoding="utf-8"), flags=re.M))
    assert jitting == sorted(json.loads(listed.stdout)), "every Tianshou module that jits must be in NUMBA_MODULES"
