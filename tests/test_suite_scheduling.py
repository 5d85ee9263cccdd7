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


def test_groups_go_longest_first_and_stay_together():
    import importlib.util

    spec = importlib.util.spec_from_file_location("root_conftest", REPO / "conftest.py")
    root = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(root)
    groups = ["a", "a", "b", "c", "c", "d"]
    seconds = [1.0, 1.0, 30.0, 1.0, 1.0, 1.0]
    # b (30 s) first; then a and c (2 s each) in order of first appearance, each whole; d (1 s) last
    assert root.longest_first(groups, seconds) == [2, 0, 1, 3, 4, 5]
    assert root.longest_first([], []) == []


def test_the_collection_puts_a_measured_long_test_first(tmp_path):
    """The real conftest reads tests/durations.json beside it: a long test of a split file, collected last,
    is run first; a module's tests stay together."""
    shutil.copy(REPO / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    xdist_group: one process\n")
    (tmp_path / "test_module.py").write_text(MODULE)
    split = tmp_path / "workers" / "xuance_worker" / "tests" / "test_xc_training.py"
    split.parent.mkdir(parents=True)
    split.write_text(SPLIT)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "durations.json").write_text(
        '{"workers/xuance_worker/tests/test_xc_training.py::test_long[1]": 100.0}')
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           "-c", str(tmp_path / "pytest.ini"), str(tmp_path)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ids = [line for line in proc.stdout.splitlines() if "::" in line]
    assert ids[0] == "workers/xuance_worker/tests/test_xc_training.py::test_long[1]", ids
    # the module (6 tests of 1 s) next, whole, then the split file's other (unmeasured) test
    assert ids[1:7] == [f"test_module.py::test_uses_it[{k}]" for k in range(6)], ids
    assert ids[7] == "workers/xuance_worker/tests/test_xc_training.py::test_long[0]", ids


def test_the_durations_script_adds_up_a_tests_phases(tmp_path):
    log = tmp_path / "suite.log"
    log.write_text("== slowest durations ==\n"
                   "12.50s call     tests/test_a.py::test_x[1]@tests/test_a.py\n"
                   "3.00s setup    tests/test_a.py::test_x[1]@tests/test_a.py\n"
                   "1.20s call     tests/test_b.py::test_y\n"
                   "(3 durations < 0.005s hidden.)\n")
    out = tmp_path / "durations.json"
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "suite_durations.py"), str(log), "--out", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    import json

    assert json.loads(out.read_text()) == {"tests/test_a.py::test_x[1]": 15.5}  # test_y: under 2 s, left out
    log.write_text("no report here\n")
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "suite_durations.py"), str(log), "--out", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "holds no --durations report" in proc.stderr
