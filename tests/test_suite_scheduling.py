"""The suite's own scheduling: each group of tests stays whole on one pytest process.

``conftest.py`` tags every test with a group (its file, a folder's shared group, or, for
the files of long independent tests, the test itself), and ``--dist loadgroup`` sends a
group to one process, so a module fixture (a trained checkpoint, a Ray session) is built
once. When the tags do not reach pytest-xdist (a hook that runs too late, a pytest that
ignores the tag) every group silently falls apart and each such fixture is built on both
processes. This runs the real conftest in a real ``pytest -n 2`` on a small tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

MODULE = '''
import os, pytest

@pytest.fixture(scope="module")
def built():
    with open(os.environ["SETUPS"], "a") as f:
        f.write("module fixture built\\n")

@pytest.mark.parametrize("case", range(6))
def test_uses_it(built, case):
    pass
'''
GROUPED = '''
import os, pytest
pytestmark = pytest.mark.xdist_group("shared")

@pytest.mark.parametrize("case", range(3))
def test_where(case):
    with open(os.environ["SETUPS"], "a") as f:
        f.write(f"shared on {os.environ['PYTEST_XDIST_WORKER']}\\n")
'''
SPLIT = '''
import pytest

@pytest.mark.parametrize("case", range(2))
def test_long(case):
    pass
'''


def test_groups_stay_whole_on_one_process(tmp_path):
    shutil.copy(REPO / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    xdist_group: one process\n")
    (tmp_path / "test_module.py").write_text(MODULE)
    (tmp_path / "test_grouped_a.py").write_text(GROUPED)
    (tmp_path / "test_grouped_b.py").write_text(GROUPED)
    split = tmp_path / "workers" / "xuance_worker" / "tests" / "test_xc_training.py"  # listed in SPLIT_FILES
    split.parent.mkdir(parents=True)
    split.write_text(SPLIT)
    setups = tmp_path / "setups.txt"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-v",
                           "-p", "no:cacheprovider", "-c", str(tmp_path / "pytest.ini"), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**_env(), "SETUPS": str(setups)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    lines = setups.read_text().splitlines()
    assert lines.count("module fixture built") == 1, (
        "a module's tests must run on one process, so its module fixture is built once; "
        f"it was built {lines.count('module fixture built')} times:\n{proc.stdout[-3000:]}")
    where = {line for line in lines if line.startswith("shared on")}
    assert len(where) == 1, f"two files of one xdist_group must run on one process, ran on {sorted(where)}"
    out = proc.stdout
    assert "test_module.py::test_uses_it[0]@test_module.py" in out, out[-3000:]
    # a file of long independent tests: each test is a group of its own, free to go to either process
    assert ("test_xc_training.py::test_long[1]@workers/xuance_worker/tests/test_xc_training.py::test_long[1]"
            in out), out[-3000:]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
