"""FastLane: live rendered frames from running workers, through POSIX shared memory.

A worker publishes its env's ``rgb_array`` frames into a ring in ``/dev/shm``
(one stream per env runner); viewers attach by name and copy the newest
frame without ever blocking the writer. See ``docs/fastlane.md``.

Importing this package is cheap and needs no numpy: the modules that do
(:mod:`.ring`, :mod:`.publisher`, :mod:`.viewer`, ...) are imported on first
use, so ``import mosaic`` and its CLI stay light.
"""

from __future__ import annotations

import importlib
from typing import Any

from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget

_LAZY = {
    "Geometry": "mosaic.fastlane.ring",
    "Frame": "mosaic.fastlane.ring",
    "RingWriter": "mosaic.fastlane.ring",
    "RingReader": "mosaic.fastlane.ring",
    "StreamFollower": "mosaic.fastlane.follow",
    "Publisher": "mosaic.fastlane.publisher",
    "finish_run": "mosaic.fastlane.publisher",
    "discover": "mosaic.fastlane.registry",
    "collect_garbage": "mosaic.fastlane.gc",
}

__all__ = ["FastLaneConfig", "FastLaneTarget", *_LAZY]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mosaic.fastlane' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
