"""Tianshou compiles its numba functions in every process; the worker turns numba's on-disk cache on for them.

Two real processes in the worker's environment build what compiles them (a policy's return functions, a vector
buffer's index functions, a prioritised buffer's segment tree), with NUMBA_CACHE_DIR set to a fresh folder so
that the first has nothing to load: the first compiles and saves every function, the second loads every one.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

BUILD = """
import json
from tianshou_worker.runtime import cache_numba_functions
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


def _build(python: Path, cache: Path) -> dict[str, dict]:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    proc = subprocess.run([str(python), "-c", BUILD], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


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


def test_every_tianshou_module_with_numba_functions_is_listed(tianshou_env):
    """A Tianshou that jits in another module would compile it per process again: NUMBA_MODULES must name it."""
    python = tianshou_env / "bin" / "python"
    listed = subprocess.run([str(python), "-c", "import json; from tianshou_worker.runtime import NUMBA_MODULES; "
                             "print(json.dumps(NUMBA_MODULES))"], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0, listed.stderr[-2000:]
    (package,) = (tianshou_env / "lib").glob("python3.*/site-packages/tianshou")
    jitting = sorted(".".join(path.relative_to(package.parent).with_suffix("").parts)
                     for path in package.rglob("*.py") if re.search(r"^\s*@(numba\.)?n?jit\b", path.read_text(
                         encoding="utf-8"), flags=re.M))
    assert jitting == sorted(json.loads(listed.stdout)), "every Tianshou module that jits must be in NUMBA_MODULES"
