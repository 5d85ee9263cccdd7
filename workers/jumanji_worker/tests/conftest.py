"""Fixtures for the Jumanji worker's tests: its real environment, a MOSAIC_HOME per module, one JAX cache.

The worker runs in an environment of its own (Jumanji 1.1.2 on jax 0.6.2), which
``scripts/bootstrap`` builds into the checkout's ``var/envs/jumanji``.
"""

from __future__ import annotations

import os

import pytest

from jm_support import REPO, Home
from mosaic.testing import worker_fixtures

jumanji_env, home, module_home = worker_fixtures("jumanji", REPO, Home)


@pytest.fixture(scope="session", autouse=True)
def jax_compilation_cache(tmp_path_factory):
    """One persistent XLA compilation cache for every process the tests start: each computation is
    compiled once per session (the cache holds compiled code; results are the same either way). Bounded as the
    worker bounds its own, which turns on JAX's file lock: both pytest processes read and write it."""
    base = tmp_path_factory.getbasetemp()
    folder = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "jax-cache"  # xdist: shared
    folder.mkdir(exist_ok=True)
    wanted = {"JAX_COMPILATION_CACHE_DIR": str(folder),
              "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
              "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
              "JAX_COMPILATION_CACHE_MAX_SIZE": str(2 << 30)}
    before = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    yield wanted
    for key, value in before.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
