"""A copy of the numpy-1 test worker with its own MOSAIC_HOME, for per-worker environment tests."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cli_support import REPO, run_cli
from mosaic.host import environments as worker_envs

FIXTURE = REPO / "tests" / "fixtures" / "numpy1_worker"
WORKER = "numpy1"
PINNED = "1.26.4"
BUILD_TIMEOUT_S = 900  # a cold uv cache on a busy machine; warm builds take seconds


@dataclass
class Lab:
    """A copy of the test worker, a MOSAIC_HOME, and the CLI pointed at both."""

    home: Path
    workers: Path

    @property
    def tree(self) -> Path:
        return self.workers / "numpy1_worker"

    @property
    def env(self) -> Path:
        return self.home / "envs" / WORKER

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return run_cli("envs", *args, home=self.home, timeout=BUILD_TIMEOUT_S,
                       env={"MOSAIC_WORKER_PATH": str(self.workers)})

    def set_pins(self, toml_value: str) -> None:
        path = self.tree / "pyproject.toml"
        text, count = re.subn(r"(?m)^requirements = .*$", f"requirements = {toml_value}", path.read_text())
        assert count == 1
        path.write_text(text)

    def record(self) -> dict:
        return json.loads((self.env / worker_envs.RECORD_NAME).read_text())

    def listed(self) -> dict[str, dict]:
        proc = self.cli("list", "--json")
        assert proc.returncode == 0, proc.stderr
        return {row["worker"]: row for row in json.loads(proc.stdout)["envs"]}

    def env_numpy(self) -> str:
        proc = subprocess.run([str(worker_envs.python_in(self.env)), "-c", "import numpy; print(numpy.__version__)"],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()


def make_lab(root: Path) -> Lab:
    lab = Lab(root / "home", root / "workers")
    shutil.copytree(FIXTURE, lab.tree, ignore=shutil.ignore_patterns("*.egg-info", "build", "__pycache__"))
    return lab


def build_ok(lab: Lab, *extra: str) -> subprocess.CompletedProcess:
    proc = lab.cli("build", WORKER, *extra)
    assert proc.returncode == 0, proc.stderr
    return proc


def assert_one_line_error(proc: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    assert proc.returncode == code, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("mosaic: error: ")]
    assert len(errors) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in errors[0]
    return errors[0]
