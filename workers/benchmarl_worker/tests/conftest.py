"""Fixtures for the BenchMARL worker's tests (``mosaic.testing.worker_fixtures``): its real environment, a
MOSAIC_HOME per test, one per module for tests that share runs (each algorithm's tiny run, read by several tests).

The worker runs in an environment of its own (BenchMARL 1.5.2, TorchRL 0.11, CPU torch), which
``scripts/bootstrap`` builds into the checkout's ``var/envs/benchmarl``.
"""

from __future__ import annotations

from bm_support import REPO, Home
from mosaic.testing import worker_fixtures

benchmarl_env, home, module_home = worker_fixtures("benchmarl", REPO, Home)
