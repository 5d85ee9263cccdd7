"""Fixtures for the XuanCe worker's tests (``mosaic.testing.worker_fixtures``): its real environment, a
MOSAIC_HOME per test, one per module for tests that share runs.

XuanCe needs numpy<2, so the worker runs in an environment of its own, which
``scripts/bootstrap`` builds into the checkout's ``var/envs/xuance``.
"""

from __future__ import annotations

from xc_support import REPO, Home
from mosaic.testing import worker_fixtures

xuance_env, home, module_home = worker_fixtures("xuance", REPO, Home)
