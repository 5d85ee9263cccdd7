"""Fixtures for the CleanRL worker's tests: its real environment, a MOSAIC_HOME per module.

The worker only runs in its own environment (numpy 1, gym 0.23.1, gymnasium
0.29.1 beside MOSAIC's numpy 2). ``scripts/bootstrap`` builds it into the
checkout's ``var/envs/cleanrl``; a test home links to that one when it is up
to date and builds its own otherwise (uv's cache makes that a matter of
seconds once the packages were downloaded).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crl_support import REPO, Home
from mosaic.testing import worker_env_for_tests


@pytest.fixture(scope="session")
def cleanrl_env(tmp_path_factory) -> Path:
    """An up-to-date cleanrl environment folder (the checkout's, or one built for the tests)."""
    return worker_env_for_tests("cleanrl", REPO, lambda: tmp_path_factory.mktemp("cleanrl-env-home"))


@pytest.fixture
def home(tmp_path, cleanrl_env, monkeypatch) -> Home:
    """A MOSAIC_HOME whose envs/cleanrl is the built environment; in-process calls see it too."""
    home = Home.create(tmp_path / "home", "cleanrl", cleanrl_env)
    monkeypatch.setenv("MOSAIC_HOME", str(home.root))
    return home
