"""FastLane tests: real shared memory, so every test must leave ``/dev/shm`` as it found it."""

from __future__ import annotations

import os

import pytest

from mosaic.fastlane.shm import SHM_DIR, list_segments, list_temp_files
from mosaic.testing import fastlane_leaks


@pytest.fixture(scope="session", autouse=True)
def no_leaked_segments(tmp_path_factory):
    """Fail the session if FastLane tests leave segments behind (and clean them up).

    Only what these tests made counts: live streams of other MOSAIC runs on the
    machine are neither blamed nor removed (mosaic.testing.fastlane_leaks).
    """
    before, temp_before = set(list_segments()), set(list_temp_files())
    yield
    leaked = fastlane_leaks(before, tmp_path_factory.getbasetemp()) + sorted(set(list_temp_files()) - temp_before)
    for name in leaked:
        try:
            os.unlink(SHM_DIR / name)
        except OSError:
            pass
    assert not leaked, f"FastLane tests leaked shared-memory segments: {leaked}"
