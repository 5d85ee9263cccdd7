"""The repository's ``tests/conftest.py`` helpers, importable from this folder."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("_mosaic_tests_conftest", Path(__file__).parents[1] / "conftest.py")
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)
run_cli = _module.run_cli
