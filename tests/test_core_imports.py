"""The core must import (and its CLI start) without any RL or GUI library."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
for banned in ("ray", "torch", "grpc", "PySide6", "PyQt6", "pettingzoo", "numpy", "gymnasium"):
    sys.modules[banned] = None  # any import of it now fails
import mosaic, mosaic.cli, mosaic.discovery, mosaic.telemetry, mosaic.telemetry_schema
import mosaic.runs, mosaic.recorder, mosaic.launcher, mosaic.worker_cli, mosaic.envs, mosaic.testing
print("ok")
"""


def test_core_imports_without_heavy_dependencies():
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
