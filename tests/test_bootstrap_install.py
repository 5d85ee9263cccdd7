"""How scripts/bootstrap installs MOSAIC's own environment: uv, from the package sources pip is configured with,
after a dry run that checks torch's build (mosaic/host/environments/uv.py, ``install_into``).

Real uv into a real new venv. The refusals must come before anything is downloaded or installed: the venv's
packages are the same after them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CONSTRAINTS = REPO / "requirements" / "constraints.txt"
TORCH_PIN = "torch==2.13.0"
SMALL_PIN = "cycler"  # pinned in requirements/constraints.txt; one small wheel, no dependencies


def _online() -> None:
    if os.environ.get("MOSAIC_OFFLINE") == "1":
        pytest.skip("resolving needs the package index pip is configured with (PyPI); MOSAIC_OFFLINE=1 is set")


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """A new venv with pip (for ``pip config list``) and nothing else: the python the install goes into."""
    folder = tmp_path_factory.mktemp("fresh") / "venv"
    venv.create(folder, with_pip=True)
    return folder / "bin" / "python"


def install(python: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The command scripts/bootstrap runs for each install step, with MOSAIC's source on the path (uv from ours)."""
    code = ("import sys; from mosaic.host.environments.uv import main; "
            "sys.exit(main(['install', *sys.argv[1:]]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), *sys.path[1:]])}
    return subprocess.run([str(python), "-c", code, *args], capture_output=True, text=True, timeout=600, env=env,
                          cwd=REPO)


def packages(python: Path) -> list[str]:
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
                            capture_output=True, text=True, timeout=120, check=True)
    return sorted(listed.stdout.split())


def test_the_bootstrap_installs_with_uv_from_pips_sources(fresh):
    _online()
    before = packages(fresh)
    proc = install(fresh, "--variant", "cpu", "-c", str(CONSTRAINTS), SMALL_PIN)
    assert proc.returncode == 0, proc.stderr
    pinned = [line.strip() for line in CONSTRAINTS.read_text().splitlines() if line.lower().startswith("cycler==")]
    assert sorted([*before, *pinned]) == packages(fresh)  # the constrained version, nothing else


def test_a_cuda_torch_is_refused_for_the_cpu_variant_before_anything_is_installed(fresh, tmp_path):
    _online()
    not_cpu = tmp_path / "not-cpu.txt"
    not_cpu.write_text("torch!=2.13.0+cpu\n")  # PyPI's plain wheel is then the only 2.13.0: a CUDA build
    before = packages(fresh)
    proc = install(fresh, "--variant", "cpu", "-c", str(CONSTRAINTS), "-c", str(not_cpu), TORCH_PIN)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "bootstrap: error: MOSAIC_TORCH_VARIANT: cpu: torch would resolve to 2.13.0, not a +cpu build; allowed: "
        "package sources that offer a +cpu build of the pinned torch (pip config list)"]
    assert packages(fresh) == before


def test_a_cpu_torch_is_refused_for_the_cuda_variant_and_a_bad_variant_by_name(fresh):
    _online()
    before = packages(fresh)
    proc = install(fresh, "--variant", "cuda", "-c", str(CONSTRAINTS), TORCH_PIN)
    assert proc.returncode == 2, proc.stderr
    assert "cuda: torch would resolve to 2.13.0+cpu, not a CUDA build (not +cpu)" in proc.stderr
    proc = install(fresh, "--variant", "rocm", SMALL_PIN)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "bootstrap: error: --variant: 'rocm' is not one of cpu, cuda"
    assert packages(fresh) == before


def test_mosaics_own_environment_holds_the_bytecode_of_what_its_processes_import():
    """uv writes no .pyc files (pip did): without them every process of .venv (the CLI, the Ray worker and Ray's
    actors, this test process) compiles torch and Ray anew, where PYTHONDONTWRITEBYTECODE is set each time
    (`import torch`: 2.4 s instead of 1.2). scripts/bootstrap compiles .venv after installing: every module of
    torch and Ray has its bytecode, up to date."""
    import importlib.util

    for package in ("torch", "ray", "numpy"):
        folder = Path(importlib.util.find_spec(package).submodule_search_locations[0])
        sources = list(folder.rglob("*.py"))
        missing = [s for s in sources
                   if not Path(importlib.util.cache_from_source(str(s))).is_file()
                   or Path(importlib.util.cache_from_source(str(s))).stat().st_mtime < s.stat().st_mtime]
        # a file of a package's own Python 2 leftovers or test data may not compile, as pip skips it
        assert len(missing) <= len(sources) // 100, (package, len(missing), len(sources), missing[:5])
