"""Fixtures for the XuanCe worker's tests: its real environment, a MOSAIC_HOME per test.

XuanCe needs numpy<2, so the worker runs in an environment of its own, which
``scripts/bootstrap`` builds into the checkout's ``var/envs/xuance``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from xc_support import REPO, Home
from mosaic.testing import worker_env_for_tests


@pytest.fixture(scope="session")
def xuance_env(tmp_path_factory) -> Path:
    return worker_env_for_tests("xuance", REPO, lambda: tmp_path_factory.mktemp("xuance-env-home"))


@pytest.fixture
def home(tmp_path, xuance_env, monkeypatch) -> Home:
    home = Home.create(tmp_path / "home", "xuance", xuance_env)
    monkeypatch.setenv("MOSAIC_HOME", str(home.root))
    return home
