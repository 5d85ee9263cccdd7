"""Fixtures for the Tianshou worker's tests: its real environment, a MOSAIC_HOME per test.

The worker runs in an environment of its own (Tianshou 2.0.1, CPU torch), which
``scripts/bootstrap`` builds into the checkout's ``var/envs/tianshou``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ts_support import REPO, Home
from mosaic.testing import worker_env_for_tests


@pytest.fixture(scope="session")
def tianshou_env(tmp_path_factory) -> Path:
    return worker_env_for_tests("tianshou", REPO, lambda: tmp_path_factory.mktemp("tianshou-env-home"))


@pytest.fixture
def home(tmp_path, tianshou_env, monkeypatch) -> Home:
    home = Home.create(tmp_path / "home", "tianshou", tianshou_env)
    monkeypatch.setenv("MOSAIC_HOME", str(home.root))
    return home


@pytest.fixture(scope="module")
def module_home(tmp_path_factory, tianshou_env) -> Home:
    """One home for a module's tests that share runs (a trained DQN used by several tests)."""
    return Home.create(tmp_path_factory.mktemp("ts-home") / "home", "tianshou", tianshou_env)
