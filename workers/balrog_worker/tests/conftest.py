"""Fixtures for the balrog worker's tests (``mosaic.testing.worker_fixtures``): its real environment, a
MOSAIC_HOME per test with the API key variable set, one per module for tests that share runs.

minigrid needs pygame-ce, which cannot share MOSAIC's environment with pygame:
``scripts/bootstrap`` builds the worker's own into the checkout's ``var/envs/balrog``.
"""

from __future__ import annotations

from bl_support import KEY_ENV, REPO, Home
from mosaic.testing import worker_fixtures

balrog_env, home, module_home = worker_fixtures("balrog", REPO, Home, environ={KEY_ENV: "local-test-key"})
