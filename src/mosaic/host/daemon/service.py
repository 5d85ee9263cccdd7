"""The gRPC servicer: translates between the wire (mosaic_daemon.proto) and the
supervisor, and user mistakes into status codes (never a stack trace)."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

import grpc

from mosaic import __version__
from mosaic.host.daemon.catalog import WorkerCatalog
from mosaic.host.daemon.errors import ConfigRejected, Conflict, NotFound
from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb
from mosaic.host.daemon.proto import mosaic_daemon_pb2_grpc as pb_grpc
from mosaic.host.daemon.registry import RunRecord
from mosaic.host.daemon.states import RunState
from mosaic.host.daemon.streaming import stream_run
from mosaic.host.daemon.supervisor import SubmitRequest, Supervisor
from mosaic.host.daemon.wire import FIELD_ERRORS_KEY
from mosaic.errors import UserError
from mosaic.runs import RunDir, RunStore

T = TypeVar("T")


def _status_for(exc: UserError) -> grpc.StatusCode:
    if isinstance(exc, NotFound):
        return grpc.StatusCode.NOT_FOUND
    if isinstance(exc, Conflict):
        return grpc.StatusCode.FAILED_PRECONDITION
    return grpc.StatusCode.INVALID_ARGUMENT


def user_errors(method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """Report a :class:`UserError` as a status with a one-line message."""
    @functools.wraps(method)
    async def wrapper(self: "DaemonService", request: Any, context: grpc.aio.ServicerContext) -> T:
        try:
            return await method(self, request, context)
        except UserError as exc:
            if isinstance(exc, ConfigRejected):
                context.set_trailing_metadata(((FIELD_ERRORS_KEY, json.dumps(
                    [{"field": f, "message": m} for f, m in exc.errors])),))
            await context.abort(_status_for(exc), str(exc))
            raise  # unreachable: abort raises
    return wrapper


class DaemonService(pb_grpc.TrainerDaemonServicer):
    def __init__(self, supervisor: Supervisor, catalog: WorkerCatalog, address: str,
                 token_required: bool) -> None:
        self.sup = supervisor
        self.catalog = catalog
        self.address = address
        self.token_required = token_required

    # -- conversions --------------------------------------------------------
    def run_info(self, record: RunRecord) -> pb.RunInfo:
        metrics = self.sup.last_metrics(record)
        return pb.RunInfo(
            run_id=record.run_id, worker=record.worker, state=pb.RunState.Value(record.state.value),
            config_digest=record.config_digest, created_at=record.created_at,
            started_at=record.started_at or 0.0, ended_at=record.ended_at or 0.0,
            has_exit_code=record.exit_code is not None, exit_code=record.exit_code or 0,
            exit_signal=record.exit_signal, failure_reason=record.failure_reason,
            pid=record.pid or 0, run_dir=record.run_dir, algorithm=record.algorithm,
            env_id=record.env_id, next_seq=self.sup.next_seq(record),
            last_metrics_json=json.dumps(metrics) if metrics else "", cpus=record.cpus,
            queue_position=self.sup.queue_position(record.run_id), state_reason=record.state_reason)

    # -- runs -------------------------------------------------------------------
    @user_errors
    async def SubmitRun(self, request: pb.SubmitRunRequest, context: Any) -> pb.RunInfo:
        try:
            config = json.loads(request.config_json or "{}")
        except ValueError as exc:
            raise ConfigRejected([("config", f"not valid JSON ({exc})")]) from None
        if not isinstance(config, dict):
            raise ConfigRejected([("config", f"must be a JSON object, got {type(config).__name__}")])
        record = await self.sup.submit(config, request.worker, request.run_id,
                                       request.heartbeat_timeout_s, request.cpus)
        return self.run_info(record)

    @user_errors
    async def SubmitRuns(self, request: pb.SubmitRunsRequest, context: Any) -> pb.SubmitRunsReply:
        parsed: list[SubmitRequest | ConfigRejected] = []
        for item in request.runs:
            try:
                config = json.loads(item.config_json or "{}")
            except ValueError as exc:
                parsed.append(ConfigRejected([("config", f"not valid JSON ({exc})")]))
                continue
            if not isinstance(config, dict):
                parsed.append(ConfigRejected([("config", f"must be a JSON object, got {type(config).__name__}")]))
                continue
            parsed.append(SubmitRequest(config, item.worker, item.run_id, item.heartbeat_timeout_s, item.cpus))
        answers = iter(await self.sup.submit_many([p for p in parsed if isinstance(p, SubmitRequest)]))
        results = []
        for p in parsed:
            answer = next(answers) if isinstance(p, SubmitRequest) else p
            if isinstance(answer, UserError):
                fields = answer.errors if isinstance(answer, ConfigRejected) else []
                results.append(pb.SubmitRunResult(error=str(answer), field_errors_json=json.dumps(
                    [{"field": f, "message": m} for f, m in fields])))
            else:
                results.append(pb.SubmitRunResult(run=self.run_info(answer)))
        return pb.SubmitRunsReply(results=results)

    @user_errors
    async def CancelRun(self, request: pb.RunControlRequest, context: Any) -> pb.RunInfo:
        return self.run_info(await self.sup.cancel(request.run, request.reason, request.wait_s))

    @user_errors
    async def PauseRun(self, request: pb.RunControlRequest, context: Any) -> pb.RunInfo:
        return self.run_info(await self.sup.pause(request.run, request.wait_s))

    @user_errors
    async def ResumeRun(self, request: pb.RunControlRequest, context: Any) -> pb.RunInfo:
        return self.run_info(await self.sup.resume(request.run, request.wait_s))

    @user_errors
    async def GetRun(self, request: pb.GetRunRequest, context: Any) -> pb.RunInfo:
        return self.run_info(self.sup.resolve(request.run))

    @user_errors
    async def ListRuns(self, request: pb.ListRunsRequest, context: Any) -> pb.ListRunsReply:
        states = [RunState(pb.RunState.Name(s)) for s in request.states if s]
        records = self.sup.registry.list(states=states, worker=request.worker, limit=request.limit)
        return pb.ListRunsReply(runs=[self.run_info(r) for r in records])

    async def WatchRuns(self, request: pb.WatchRunsRequest,
                        context: Any) -> AsyncIterator[pb.RunStateChange]:
        wanted = set(request.run_ids)
        queue: asyncio.Queue[tuple[RunRecord, RunState | None, float]] = asyncio.Queue()

        def listener(record: RunRecord, previous: RunState | None) -> None:
            if not wanted or record.run_id in wanted:
                queue.put_nowait((record, previous, time.time()))

        self.sup.registry.add_listener(listener)
        try:
            if request.include_current:
                for record in self.sup.registry.list():
                    if not wanted or record.run_id in wanted:
                        yield pb.RunStateChange(run=self.run_info(record), snapshot=True, at=time.time())
            while True:
                record, previous, at = await queue.get()
                yield pb.RunStateChange(
                    run=self.run_info(record), at=at,
                    previous_state=pb.RunState.Value(previous.value) if previous else 0)
        finally:
            self.sup.registry.remove_listener(listener)

    async def StreamTelemetry(self, request: pb.StreamTelemetryRequest,
                              context: Any) -> AsyncIterator[pb.TelemetryBatch]:
        try:
            record = self.sup.resolve(request.run)
            path, hub = RunDir(self.sup.store.runs_dir / record.run_id).telemetry_path, \
                self.sup.hub_for(record.run_id)
        except UserError:
            try:  # a run made by `mosaic run`, not the daemon: its stored history only
                path, hub = RunStore(self.sup.settings.home).resolve(request.run).telemetry_path, None
            except UserError as exc:
                await context.abort(grpc.StatusCode.NOT_FOUND, str(exc))
                return
        event_cls, batch_cls = pb.TelemetryEvent, pb.TelemetryBatch
        async for items, from_disk in stream_run(path, hub, request.from_seq, request.follow):
            yield batch_cls(events=[event_cls(seq=s, type=t, json=j) for s, t, j in items],
                            replay=from_disk)

    # -- workers and health ---------------------------------------------------
    async def ListWorkers(self, request: pb.ListWorkersRequest, context: Any) -> pb.ListWorkersReply:
        if request.refresh:
            await asyncio.to_thread(self.catalog.refresh)
        workers = []
        for w in self.catalog.discovery.workers:
            caps = w.capabilities
            workers.append(pb.WorkerInfo(
                name=w.name, entry_point=w.entry_point, version=w.metadata.version,
                description=w.metadata.description, upstream_library=w.metadata.upstream_library,
                upstream_version=w.metadata.upstream_version, paradigms=caps.paradigms,
                policy_configurations=caps.policy_configurations, env_families=caps.env_families,
                algorithms=caps.algorithms, supports_pause_resume=caps.supports_pause_resume,
                supports_checkpointing=caps.supports_checkpointing, cpus=caps.resources.cpus,
                memory_mb=caps.resources.memory_mb, gpus=caps.resources.gpus,
                metadata_json=json.dumps(w.metadata.to_dict()),
                capabilities_json=json.dumps(caps.to_dict()),
                algo_params_schema_json=self.catalog.algo_params_schemas(w),
                python=self.catalog.python_for(w.name)))
        broken = [pb.BrokenWorkerInfo(name=b.name, entry_point=b.entry_point, reason=b.reason)
                  for b in self.catalog.discovery.broken]
        return pb.ListWorkersReply(workers=workers, broken=broken)

    @user_errors
    async def DescribeWorker(self, request: pb.DescribeWorkerRequest, context: Any) -> pb.WorkerDescription:
        name = request.name
        if name not in self.catalog.discovery.names():
            broken = next((b for b in self.catalog.discovery.broken if b.name == name), None)
            if broken is not None:
                raise Conflict(f"worker {name!r} is installed but broken: {broken.reason}")
            raise NotFound(f"worker: {name!r} is not one of "
                           f"{', '.join(self.catalog.discovery.names()) or '(none installed)'}")
        try:
            document = await asyncio.to_thread(self.catalog.description, name, request.refresh)
        except UserError as exc:
            raise Conflict(f"worker {name!r} cannot describe itself: {exc}") from None
        return pb.WorkerDescription(
            name=name, describe_json=json.dumps(document), python=self.catalog.python_for(name),
            config_schema_json=json.dumps(document["config_schema"]),
            default_config_json=json.dumps(document["default_config"]))

    async def ValidateConfig(self, request: pb.ValidateConfigRequest, context: Any) -> pb.ValidateConfigReply:
        try:
            config = json.loads(request.config_json or "{}")
        except ValueError as exc:
            return pb.ValidateConfigReply(ok=False, error=f"config: not valid JSON ({exc})")
        if not isinstance(config, dict):
            return pb.ValidateConfigReply(ok=False, error=f"config: must be a JSON object, "
                                                          f"got {type(config).__name__}")
        try:
            _, _, normalised, _ = await self.sup.validate(config)
        except UserError as exc:
            return pb.ValidateConfigReply(ok=False, error=str(exc))
        return pb.ValidateConfigReply(ok=True, normalized_config_json=json.dumps(normalised))

    async def GetHealth(self, request: pb.GetHealthRequest, context: Any) -> pb.Health:
        settings = self.sup.settings
        return pb.Health(
            version=__version__, pid=os.getpid(), started_at=self.sup.started_at,
            uptime_s=time.time() - self.sup.started_at, home=str(settings.home.resolve()),
            address=self.address, token_required=self.token_required,
            runs_by_state=self.sup.registry.counts(), max_concurrent_runs=settings.max_concurrent_runs,
            cpu_budget=settings.cpu_budget, cpus_in_use=self.sup.cpus_in_use(),
            workers=len(self.catalog.discovery.workers), broken_workers=len(self.catalog.discovery.broken))
