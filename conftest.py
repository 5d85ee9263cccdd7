"""How the test suite shares a machine with itself.

``bash scripts/test`` runs the suite on two pytest processes (pytest-xdist,
``--dist loadgroup``). Every test file is kept whole on one process, so its
module- and session-scoped fixtures (a Ray session, trained checkpoints, a
daemon) are built once. The files of a folder that reads machine-wide state
(FastLane's tests look at every segment in ``/dev/shm`` and collect the
garbage of any run) form one group and run one after another.
"""

from __future__ import annotations

import pytest

#: Folders whose files run one after another, on one process.
SERIAL_FOLDERS = {"tests/fastlane/": "fastlane"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        path = item.nodeid.split("::")[0]
        group = next((g for folder, g in SERIAL_FOLDERS.items() if path.startswith(folder)), path)
        item.add_marker(pytest.mark.xdist_group(group))
