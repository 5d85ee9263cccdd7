"""The core must import (and its CLI start) without any RL or GUI library."""

from __future__ import annotations

import subprocess
import sys

CODE = """
import sys
for banned in ("ray", "torch", "grpc", "PySide6", "PyQt6", "pettingzoo", "numpy", "gymnasium"):
    sys.modules[banned] = None  # any import of it now fails
import mosaic, mosaic.clients.cli, mosaic.host.discovery, mosaic.workerkit.telemetry, mosaic.workerkit.telemetry_schema
import mosaic.runs, mosaic.host.recorder, mosaic.host.launcher, mosaic.workerkit.cli, mosaic.workerkit.envs, mosaic.testing
print("ok")
"""


def test_core_imports_without_heavy_dependencies():
    proc = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"
