"""Helpers of the core tests: the repo's paths and the real CLI as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


def run_cli(*args: str, home: Path, timeout: float = 120, env: dict | None = None,
            **kwargs) -> subprocess.CompletedProcess:
    """``python -m mosaic ARGS`` as a real subprocess."""
    full_env = {**os.environ, "MOSAIC_HOME": str(home), **(env or {})}
    return subprocess.run([sys.executable, "-m", "mosaic", *args], capture_output=True, text=True,
                          timeout=timeout, env=full_env, **kwargs)


def write_config(path: Path, data: dict) -> Path:
    path.write_text(json.dumps(data))
    return path
