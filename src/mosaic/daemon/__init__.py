"""The trainer daemon: a gRPC service that queues, starts and supervises worker
processes, proxies their telemetry to subscribers and keeps the run registry.

Optional: it needs the ``daemon`` extra (``pip install 'mosaic-marl[daemon]'``).
Nothing in the core imports this package; ``mosaic.cli`` imports it lazily.

Modules, one job each:

* :mod:`~mosaic.daemon.states` — run states and the legal transitions;
* :mod:`~mosaic.daemon.registry` — the SQLite (WAL) run registry;
* :mod:`~mosaic.daemon.hub` — fan-out of one run's live telemetry;
* :mod:`~mosaic.daemon.process` — one worker process group, spawned or re-attached;
* :mod:`~mosaic.daemon.supervisor` — queue, concurrency limit, watchdog, recovery;
* :mod:`~mosaic.daemon.service` — the grpc.aio servicer;
* :mod:`~mosaic.daemon.auth` — token rules and the checking interceptor;
* :mod:`~mosaic.daemon.server` — startup, lock file, signals;
* :mod:`~mosaic.daemon.client` — the blocking client the CLI uses.
"""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 50055
