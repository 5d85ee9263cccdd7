"""Fixtures for the Tianshou worker's tests (``mosaic.testing.worker_fixtures``): its real environment, a
MOSAIC_HOME per test, one per module for tests that share runs.

The worker runs in an environment of its own (Tianshou 2.0.1, CPU torch), which
``scripts/bootstrap`` builds into the checkout's ``var/envs/tianshou``.
"""

from __future__ import annotations

from ts_support import REPO, Home
from mosaic.testing import worker_fixtures

tianshou_env, home, module_home = worker_fixtures("tianshou", REPO, Home)
