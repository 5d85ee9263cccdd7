"""Shared fixtures: an isolated MOSAIC_HOME. Helpers live in cli_support.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import EXAMPLES, REPO, run_cli, write_config  # noqa: F401  (re-exported)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("MOSAIC_HOME", str(path))
    return path
