"""The testing kit for worker authors and MOSAIC's own tests.

- :mod:`~mosaic.testing.conformance`: ``check_worker`` runs a worker as ``mosaic run`` would and checks the contract.
- :mod:`~mosaic.testing.worker_homes`: workers with environments of their own, built once per test session.
- :mod:`~mosaic.testing.daemon`: a real daemon on a free port.
- :mod:`~mosaic.testing.waiting`: waiting on conditions, never on fixed sleeps.
- :mod:`~mosaic.testing.stub_llm_server`: a local server speaking an LLM endpoint's protocol.
- :mod:`~mosaic.testing.tiny_model`: a tiny local language model directory.
"""

from __future__ import annotations

from mosaic.testing.conformance import ConformanceError, ConformanceReport, check_event_stream, check_shared_flags, check_worker, fastlane_leaks  # noqa: F401
from mosaic.testing.worker_homes import WorkerHome, run_events, worker_env_for_tests, worker_fixtures  # noqa: F401
from mosaic.testing.daemon import LocalDaemon, run_under_daemon, start_daemon  # noqa: F401
from mosaic.testing.waiting import check_live_evaluation, check_pause_resume, wait_until  # noqa: F401
