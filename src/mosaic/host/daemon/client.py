"""A blocking client for the daemon, used by the CLI (and handy in notebooks).

It finds the daemon serving a ``MOSAIC_HOME`` through its lock and endpoint
files, sends the token when one is configured, and turns gRPC errors into
:class:`~mosaic.errors.UserError` with one readable line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import grpc

from mosaic.host.daemon.auth import call_metadata, client_token
from mosaic.host.daemon.endpoint import Endpoint, find_daemon
from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb
from mosaic.host.daemon.proto import mosaic_daemon_pb2_grpc as pb_grpc
from mosaic.host.daemon.wire import FIELD_ERRORS_KEY, GRPC_OPTIONS
from mosaic.host.daemon.settings import state_dir_for
from mosaic.errors import UserError


class DaemonError(UserError):
    """A call the daemon refused; ``code`` is the gRPC status, ``field_errors`` any config errors."""

    def __init__(self, message: str, code: grpc.StatusCode | None = None,
                 field_errors: list[dict[str, str]] | None = None) -> None:
        self.code = code
        self.field_errors = field_errors or []
        super().__init__(message)


def translate_error(exc: grpc.RpcError, address: str) -> DaemonError:
    code = exc.code() if hasattr(exc, "code") else None
    details = exc.details() if hasattr(exc, "details") else str(exc)
    fields: list[dict[str, str]] = []
    for key, value in (exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") else ():
        if key == FIELD_ERRORS_KEY:
            try:
                fields = json.loads(value)
            except ValueError:
                pass
    if code == grpc.StatusCode.UNAVAILABLE:
        details = f"cannot reach the daemon at {address}: {details}"
    elif code == grpc.StatusCode.UNAUTHENTICATED:
        details = f"the daemon at {address} refused the call: {details} (set MOSAIC_TOKEN)"
    return DaemonError(details or str(code), code, fields)


class DaemonClient:
    def __init__(self, address: str, token: str | None = None, timeout_s: float = 30.0) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self._metadata = call_metadata(token)
        self._channel = grpc.insecure_channel(address, options=GRPC_OPTIONS)
        self.stub = pb_grpc.TrainerDaemonStub(self._channel)

    @classmethod
    def for_home(cls, home: Path, **kwargs: Any) -> "DaemonClient | None":
        """A client for the daemon serving ``home``, or None if none runs."""
        endpoint = find_daemon(home)
        if endpoint is None:
            return None
        return cls.for_endpoint(endpoint, home, **kwargs)

    @classmethod
    def for_endpoint(cls, endpoint: Endpoint, home: Path, **kwargs: Any) -> "DaemonClient":
        token = client_token(state_dir_for(home) / "token") if endpoint.token_required else None
        return cls(endpoint.address, token, **kwargs)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "DaemonClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, name: str, request: Any, timeout: float | None = None) -> Any:
        try:
            return getattr(self.stub, name)(request, timeout=timeout or self.timeout_s,
                                            metadata=self._metadata)
        except grpc.RpcError as exc:
            raise translate_error(exc, self.address) from None

    # -- calls ------------------------------------------------------------------
    def submit(self, config: dict[str, Any], worker: str = "", run_id: str = "",
               heartbeat_timeout_s: float = 0.0, cpus: float = 0.0) -> pb.RunInfo:
        request = pb.SubmitRunRequest(config_json=json.dumps(config), worker=worker, run_id=run_id,
                                      heartbeat_timeout_s=heartbeat_timeout_s, cpus=cpus)
        return self._call("SubmitRun", request, timeout=max(self.timeout_s, 180))

    def submit_many(self, runs: list[tuple[str, dict[str, Any]]]) -> list[pb.RunInfo | DaemonError]:
        """Queue ``(run_id, config)`` pairs in one call (each worker checks its configs in one process);
        for each, in order, the queued run or the :class:`DaemonError` (INVALID_ARGUMENT, with field
        errors) that kept that run from being created."""
        request = pb.SubmitRunsRequest(runs=[pb.SubmitRunRequest(config_json=json.dumps(config), run_id=run_id)
                                             for run_id, config in runs])
        reply = self._call("SubmitRuns", request, timeout=max(self.timeout_s, 180 + 5 * len(runs)))
        return [r.run if r.HasField("run") else
                DaemonError(r.error, grpc.StatusCode.INVALID_ARGUMENT, json.loads(r.field_errors_json or "[]"))
                for r in reply.results]

    def cancel(self, run: str, reason: str = "", wait_s: float = 0.0) -> pb.RunInfo:
        """Ask the run to stop; with ``wait_s``, wait that long for it to end."""
        return self._call("CancelRun", pb.RunControlRequest(run=run, reason=reason, wait_s=wait_s),
                          timeout=self.timeout_s + wait_s)

    def pause(self, run: str, wait_s: float = 10.0) -> pb.RunInfo:
        return self._call("PauseRun", pb.RunControlRequest(run=run, wait_s=wait_s),
                          timeout=self.timeout_s + wait_s)

    def resume(self, run: str, wait_s: float = 10.0) -> pb.RunInfo:
        return self._call("ResumeRun", pb.RunControlRequest(run=run, wait_s=wait_s),
                          timeout=self.timeout_s + wait_s)

    def get(self, run: str) -> pb.RunInfo:
        return self._call("GetRun", pb.GetRunRequest(run=run))

    def list(self, states: list[str] | None = None, worker: str = "", limit: int = 0) -> list[pb.RunInfo]:
        request = pb.ListRunsRequest(states=[pb.RunState.Value(s) for s in states or []],
                                     worker=worker, limit=limit)
        return list(self._call("ListRuns", request).runs)

    def workers(self, refresh: bool = False) -> pb.ListWorkersReply:
        return self._call("ListWorkers", pb.ListWorkersRequest(refresh=refresh), timeout=120)

    def describe_worker(self, name: str, refresh: bool = False) -> dict[str, Any]:
        """A worker's describe document: config JSON Schema, default config, algo_params schemas, envs."""
        reply = self._call("DescribeWorker", pb.DescribeWorkerRequest(name=name, refresh=refresh), timeout=300)
        return json.loads(reply.describe_json)

    def validate_config(self, config: dict[str, Any]) -> tuple[bool, dict[str, Any] | None, str]:
        """``(ok, the config normalised, error)``, checked as a submit would; creates no run."""
        reply = self._call("ValidateConfig", pb.ValidateConfigRequest(config_json=json.dumps(config)),
                           timeout=300)
        return reply.ok, (json.loads(reply.normalized_config_json) if reply.ok else None), reply.error

    def health(self) -> pb.Health:
        return self._call("GetHealth", pb.GetHealthRequest())

    def watch(self, run_ids: list[str] | None = None,
              include_current: bool = False) -> Iterator[pb.RunStateChange]:
        stream = self.stub.WatchRuns(pb.WatchRunsRequest(run_ids=run_ids or [],
                                                         include_current=include_current),
                                     metadata=self._metadata)
        try:
            yield from stream
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise translate_error(exc, self.address) from None
        finally:
            stream.cancel()

    def telemetry(self, run: str, from_seq: int = 0, follow: bool = True) -> Iterator[pb.TelemetryEvent]:
        """Events of a run from ``from_seq``: history, then live until the run ends."""
        stream = self.stub.StreamTelemetry(pb.StreamTelemetryRequest(run=run, from_seq=from_seq,
                                                                     follow=follow),
                                           metadata=self._metadata)
        try:
            for batch in stream:
                yield from batch.events
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.CANCELLED:
                raise translate_error(exc, self.address) from None
        finally:
            stream.cancel()


def state_name(value: int) -> str:
    return pb.RunState.Name(value)
