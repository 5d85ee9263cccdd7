"""The trainer daemon: a gRPC service that queues, starts and supervises worker
processes, proxies their telemetry to subscribers and keeps the run registry.

Optional: it needs the ``daemon`` extra (``pip install 'mosaic-marl[daemon]'``).
Nothing in the core imports this package; ``mosaic.clients.cli`` imports it lazily.

Modules, one job each:

* :mod:`~mosaic.host.daemon.states` — run states and the legal transitions;
* :mod:`~mosaic.host.daemon.registry` — the SQLite (WAL) run registry;
* :mod:`~mosaic.host.daemon.hub` — fan-out of one run's live telemetry;
* :mod:`~mosaic.host.daemon.process` — one worker process group, spawned or re-attached;
* :mod:`~mosaic.host.daemon.supervisor` — queue, concurrency limit, watchdog, recovery;
* :mod:`~mosaic.host.daemon.service` — the grpc.aio servicer;
* :mod:`~mosaic.host.daemon.auth` — token rules and the checking interceptor;
* :mod:`~mosaic.host.daemon.server` — startup, lock file, signals;
* :mod:`~mosaic.host.daemon.wire` — gRPC options and metadata keys the server and its clients share;
* :mod:`~mosaic.host.daemon.client` — the blocking client the CLI uses (it loads neither server nor servicer).
"""

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 50055
