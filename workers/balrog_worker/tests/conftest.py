"""Fixtures for the balrog worker's tests: its real environment, a MOSAIC_HOME per test, the API key variable.

minigrid needs pygame-ce, which cannot share MOSAIC's environment with pygame:
``scripts/bootstrap`` builds the worker's own into the checkout's ``var/envs/balrog``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bl_support import KEY_ENV, REPO, Home
from mosaic.testing import worker_env_for_tests


@pytest.fixture(scope="session")
def balrog_env(tmp_path_factory) -> Path:
    return worker_env_for_tests("balrog", REPO, lambda: tmp_path_factory.mktemp("balrog-env-home"))


@pytest.fixture
def home(tmp_path, balrog_env, monkeypatch) -> Home:
    home = Home.create(tmp_path / "home", "balrog", balrog_env)
    monkeypatch.setenv("MOSAIC_HOME", str(home.root))
    monkeypatch.setenv(KEY_ENV, "local-test-key")
    return home
