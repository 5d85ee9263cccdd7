"""Start and stop the daemon: token, lock, registry, gRPC server, signals.

``mosaic daemon`` calls :func:`run_daemon`. SIGTERM or SIGINT shut down
gracefully: running workers get SIGTERM, checkpoint and exit (SIGKILL after
the cancel grace period); queued runs stay queued for the next daemon.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import sys
import time
from typing import Callable

import grpc

from mosaic import __version__
from mosaic.host.daemon.auth import TokenInterceptor, resolve_token
from mosaic.host.daemon.catalog import WorkerCatalog
from mosaic.host.daemon.endpoint import DaemonLock, Endpoint, format_address, write_endpoint_file
from mosaic.host.daemon.proto import mosaic_daemon_pb2_grpc as pb_grpc
from mosaic.host.daemon.registry import Registry
from mosaic.host.daemon.service import DaemonService
from mosaic.host.daemon.settings import DaemonSettings
from mosaic.host.daemon.supervisor import Supervisor
from mosaic.host.daemon.wire import GRPC_OPTIONS
from mosaic.errors import UserError

log = logging.getLogger("mosaic.host.daemon")


def _check_bindable(host: str, port: int) -> None:
    """Fail with one clear line (before gRPC logs its own) if we cannot listen there."""
    address = format_address(host, port)
    try:
        infos = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UserError(f"--host: cannot resolve {host!r}: {exc}") from None
    family, _, _, _, sockaddr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(sockaddr)
        except OSError as exc:
            raise UserError(f"--port: cannot listen on {address}: {exc.strerror or exc}") from None


def _setup_logging(settings: DaemonSettings) -> None:
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    logger = logging.getLogger("mosaic.host.daemon")
    logger.setLevel(logging.INFO)
    for handler in (logging.StreamHandler(sys.stderr), logging.FileHandler(settings.log_path)):
        handler.setFormatter(fmt)
        logger.addHandler(handler)


async def serve(settings: DaemonSettings, on_ready: Callable[[Endpoint], None] | None = None) -> None:
    """Run until SIGTERM/SIGINT; raises :class:`UserError` if it cannot start."""
    token = resolve_token(settings.host, settings.token_path, settings.require_token)
    lock = DaemonLock(settings.lock_path)
    lock.acquire(settings.endpoint_path)
    try:
        settings.endpoint_path.unlink(missing_ok=True)  # an old daemon's, never valid now
        registry = Registry(settings.registry_path)
        catalog = WorkerCatalog(pythons=dict(settings.pythons))
        await asyncio.to_thread(catalog.refresh)
        supervisor = Supervisor(settings, registry, catalog)
        server = grpc.aio.server(interceptors=[TokenInterceptor(token)] if token else [],
                                 options=GRPC_OPTIONS)
        _check_bindable(settings.host, settings.port)
        try:
            port = server.add_insecure_port(format_address(settings.host, settings.port))
        except RuntimeError:
            port = 0
        if not port:
            raise UserError(f"--port: cannot listen on {format_address(settings.host, settings.port)} "
                            "(in use, or not an address of this machine)")
        endpoint = Endpoint(settings.host, port, os.getpid(), token is not None,
                            str(settings.home.resolve()))
        service = DaemonService(supervisor, catalog, endpoint.address, token is not None)
        pb_grpc.add_TrainerDaemonServicer_to_server(service, server)
        await supervisor.start()
        await server.start()
        write_endpoint_file(settings.endpoint_path, endpoint, version=__version__,
                            started_at=time.time())
        source = "MOSAIC_TOKEN" if "MOSAIC_TOKEN" in os.environ else str(settings.token_path)
        log.info("serving on %s (MOSAIC_HOME=%s, token %s, %d worker(s))", endpoint.address,
                 endpoint.home, f"required: {source}" if token else "not required",
                 len(catalog.discovery.workers))
        for broken in catalog.discovery.broken:  # once serving: a daemon that cannot start says only why
            log.warning("worker %s is broken: %s", broken.name, broken.reason)
        if on_ready:
            on_ready(endpoint)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("shutting down: stopping %d running worker(s)", len(supervisor.active))
        for sig in (signal.SIGTERM, signal.SIGINT):  # a second signal: default, die now
            loop.remove_signal_handler(sig)
        await supervisor.shutdown()
        await server.stop(grace=1.0)
        registry.close()
        settings.endpoint_path.unlink(missing_ok=True)
        log.info("stopped")
    finally:
        lock.release()


def run_daemon(settings: DaemonSettings) -> int:
    _setup_logging(settings)
    asyncio.run(serve(settings))
    return 0
