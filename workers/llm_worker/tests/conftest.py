"""Fixtures for the mosaic_llm worker's tests: a MOSAIC_HOME per test and the API key variable.

The worker runs in MOSAIC's own environment (it plays Ray checkpoints), so there
is no environment of its own to build.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from llm_support import KEY_ENV  # noqa: E402
from mosaic.testing import WorkerHome  # noqa: E402


class Home(WorkerHome):
    def evaluation(self, name: str, server, **fields) -> Path:
        """A config file for an evaluation against ``server`` (None: the model section says it all)."""
        endpoint = {"base_url": server.base_url, "model": server.model} if server is not None else {}
        model = {**endpoint, "api_key_env": KEY_ENV, "backoff_s": 0.01, **fields.pop("model", {})}
        return self.config(name, model=model, **fields)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Home:
    root = tmp_path / "home"
    root.mkdir()
    monkeypatch.setenv("MOSAIC_HOME", str(root))
    monkeypatch.setenv(KEY_ENV, "local-test-key")
    return Home(root, Path(sys.prefix), "mosaic_llm")
