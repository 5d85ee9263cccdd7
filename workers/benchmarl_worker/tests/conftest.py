"""Fixtures for the BenchMARL worker's tests: its real environment, a MOSAIC_HOME per test.

The worker runs in an environment of its own (BenchMARL 1.5.2, TorchRL 0.11, CPU torch), which
``scripts/bootstrap`` builds into the checkout's ``var/envs/benchmarl``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bm_support import REPO, Home
from mosaic.testing import worker_env_for_tests


@pytest.fixture(scope="session")
def benchmarl_env(tmp_path_factory) -> Path:
    return worker_env_for_tests("benchmarl", REPO, lambda: tmp_path_factory.mktemp("benchmarl-env-home"))


@pytest.fixture
def home(tmp_path, benchmarl_env, monkeypatch) -> Home:
    home = Home.create(tmp_path / "home", "benchmarl", benchmarl_env)
    monkeypatch.setenv("MOSAIC_HOME", str(home.root))
    return home


@pytest.fixture(scope="module")
def module_home(tmp_path_factory, benchmarl_env) -> Home:
    """One home for a module's tests that share runs (each algorithm's tiny run, read by several tests)."""
    return Home.create(tmp_path_factory.mktemp("bm-home") / "home", "benchmarl", benchmarl_env)
