"""How the test suite shares a machine with itself.

``bash scripts/test`` runs the suite on two pytest processes (pytest-xdist,
``--dist loadgroup``). Every test file is kept whole on one process, so its
module- and session-scoped fixtures (a Ray session, trained checkpoints, a
daemon) are built once. The few files of long, independent tests are split
test by test, so neither process is left with all of them at the end. The
files of a folder that reads machine-wide state (FastLane's tests look at every
segment in ``/dev/shm`` and collect the garbage of any run) form one group and
run one after another.

Groups are handed out longest first, by the seconds each test took in a
measured run of the suite (``tests/durations.json``; a test not in it counts
one second): the last groups to start are short ones, so neither process idles
long while the other finishes a long test. (pytest-xdist's own order, by the
number of tests in a group, put the long single tests of the split files last.)
``python scripts/suite_durations.py LOG`` records the table again from a run's
``--durations=0`` output.

The groups hold only if this hook marks the tests before pytest-xdist reads the
marks (``tryfirst``), and only under pytest 8 (pinned: pytest 9 ignores the
group tag pytest-xdist 3.8 adds). ``tests/test_suite_scheduling.py`` checks both.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

#: Folders whose files run one after another, on one process.
SERIAL_FOLDERS = {"tests/fastlane/": "fastlane"}
#: Files of long, independent tests (no module-scoped fixtures): each test may go to either process.
SPLIT_FILES = {"workers/xuance_worker/tests/test_xc_training.py", "workers/cleanrl_worker/tests/test_crl_training.py",
               "workers/balrog_worker/tests/test_bl_evaluation.py", "workers/tianshou_worker/tests/test_ts_config.py",
               "workers/llm_worker/tests/test_llm_worker.py"}
#: Seconds per test id (setup, call and teardown together) from a measured run of the suite.
DURATIONS = Path(__file__).resolve().parent / "tests" / "durations.json"
UNMEASURED_S = 1.0


def longest_first(groups: list[str], seconds: list[float]) -> list[int]:
    """The order to run tests in: ``groups[i]`` and ``seconds[i]`` are test i's group and its measured time.
    Each group's tests stay together and in their order; groups go by their total time, longest first, and
    in order of first appearance among equals."""
    total: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, (group, s) in enumerate(zip(groups, seconds)):
        total[group] = total.get(group, 0.0) + s
        first.setdefault(group, i)
    return sorted(range(len(groups)), key=lambda i: (-total[groups[i]], first[groups[i]], i))


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: keep the order this file gives
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which tags each test id with its group
def pytest_collection_modifyitems(config, items):
    groups = []
    for item in items:
        marker = item.get_closest_marker("xdist_group")
        if marker is None:
            path = item.nodeid.split("::")[0]
            group = next((g for folder, g in SERIAL_FOLDERS.items() if path.startswith(folder)),
                         item.nodeid if path in SPLIT_FILES else path)
            item.add_marker(pytest.mark.xdist_group(group))
        else:
            group = marker.args[0] if marker.args else marker.kwargs.get("name", "default")
        groups.append(group)
    measured = json.loads(DURATIONS.read_text(encoding="utf-8")) if DURATIONS.is_file() else {}
    order = longest_first(groups, [float(measured.get(item.nodeid, UNMEASURED_S)) for item in items])
    items[:] = [items[i] for i in order]
