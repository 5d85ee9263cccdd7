"""Fixtures for the Jumanji worker's tests: its real environment, a MOSAIC_HOME per module, one JAX cache.

The worker runs in an environment of its own (Jumanji 1.1.2 on jax 0.6.2), which
``scripts/bootstrap`` builds into the checkout's ``var/envs/jumanji``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jm_support import REPO, Home
from mosaic.testing import worker_env_for_tests


@pytest.fixture(scope="session")
def jumanji_env(tmp_path_factory) -> Path:
    return worker_env_for_tests("jumanji", REPO, lambda: tmp_path_factory.mktemp("jumanji-env-home"))


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


@pytest.fixture
def home(tmp_path, jumanji_env, monkeypatch) -> Home:
    home = Home.create(tmp_path / "home", "jumanji", jumanji_env)
    monkeypatch.setenv("MOSAIC_HOME", str(home.root))
    return home


@pytest.fixture(scope="module")
def module_home(tmp_path_factory, jumanji_env) -> Home:
    """One home for a module's tests that share runs (one trained TSP run read by several tests)."""
    return Home.create(tmp_path_factory.mktemp("jm-home") / "home", "jumanji", jumanji_env)
