"""The supervisor: queue, start, follow, watch over and end worker runs.

Every run goes QUEUED → STARTING → RUNNING ⇄ PAUSED → COMPLETED | FAILED |
CANCELLED through the registry. Each worker runs in its own process group;
its stdout spool is tailed line by line into the run's ``telemetry.jsonl``
(:class:`~mosaic.host.recorder.RunRecorder`) and fanned out to subscribers
(:class:`~mosaic.host.daemon.hub.TelemetryHub`). Nothing one worker does — crash,
hang, print garbage — can reach another run: a failure while handling one
run's output fails that run only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from mosaic import __version__
from mosaic.host.daemon.active import ActiveRun
from mosaic.host.daemon.catalog import WorkerCatalog
from mosaic.host.discovery import DiscoveredWorker
from mosaic.host.daemon.errors import ConfigRejected, Conflict, NotFound, split_field
from mosaic.host.daemon.fastjson import parse_event_line
from mosaic.host.daemon.hub import TelemetryHub
from mosaic.host.daemon.process import (
    AttachedWorker,
    SpoolReader,
    WorkerHandle,
    kill_group_now,
    spawn_worker,
    spool_path,
)
from mosaic.host.daemon.registry import Registry, RunRecord
from mosaic.host.daemon.run_files import (count_daemon_events, count_lines, drop_torn_tail, next_seq_on_disk,
                                          release_fastlane, stored_terminal)
from mosaic.host.daemon.settings import DaemonSettings
from mosaic.host.daemon.stalls import STALLED_GRACE_S, stall_in
from mosaic.host.daemon.states import TERMINAL_EVENT_STATE, RunState
from mosaic.errors import UserError
from mosaic.pids import is_running, start_ticks
from mosaic.host.hosting import stderr_tail
from mosaic.host.launcher import ConfigChecker, create_run, run_launch, validate_config
from mosaic.provenance import config_digest
from mosaic.host.recorder import RunRecorder, signal_name
from mosaic.runs import ManifestFields, RunDir, RunStore, new_run_id, validate_run_id

log = logging.getLogger("mosaic.host.daemon")

POLL_MIN_S = 0.002  # spool polling while output flows …
POLL_MAX_S = 0.02   # … backing off to this when a worker is quiet
WATCHDOG_PERIOD_S = 0.2
CHECKER_IDLE_PERIOD_S = 5.0  # how often kept checking processes unused for long are closed
SATURATED_PAUSE_S = 0.001  # between passes while output piles up


@dataclass(frozen=True)
class SubmitRequest:
    """One run of :meth:`Supervisor.submit_many`, with :meth:`Supervisor.submit`'s arguments."""

    config: Mapping[str, Any]
    worker: str = ""
    run_id: str = ""
    heartbeat_timeout_s: float = 0.0
    cpus: float = 0.0


def _reserved_cpus(config: Mapping[str, Any]) -> float | None:
    """The config's ``resources.cpus`` (the shared field), when it gives one."""
    resources = config.get("resources")
    value = resources.get("cpus") if isinstance(resources, Mapping) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _config_summary(config: Mapping[str, Any]) -> tuple[str, str]:
    """(algorithm, env_id) of a config, read from the shared fields, for listings before the run starts."""
    from mosaic.workerkit.run_fields import summarize

    summary = summarize(config)
    return summary.algorithm, summary.env_id


class Supervisor:
    def __init__(self, settings: DaemonSettings, registry: Registry,
                 catalog: WorkerCatalog) -> None:
        self.settings = settings
        self.registry = registry
        self.catalog = catalog
        self.store = RunStore(settings.home)
        self.active: dict[str, ActiveRun] = {}
        self.hubs: dict[str, TelemetryHub] = {}  # queued and active runs
        self.queue: list[str] = []  # QUEUED run ids, oldest first
        self.started_at = time.time()
        self._disk_cache: dict[str, tuple[tuple[int, int], tuple[int, dict[str, Any] | None]]] = {}
        self._stopping = False
        self._watchdog: asyncio.Task[None] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._pump_wake = asyncio.Event()
        self._home = settings.home.resolve()
        self.checker = ConfigChecker()  # each worker's --validate-many process, kept between submissions

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Reconcile what an earlier daemon left, then start queued work."""
        await self._recover()
        self.queue = [r.run_id for r in self.registry.list(states=[RunState.QUEUED])]
        for run_id in self.queue:
            self.hubs.setdefault(run_id, TelemetryHub())
        self._watchdog = asyncio.create_task(self._watchdog_loop(), name="mosaic-watchdog")
        self._pump = asyncio.create_task(self._pump_loop(), name="mosaic-telemetry-pump")
        self._schedule()

    async def shutdown(self, grace_s: float | None = None) -> None:
        """SIGTERM every worker (they checkpoint and exit), SIGKILL stragglers."""
        grace = self.settings.cancel_grace_s if grace_s is None else grace_s
        self._stopping = True
        for active in list(self.active.values()):
            if not active.cancel_requested:  # one already cancelled keeps stopping within its own grace
                self._request_cancel(active, "daemon shutting down", grace)
        waits = [asyncio.ensure_future(a.finished.wait()) for a in self.active.values()]
        if waits:
            _, pending = await asyncio.wait(waits, timeout=grace + 5)
            for active in list(self.active.values()):
                kill_group_now(active.handle)
            if pending:
                await asyncio.wait(pending, timeout=5)
        for task in (self._watchdog, self._pump):
            if task:
                task.cancel()
        await asyncio.to_thread(self.checker.close)

    # ------------------------------------------------------------------ queries
    def resolve(self, ref: str) -> RunRecord:
        try:
            return self.registry.resolve(ref)
        except UserError as exc:
            raise NotFound(str(exc)) from None

    def hub_for(self, run_id: str) -> TelemetryHub | None:
        return self.hubs.get(run_id)

    def queue_position(self, run_id: str) -> int:
        return self.queue.index(run_id) + 1 if run_id in self.queue else 0

    def next_seq(self, record: RunRecord) -> int:
        hub = self.hubs.get(record.run_id)
        if hub is not None:
            return hub.next_seq
        return self._from_disk(record.run_id)[0]

    def last_metrics(self, record: RunRecord) -> dict[str, Any] | None:
        hub = self.hubs.get(record.run_id)
        if hub is not None and hub.last_metrics is not None:
            return hub.last_metrics
        return self._from_disk(record.run_id)[1]

    def _from_disk(self, run_id: str) -> tuple[int, dict[str, Any] | None]:
        """``(next seq, last metrics)`` of a run no hub follows, read from its telemetry's tail once per
        change of the file: a listing asks for every run, most of them long ended, and a client may list
        every second."""
        run = RunDir(self.store.runs_dir / run_id)
        try:
            st = run.telemetry_path.stat()
            key: tuple[int, int] | None = (st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            key = None
        cached = self._disk_cache.get(run_id)
        if cached is not None and key is not None and cached[0] == key:
            return cached[1]
        value = (next_seq_on_disk(run.telemetry_path), run.last_event("metrics", tail_bytes=1 << 16))
        if key is not None:
            self._disk_cache[run_id] = (key, value)
        return value

    def cpus_in_use(self) -> float:
        return sum(a.cpus for a in self.active.values())

    # ------------------------------------------------------------------ submit
    def _precheck(self, config: Mapping[str, Any], worker_name: str = "", run_id: str = "",
                  heartbeat_timeout_s: float = 0.0, cpus: float = 0.0,
                  taken: frozenset[str] = frozenset()) -> tuple[DiscoveredWorker, str]:
        """What the daemon checks itself before asking the worker: ``(worker, run id)``."""
        errors: list[tuple[str, str]] = []
        name = worker_name or config.get("worker") or ""
        worker = None
        if not isinstance(name, str) or not name:
            errors.append(("worker", "not given; add \"worker\": NAME to the config "
                                     f"(installed: {', '.join(self.catalog.discovery.names()) or 'none'})"))
        else:
            try:
                worker = self.catalog.get(name)
            except UserError as exc:
                errors.append(split_field(str(exc), "worker"))
        rid = run_id or config.get("run_id") or new_run_id()
        try:
            validate_run_id(rid)
            if rid in taken or self.registry.get(rid) is not None or self.store.exists(rid):
                errors.append(("run_id", f"a run named {rid!r} already exists"))
        except UserError as exc:
            errors.append(split_field(str(exc), "run_id"))
        if heartbeat_timeout_s < 0:
            errors.append(("heartbeat_timeout_s", f"must be >= 0, got {heartbeat_timeout_s}"))
        if cpus < 0:
            errors.append(("cpus", f"must be >= 0, got {cpus}"))
        if errors or worker is None:
            raise ConfigRejected(errors)
        return worker, rid

    async def validate(self, config: dict[str, Any], worker_name: str = "", run_id: str = "",
                       heartbeat_timeout_s: float = 0.0, cpus: float = 0.0
                       ) -> tuple[DiscoveredWorker, str, dict[str, Any], str]:
        """Everything :meth:`submit` checks, creating nothing: ``(worker, run id, normalised config, python)``.

        The worker checks the config itself (``--validate``), in its own interpreter.
        """
        worker, rid = self._precheck(config, worker_name, run_id, heartbeat_timeout_s, cpus)
        python = self.catalog.python_for(worker.name)
        try:
            normalised = await asyncio.to_thread(
                validate_config, worker, {**config, "worker": worker.name, "run_id": rid}, python)
        except UserError as exc:
            raise ConfigRejected([split_field(str(exc))]) from None
        except OSError as exc:  # the configured interpreter is missing or not executable
            raise Conflict(f"worker {worker.name!r} cannot be started with {python}: {exc}") from None
        return worker, rid, normalised, python

    async def submit(self, config: dict[str, Any], worker_name: str = "", run_id: str = "",
                     heartbeat_timeout_s: float = 0.0, cpus: float = 0.0) -> RunRecord:
        """Validate with the worker and queue; :class:`ConfigRejected` creates nothing."""
        if self._stopping:
            raise Conflict("the daemon is shutting down")
        worker, rid, normalised, python = await self.validate(config, worker_name, run_id,
                                                              heartbeat_timeout_s, cpus)
        return self._queue(worker, rid, normalised, python, heartbeat_timeout_s, cpus)

    async def submit_many(self, requests: list[SubmitRequest]) -> list[RunRecord | UserError]:
        """Validate and queue many runs, in order: each worker checks all of its configs in one process
        (``--validate-many``). Each answer is the queued run or the :class:`UserError` that kept that one
        run from being created; one bad config does not stop the others."""
        if self._stopping:
            raise Conflict("the daemon is shutting down")
        answers: list[RunRecord | UserError | None] = [None] * len(requests)
        by_worker: dict[str, list[tuple[int, DiscoveredWorker, str]]] = {}
        taken: set[str] = set()
        for i, req in enumerate(requests):
            try:
                worker, rid = self._precheck(req.config, req.worker, req.run_id, req.heartbeat_timeout_s,
                                             req.cpus, frozenset(taken))
            except UserError as exc:
                answers[i] = exc
                continue
            taken.add(rid)
            by_worker.setdefault(worker.name, []).append((i, worker, rid))
        for name, items in by_worker.items():
            worker, python = items[0][1], self.catalog.python_for(name)
            configs = [{**requests[i].config, "worker": name, "run_id": rid} for i, _, rid in items]
            try:
                checked = await asyncio.to_thread(self.checker.check, worker, configs, python)
            except UserError as exc:  # the worker could not check them at all
                checked = [ConfigRejected([split_field(str(exc))])] * len(items)
            except OSError as exc:
                checked = [Conflict(f"worker {name!r} cannot be started with {python}: {exc}")] * len(items)
            for (i, _, rid), normalised in zip(items, checked):
                if isinstance(normalised, UserError):
                    answers[i] = (normalised if isinstance(normalised, (ConfigRejected, Conflict))
                                  else ConfigRejected([split_field(str(normalised))]))
                    continue
                req = requests[i]
                try:
                    answers[i] = self._queue(worker, rid, normalised, python, req.heartbeat_timeout_s, req.cpus)
                except UserError as exc:
                    answers[i] = exc
        return [a for a in answers if a is not None]

    def _queue(self, worker: DiscoveredWorker, rid: str, normalised: dict[str, Any], python: str,
               heartbeat_timeout_s: float, cpus: float) -> RunRecord:
        """Create a checked run's folder and put it in the queue."""
        now = time.time()
        try:
            run = create_run(self.store, worker, normalised, status=RunState.QUEUED.manifest, python=python,
                             submitted_via="daemon")
        except UserError as exc:  # lost a race for the same run id
            raise ConfigRejected([split_field(str(exc), "run_id")]) from None
        algorithm, env_id = _config_summary(normalised)
        record = RunRecord(
            run_id=rid, worker=worker.name, state=RunState.QUEUED, run_dir=str(run.root),
            created_at=now, updated_at=now, config_digest=config_digest(normalised), python=python,
            cpus=cpus or _reserved_cpus(normalised) or worker.capabilities.resources.cpus,
            heartbeat_timeout_s=heartbeat_timeout_s or self.settings.heartbeat_timeout_s,
            algorithm=algorithm, env_id=env_id, state_reason="submitted")
        self.hubs[rid] = TelemetryHub()
        self.registry.insert(record)
        self.queue.append(rid)
        log.info("run %s queued (worker %s)", rid, worker.name)
        self._schedule()
        return self.registry.require(rid)

    # ------------------------------------------------------------------ control
    async def cancel(self, ref: str, reason: str = "", wait_s: float = 0.0) -> RunRecord:
        record = self.resolve(ref)
        reason = reason or "cancelled by request"
        if record.state.terminal:
            raise Conflict(f"run {record.run_id} has already ended ({record.state.value})")
        if record.state is RunState.QUEUED:
            self.queue.remove(record.run_id)
            run = RunDir(self.store.runs_dir / record.run_id)
            hub = self.hubs.pop(record.run_id, TelemetryHub())
            with RunRecorder(run) as recorder:
                event = recorder.record({"type": "run_cancelled", "reason": reason, "origin": "daemon"})
                hub.publish(event["seq"], "run_cancelled", recorder.last_line)
            hub.close()
            return self.registry.transition(record.run_id, RunState.CANCELLED, reason)
        active = self.active.get(record.run_id)
        if active is None:  # between registry and memory: cannot happen on one loop
            raise Conflict(f"run {record.run_id} is {record.state.value} but has no worker")
        self._request_cancel(active, reason, self.settings.cancel_grace_s)
        return await self._wait_for(record.run_id, set(), wait_s)

    async def pause(self, ref: str, wait_s: float = 0.0) -> RunRecord:
        record, active = self._controllable(ref, "paused")
        if record.state is RunState.PAUSED:
            return record
        if record.state is not RunState.RUNNING:
            raise Conflict(f"run {record.run_id} is {record.state.value}; only a RUNNING run "
                           "can be paused")
        active.pause_requested = True
        if active.handle:
            active.handle.signal(signal.SIGUSR1)
        return await self._wait_for(record.run_id, {RunState.PAUSED}, wait_s)

    async def resume(self, ref: str, wait_s: float = 0.0) -> RunRecord:
        record, active = self._controllable(ref, "resumed")
        if record.state is RunState.RUNNING and not active.pause_requested:
            return record
        if record.state not in (RunState.PAUSED, RunState.RUNNING):
            raise Conflict(f"run {record.run_id} is {record.state.value}; only a PAUSED run "
                           "can be resumed")
        active.pause_requested = False
        if active.handle:
            active.handle.signal(signal.SIGUSR2)
        return await self._wait_for(record.run_id, {RunState.RUNNING}, wait_s)

    def _controllable(self, ref: str, verb: str) -> tuple[RunRecord, ActiveRun]:
        record = self.resolve(ref)
        active = self.active.get(record.run_id)
        if record.state.terminal or active is None:
            raise Conflict(f"run {record.run_id} is {record.state.value}; it cannot be {verb}")
        worker = self.catalog.discovery
        if record.worker in worker.names() and not worker.get(record.worker).capabilities.supports_pause_resume:
            raise Conflict(f"worker {record.worker!r} does not support pause/resume")
        return record, active

    async def _wait_for(self, run_id: str, states: set[RunState], wait_s: float) -> RunRecord:
        deadline = time.monotonic() + max(0.0, wait_s)
        while True:
            record = self.registry.require(run_id)
            if record.state in states or record.state.terminal or time.monotonic() >= deadline:
                return record
            await asyncio.sleep(0.02)

    def _request_cancel(self, active: ActiveRun, reason: str, grace_s: float) -> None:
        if active.cancel_requested:  # asked twice: stop waiting
            log.info("run %s: cancel asked again (%s): SIGKILL now", active.run_id, reason)
            kill_group_now(active.handle)
            return
        active.cancel_requested = True
        active.cancel_reason = reason
        log.info("run %s: cancel (%s)", active.run_id, reason)
        if active.handle:
            active.handle.signal_group(signal.SIGTERM)
            active.kill_timer = asyncio.get_running_loop().call_later(
                grace_s, kill_group_now, active.handle)

    # ------------------------------------------------------------------ scheduling
    def _schedule(self) -> None:
        """Start queued runs, oldest first, while the limits allow."""
        while self.queue and not self._stopping:
            record = self.registry.require(self.queue[0])
            if len(self.active) >= self.settings.max_concurrent_runs:
                return
            if self.active and self.cpus_in_use() + record.cpus > self.settings.cpu_budget:
                return
            self.queue.pop(0)
            hub = self.hubs.setdefault(record.run_id, TelemetryHub())
            active = ActiveRun(record.run_id, RunDir(self.store.runs_dir / record.run_id), hub,
                               RunState.STARTING, record.cpus, record.heartbeat_timeout_s)
            self.active[record.run_id] = active
            self._transition(active, RunState.STARTING, "started by the scheduler")
            asyncio.ensure_future(self._launch(active, record))

    async def _launch(self, active: ActiveRun, record: RunRecord) -> None:
        run = active.run
        try:
            worker = self.catalog.get(record.worker)
            cmd, env = run_launch(worker, run, record.python or None, {"MOSAIC_HOME": str(self._home)})
            active.recorder = RunRecorder(run, parse=parse_event_line)
            handle = await spawn_worker(cmd, run, env)
        except Exception as exc:  # bad interpreter path, worker uninstalled meanwhile, …
            log.warning("run %s: could not start: %s", active.run_id, exc)
            if active.recorder is None:
                active.recorder = RunRecorder(run)
            self._record(active, {"type": "run_failed", "error_type": type(exc).__name__,
                                  "message": f"could not start the worker: {exc}"})
            await self._finish(active, None, known=False)
            return
        run.update_manifest(**ManifestFields.starting(handle.pid, cmd, daemon={"version": __version__,
                                                                               "pid": os.getpid()}))
        self.registry.update(active.run_id, pid=handle.pid, proc_start=str(start_ticks(handle.pid)))
        log.info("run %s: worker pid %d", active.run_id, handle.pid)
        self._attach(active, handle, SpoolReader(spool_path(run)))
        if active.cancel_requested:  # cancelled while we were spawning
            active.cancel_requested = False
            self._request_cancel(active, active.cancel_reason, self.settings.cancel_grace_s)

    # ------------------------------------------------------------------ following
    def _attach(self, active: ActiveRun, handle: WorkerHandle, reader: SpoolReader) -> None:
        """From now on the pump reads this worker's spool, and its exit settles the run."""
        active.handle, active.reader = handle, reader
        handle.exited.add_done_callback(
            lambda _: asyncio.ensure_future(self._settle(active)))
        self._wake_pump()

    def _wake_pump(self) -> None:
        self._pump_wake.set()

    async def _pump_loop(self) -> None:
        """Tail every running worker's spool, one pass per tick.

        One loop for all runs rather than a task each: with many runs the cost
        is one timer per tick, not one per run. Ticks are short while output
        flows and back off when every worker is quiet.
        """
        idle = POLL_MIN_S
        while True:
            try:
                busy, saturated = self._pump_once()
            except Exception:  # never let the pump die: every run depends on it
                log.exception("telemetry pump error")
                busy = saturated = False
            if saturated:
                await asyncio.sleep(SATURATED_PAUSE_S)  # more is waiting: let the streams send first
                continue
            idle = POLL_MIN_S if busy else min(idle * 2, POLL_MAX_S)
            self._pump_wake.clear()
            try:
                await asyncio.wait_for(self._pump_wake.wait(), idle)
            except asyncio.TimeoutError:
                pass

    def _pump_once(self) -> tuple[bool, bool]:
        """One pass over all spools: (any output read, any run with more waiting)."""
        busy = saturated = False
        for active in list(self.active.values()):
            if active.reader is None or active.settling:
                continue
            try:
                lines = active.reader.read_available()
                if lines:
                    busy = True
                    saturated = saturated or active.reader.saturated
                    self._ingest(active, lines)
            except Exception as exc:  # a daemon bug must fail this run only
                self._lose(active, exc)
        return busy, saturated

    def _lose(self, active: ActiveRun, exc: BaseException) -> None:
        log.error("run %s: supervisor error", active.run_id, exc_info=exc)
        active.settling = True  # no more reading; the exit callback settles the run
        if active.recorder and active.recorder.terminal is None:
            self._record(active, {"type": "run_failed", "error_type": "DaemonError",
                                  "message": f"the daemon lost this run: {exc!r}"})
        kill_group_now(active.handle)

    async def _settle(self, active: ActiveRun) -> None:
        """The worker has exited: store the rest of its output, then end the run."""
        assert active.handle is not None and active.reader is not None
        returncode = active.handle.exited.result()
        if not active.settling:
            active.settling = True
            try:
                self._ingest(active, active.reader.read_rest())
            except Exception as exc:
                self._lose(active, exc)
        await self._finish(active, returncode, known=returncode is not None)

    def _ingest(self, active: ActiveRun, lines: Iterable[bytes]) -> None:
        recorder, hub = active.recorder, active.hub
        assert recorder is not None
        active.last_activity = time.monotonic()
        for event, text in recorder.feed_lines(lines):  # one write, then publish
            kind = event["type"]
            hub.publish(event["seq"], kind, text)
            if kind == "heartbeat":
                if "stalled" in event or "last_progress_ts" in event:
                    active.progress = event
                    if event.get("stalled") is not True:
                        active.stalled_since = None
                    elif active.stalled_since is None:
                        active.stalled_since = time.monotonic()
                continue
            if kind == "log" or kind == "episode":
                continue
            if kind == "metrics":
                hub.last_metrics = event
            elif kind == "run_started" and active.state is RunState.STARTING:
                env = event.get("env") if isinstance(event.get("env"), dict) else {}
                extra = {"started_at": event.get("ts") or time.time()}
                if event.get("algorithm"):
                    extra["algorithm"] = str(event["algorithm"])
                if env.get("env_id"):
                    extra["env_id"] = str(env["env_id"])
                self._transition(active, RunState.RUNNING, "worker sent run_started", **extra)
            elif kind == "paused" and active.state is RunState.RUNNING:
                active.progress = active.stalled_since = None  # the worker's stall clock stops while paused
                self._transition(active, RunState.PAUSED, "worker paused")
            elif kind == "resumed" and active.state is RunState.PAUSED:
                active.progress = active.stalled_since = None
                self._transition(active, RunState.RUNNING, "worker resumed")

    def _record(self, active: ActiveRun, event: dict[str, Any]) -> None:
        """Store an event the daemon writes on the worker's behalf, and publish it."""
        assert active.recorder is not None
        event = active.recorder.record({**event, "origin": "daemon"})
        active.hub.publish(event["seq"], event["type"], active.recorder.last_line)

    async def _finish(self, active: ActiveRun, returncode: int | None, known: bool = True) -> None:
        """The worker is gone: record how it ended and release its slot."""
        if active.finished.is_set() or active.run_id not in self.active or active.ending:
            return
        active.ending = True
        if active.kill_timer:
            active.kill_timer.cancel()
        kill_group_now(active.handle)  # grandchildren go with the worker
        await asyncio.to_thread(release_fastlane, active.run)
        recorder = active.recorder
        assert recorder is not None
        run = active.run
        if not known:
            if recorder.terminal is None:
                self._record(active, {"type": "run_failed", "error_type": "DaemonRestarted",
                                      "message": "daemon restarted: the worker exited while no daemon "
                                                 "was following it (exit code unknown)"})
            run.update_manifest(**ManifestFields.exited(None, None))
        else:
            code = returncode if returncode is not None else -int(signal.SIGKILL)
            if recorder.terminal is None and active.cancel_requested:
                self._record(active, {"type": "run_cancelled",
                                      "reason": f"{active.cancel_reason} (worker stopped by "
                                                f"{signal_name(code) or f'exit code {code}'})"})
            before = recorder.seq
            recorder.finish(code, stderr_tail(run.worker_log_path))
            if recorder.seq > before:  # finish() synthesised a run_failed: publish it too
                active.hub.publish(recorder.seq - 1, "run_failed", recorder.last_line)
            returncode = code
        terminal = recorder.terminal or {}
        state = TERMINAL_EVENT_STATE.get(terminal.get("type", ""), RunState.FAILED)
        reason = {RunState.FAILED: str(terminal.get("message", "")),
                  RunState.CANCELLED: active.cancel_reason or str(terminal.get("reason", "")),
                  RunState.COMPLETED: "completed"}[state]
        if state is RunState.COMPLETED and active.state is RunState.STARTING:
            state, reason = RunState.FAILED, f"worker ended ({terminal.get('type')}) before run_started"
        fields: dict[str, Any] = {"exit_code": returncode, "exit_signal": (
            (signal_name(returncode) or "") if returncode is not None else "")}
        if state is RunState.FAILED:
            fields["failure_reason"] = reason
        self._transition(active, state, reason, **fields)
        recorder.close()
        if active.reader:
            active.reader.close()
        if state is not RunState.FAILED:  # all of it is in telemetry.jsonl; keep it only to debug
            spool_path(run).unlink(missing_ok=True)
        active.hub.close()
        self.active.pop(active.run_id, None)
        self.hubs.pop(active.run_id, None)
        active.finished.set()
        log.info("run %s: %s%s", active.run_id, state.value, f" ({reason})" if reason else "")
        self._schedule()

    def _transition(self, active: ActiveRun, state: RunState, reason: str, **fields: Any) -> None:
        self.registry.transition(active.run_id, state, reason, **fields)
        active.state = state
        if state in (RunState.STARTING,):
            active.run.update_manifest(**ManifestFields.status(RunState.STARTING))

    # ------------------------------------------------------------------ watchdog
    async def _watchdog_loop(self) -> None:
        checked_idle = time.monotonic()
        while True:
            await asyncio.sleep(WATCHDOG_PERIOD_S)
            now = time.monotonic()
            if now - checked_idle > CHECKER_IDLE_PERIOD_S and self.checker.pids():
                checked_idle = now
                await asyncio.to_thread(self.checker.close_idle)
            for active in list(self.active.values()):
                if active.watchdog_fired or active.handle is None or active.recorder is None:
                    continue
                if active.state is RunState.STARTING:
                    if now - active.started_mono > self.settings.startup_timeout_s:
                        self._fire(active, "StartupTimeout", f"no run_started within "
                                   f"{self.settings.startup_timeout_s:g} s of the worker's start")
                elif active.heartbeat_timeout_s > 0 and now - active.last_activity > active.heartbeat_timeout_s:
                    self._fire(active, "HeartbeatTimeout", f"no telemetry for "
                               f"{now - active.last_activity:.1f} s (heartbeat timeout "
                               f"{active.heartbeat_timeout_s:g} s); worker killed")
                elif active.state is RunState.RUNNING and active.progress is not None:
                    stall = stall_in(active.progress, time.time())
                    # a worker that says it is stuck gets a moment to end the run itself
                    reported = active.stalled_since is not None
                    if stall and (not reported or now - active.stalled_since > STALLED_GRACE_S):
                        self._fire(active, "StalledRun", f"{stall}; worker killed")

    def _fire(self, active: ActiveRun, error_type: str, message: str) -> None:
        active.watchdog_fired = True
        log.warning("run %s: %s", active.run_id, message)
        if active.recorder and active.recorder.terminal is None:
            self._record(active, {"type": "run_failed", "error_type": error_type, "message": message})
        kill_group_now(active.handle)

    # ------------------------------------------------------------------ recovery
    async def _recover(self) -> None:
        """Runs an earlier daemon left active: re-attach if alive, else settle them."""
        for record in self.registry.list(states=[RunState.STARTING, RunState.RUNNING, RunState.PAUSED]):
            run = RunDir(self.store.runs_dir / record.run_id)
            drop_torn_tail(run.telemetry_path)
            stored = count_lines(run.telemetry_path)
            daemon_made = count_daemon_events(run)
            hub = TelemetryHub(next_seq=stored)
            active = ActiveRun(record.run_id, run, hub, record.state, record.cpus,
                               record.heartbeat_timeout_s)
            active.recorder = RunRecorder(run, parse=parse_event_line)
            active.recorder.terminal = stored_terminal(run)
            reader = SpoolReader(spool_path(run), skip_lines=stored - daemon_made)
            self.active[record.run_id] = active
            self.hubs[record.run_id] = hub
            if is_running(record.pid, record.proc_start):
                log.info("run %s: re-attached to worker pid %s", record.run_id, record.pid)
                self._attach(active, AttachedWorker(int(record.pid or 0), record.proc_start), reader)
            else:
                log.info("run %s: worker gone while the daemon was down", record.run_id)
                active.reader = reader
                self._ingest(active, reader.read_rest())
                await self._finish(active, None, known=False)
