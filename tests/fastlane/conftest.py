"""FastLane tests: real shared memory, so every test must leave ``/dev/shm`` as it found it."""

from __future__ import annotations

import os

import pytest

from mosaic.fastlane.shm import SHM_DIR, list_segments, list_temp_files


def _ours() -> set[str]:
    return set(list_segments()) | set(list_temp_files())


@pytest.fixture(scope="session", autouse=True)
def no_leaked_segments():
    """Fail the session if FastLane tests leave segments behind (and clean them up)."""
    before = _ours()
    yield
    leaked = sorted(_ours() - before)
    for name in leaked:
        try:
            os.unlink(SHM_DIR / name)
        except OSError:
            pass
    assert not leaked, f"FastLane tests leaked shared-memory segments: {leaked}"
