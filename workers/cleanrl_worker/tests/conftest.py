"""Fixtures for the CleanRL worker's tests (``mosaic.testing.worker_fixtures``): its real environment, a
MOSAIC_HOME per test, one per module for tests that share runs.

The worker only runs in its own environment (numpy 1, gym 0.23.1, gymnasium
0.29.1 beside MOSAIC's numpy 2). ``scripts/bootstrap`` builds it into the
checkout's ``var/envs/cleanrl``; a test home links to that one when it is up
to date and builds its own otherwise (uv's cache makes that a matter of
seconds once the packages were downloaded).
"""

from __future__ import annotations

from crl_support import REPO, Home
from mosaic.testing import worker_fixtures

cleanrl_env, home, module_home = worker_fixtures("cleanrl", REPO, Home)
