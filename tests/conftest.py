"""Shared fixtures: an isolated MOSAIC_HOME. Helpers live in cli_support.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli_support import EXAMPLES, REPO, run_cli, write_config  # noqa: F401  (re-exported)


@pytest.fixture(scope="session")
def documents() -> dict[str, dict]:
    """Every installed worker's describe document, from its real `--describe` in its own interpreter."""
    import json
    import subprocess

    from mosaic.host.discovery import discover_workers
    from mosaic.host.launcher import worker_command

    out = {}
    for worker in discover_workers().workers:
        proc = subprocess.run([*worker_command(worker), "--describe"], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, (worker.name, proc.stderr[-2000:])
        out[worker.name] = json.loads(proc.stdout)
    return out


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("MOSAIC_HOME", str(path))
    return path
