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
from mosaic import worker_envs


@pytest.fixture(scope="session")
def cleanrl_env(tmp_path_factory) -> Path:
    """An up-to-date cleanrl environment folder (the checkout's, or one built for the tests)."""
    source = worker_envs.scan().get("cleanrl")
    checkout_home = REPO / "var"
    if worker_envs.status(source, checkout_home).status == "ok":
        return worker_envs.envs_root(checkout_home) / "cleanrl"
    home = tmp_path_factory.mktemp("cleanrl-env-home")
    return worker_envs.build("cleanrl", home=home).path


@pytest.fixture
def home(tmp_path, cleanrl_env, monkeypatch) -> Home:
    """A MOSAIC_HOME whose envs/cleanrl is the built environment; in-process calls see it too."""
    root = tmp_path / "home"
    (root / "envs").mkdir(parents=True)
    (root / "envs" / "cleanrl").symlink_to(cleanrl_env, target_is_directory=True)
    monkeypatch.setenv("MOSAIC_HOME", str(root))
    return Home(root, cleanrl_env)
