"""Fixtures for the Ray worker's tests.

Tests start local Ray clusters with token auth off (``RAY_AUTH_MODE=disabled``):
they are private to this machine and must not write a token into the home
folder. Real clusters keep Ray's default (token auth on). One Ray session is
shared per test module (``ray_session``); in-process training joins it.

The test process itself runs torch the way the worker's processes do
(``resources.threads`` = 1, evaluation 1): modules, actors and
evaluators built in-process would otherwise crawl on a busy machine.
"""

from __future__ import annotations

import os

import pytest

from mosaic.workerkit.threads import limit_torch_threads

os.environ.setdefault("RAY_AUTH_MODE", "disabled")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
limit_torch_threads(1)


@pytest.fixture(scope="module")
def ray_session():
    import ray

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
