"""An asyncio client for the daemon (``grpc.aio``): the GUI's, on Qt's event loop through qasync.

The same calls as the blocking :class:`~mosaic.host.daemon.client.DaemonClient`,
with the same error translation; the two streams (run state changes, a run's
telemetry) are async iterators. :func:`ensure_daemon` finds the daemon serving
a ``MOSAIC_HOME`` or starts one in the background.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, AsyncIterator

import grpc

from mosaic.host.daemon.auth import call_metadata, client_token
from mosaic.host.daemon.client import DaemonError, translate_error
from mosaic.host.daemon.endpoint import Endpoint, find_daemon
from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb
from mosaic.host.daemon.proto import mosaic_daemon_pb2_grpc as pb_grpc
from mosaic.host.daemon.wire import GRPC_OPTIONS
from mosaic.host.daemon.settings import state_dir_for

START_TIMEOUT_S = 120.0


class AsyncDaemonClient:
    def __init__(self, address: str, token: str | None = None, timeout_s: float = 30.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._metadata = call_metadata(token)
        self._channel = grpc.aio.insecure_channel(address, options=GRPC_OPTIONS)
        self.stub = pb_grpc.TrainerDaemonStub(self._channel)

    @classmethod
    def for_endpoint(cls, endpoint: Endpoint, home: Path, **kwargs: Any) -> "AsyncDaemonClient":
        token = client_token(state_dir_for(home) / "token") if endpoint.token_required else None
        return cls(endpoint.address, token, **kwargs)

    async def close(self) -> None:
        await self._channel.close()

    async def _call(self, name: str, request: Any, timeout: float | None = None) -> Any:
        try:
            return await getattr(self.stub, name)(request, timeout=timeout or self.timeout_s,
                                                  metadata=self._metadata)
        except grpc.RpcError as exc:
            raise translate_error(exc, self.address) from None

    # -- calls ----------------------------------------------------------------------
    async def health(self) -> pb.Health:
        return await self._call("GetHealth", pb.GetHealthRequest())

    async def workers(self, refresh: bool = False) -> pb.ListWorkersReply:
        return await self._call("ListWorkers", pb.ListWorkersRequest(refresh=refresh), timeout=120)

    async def describe_worker(self, name: str, refresh: bool = False) -> dict[str, Any]:
        reply = await self._call("DescribeWorker", pb.DescribeWorkerRequest(name=name, refresh=refresh),
                                 timeout=300)
        return json.loads(reply.describe_json)

    async def validate_config(self, config: dict[str, Any]) -> tuple[bool, dict[str, Any] | None, str]:
        reply = await self._call("ValidateConfig", pb.ValidateConfigRequest(config_json=json.dumps(config)),
                                 timeout=300)
        return reply.ok, (json.loads(reply.normalized_config_json) if reply.ok else None), reply.error

    async def submit(self, config: dict[str, Any], run_id: str = "") -> pb.RunInfo:
        return await self._call("SubmitRun", pb.SubmitRunRequest(config_json=json.dumps(config), run_id=run_id),
                                timeout=max(self.timeout_s, 180))

    async def control(self, verb: str, run: str, wait_s: float = 10.0) -> pb.RunInfo:
        """``verb`` is pause, resume or cancel."""
        name = {"pause": "PauseRun", "resume": "ResumeRun", "cancel": "CancelRun"}[verb]
        return await self._call(name, pb.RunControlRequest(run=run, wait_s=wait_s), timeout=self.timeout_s + wait_s)

    async def get(self, run: str) -> pb.RunInfo:
        return await self._call("GetRun", pb.GetRunRequest(run=run))

    async def list(self) -> list[pb.RunInfo]:
        return list((await self._call("ListRuns", pb.ListRunsRequest())).runs)

    # -- streams --------------------------------------------------------------------
    async def watch(self, include_current: bool = True) -> AsyncIterator[pb.RunStateChange]:
        """Run state changes: each run's current state first (``include_current``), then every change."""
        call = self.stub.WatchRuns(pb.WatchRunsRequest(include_current=include_current), metadata=self._metadata)
        async for change in self._stream(call):
            yield change

    async def telemetry(self, run: str, from_seq: int = 0, follow: bool = True) -> AsyncIterator[pb.TelemetryBatch]:
        """Batches of a run's events: the stored history first, then live ones until the run ends."""
        call = self.stub.StreamTelemetry(pb.StreamTelemetryRequest(run=run, from_seq=from_seq, follow=follow),
                                         metadata=self._metadata)
        async for batch in self._stream(call):
            yield batch

    async def _stream(self, call: Any) -> AsyncIterator[Any]:
        try:
            async for message in call:
                yield message
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise translate_error(exc, self.address) from None
        finally:
            call.cancel()


async def ensure_daemon(home: Path, log: Path | None = None,
                        timeout_s: float = START_TIMEOUT_S) -> tuple[Endpoint, subprocess.Popen | None]:
    """The daemon serving ``home``; one is started in the background (and returned) when none does.

    A started daemon outlives the caller, as one started with ``mosaic daemon``
    would; its output goes to ``log`` (default ``<home>/daemon-gui.log``).
    """
    endpoint = find_daemon(home)
    if endpoint is not None:
        return endpoint, None
    home.mkdir(parents=True, exist_ok=True)
    log = log or home / "daemon-gui.log"
    with log.open("ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "mosaic", "daemon", "--port", "0"],
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, "MOSAIC_HOME": str(home)}, start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while True:
        endpoint = find_daemon(home)
        if endpoint is not None:
            return endpoint, proc
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-1:] if log.exists() else []
            raise DaemonError(f"the daemon for {home} exited with code {proc.returncode}: "
                              f"{tail[0] if tail else 'no output'} (log: {log})")
        if time.monotonic() > deadline:
            raise DaemonError(f"the daemon for {home} did not start within {timeout_s:g} s (log: {log})")
        await asyncio.sleep(0.1)
