"""How the test suite shares a machine with itself.

``bash scripts/test`` runs the suite on two pytest processes (pytest-xdist,
``--dist loadgroup``). Every test file is kept whole on one process, so its
module- and session-scoped fixtures (a Ray session, trained checkpoints, a
daemon) are built once. The few files of long, independent tests are split
test by test, so neither process is left with all of them at the end. The
files of a folder that reads machine-wide state (FastLane's tests look at every
segment in ``/dev/shm`` and collect the garbage of any run) form one group and
run one after another.

The groups hold only if this hook marks the tests before pytest-xdist reads the
marks (``tryfirst``), and only under pytest 8 (pinned: pytest 9 ignores the
group tag pytest-xdist 3.8 adds). ``tests/test_suite_scheduling.py`` checks both.
"""

from __future__ import annotations

import pytest

#: Folders whose files run one after another, on one process.
SERIAL_FOLDERS = {"tests/fastlane/": "fastlane"}
#: Files of long, independent tests (no module-scoped fixtures): each test may go to either process.
SPLIT_FILES = {"workers/xuance_worker/tests/test_xc_training.py", "workers/cleanrl_worker/tests/test_crl_training.py",
               "workers/balrog_worker/tests/test_bl_evaluation.py", "workers/tianshou_worker/tests/test_ts_config.py",
               "workers/llm_worker/tests/test_llm_worker.py"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own, which tags each test id with its group
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        path = item.nodeid.split("::")[0]
        group = next((g for folder, g in SERIAL_FOLDERS.items() if path.startswith(folder)),
                     item.nodeid if path in SPLIT_FILES else path)
        item.add_marker(pytest.mark.xdist_group(group))
