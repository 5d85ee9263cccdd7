"""The main window: the views in tabs, and every daemon call they need, on Qt's event loop.

Views never talk to the daemon: they emit signals, and this window makes the
gRPC calls (``mosaic.host.daemon.aio_client``) as asyncio tasks on the qasync loop
and hands the answers back. Long streams (run states, a run's telemetry) are
tasks too; a telemetry batch is handed over in chunks with a yield between
them, so replaying a long history never freezes the UI.
"""

from __future__ import annotations

import asyncio
import gc
import json
import traceback
from pathlib import Path
from typing import Any, Awaitable

import grpc
from PySide6.QtWidgets import QLabel, QMainWindow, QTabWidget

from mosaic.host.daemon.aio_client import AsyncDaemonClient, ensure_daemon
from mosaic.host.daemon.client import DaemonError
from mosaic.host.daemon.endpoint import find_daemon
from mosaic.clients.gui.arena_view import ArenaView
from mosaic.clients.gui.catalog import CatalogView
from mosaic.clients.gui.compare import CompareView
from mosaic.clients.gui.experiments_view import ExperimentsView
from mosaic.clients.gui.new_run import NewRunView
from mosaic.clients.gui.run_view import RunView
from mosaic.clients.gui.runs_view import RunsView

CHUNK = 250          # events handed to a view before the loop gets a turn
LIST_EVERY_S = 2.0   # the runs table's metrics refresh


class MainWindow(QMainWindow):
    def __init__(self, home: Path) -> None:
        super().__init__()
        self.home = Path(home)
        self.setWindowTitle(f"MOSAIC — {self.home}")
        self.resize(1200, 800)
        self.client: AsyncDaemonClient | None = None
        self.started_daemon = None
        self.tasks: set[asyncio.Task] = set()
        self.run_views: dict[str, RunView] = {}
        self.streams: dict[str, asyncio.Task] = {}
        self.describe_cache: dict[str, dict[str, Any]] = {}
        self.errors: list[str] = []
        self.connection_lost = False
        self.reconnects = 0
        self.tracebacks: list[str] = []
        self.closed = asyncio.get_event_loop().create_future()

        self.tabs = QTabWidget()
        self.tabs.setTabsClosable(True)
        self.tabs.tabCloseRequested.connect(self._close_tab)
        self.catalog = CatalogView()
        self.new_run = NewRunView()
        self.runs = RunsView()
        self.compare = CompareView()
        self.experiments = ExperimentsView(self.home)
        self.arena = ArenaView(self.home)
        for view, title in ((self.catalog, "Workers"), (self.new_run, "New run"), (self.runs, "Runs"),
                            (self.compare, "Compare"), (self.experiments, "Experiments"), (self.arena, "Arena")):
            self.tabs.addTab(view, title)
            self.tabs.tabBar().setTabButton(self.tabs.count() - 1, self.tabs.tabBar().ButtonPosition.RightSide, None)
        self.setCentralWidget(self.tabs)
        self.daemon_label = QLabel("connecting to the daemon…")
        self.statusBar().addPermanentWidget(self.daemon_label)

        self.new_run.worker_chosen.connect(lambda name: self.spawn(self._describe(name)))
        self.new_run.validate_requested.connect(lambda config: self.spawn(self._validate(config)))
        self.new_run.submit_requested.connect(lambda config: self.spawn(self._submit(config)))
        self.runs.control.connect(lambda verb, run_id: self.spawn(self._control(verb, run_id)))
        self.runs.open_run.connect(self.open_run)
        self.runs.fork_run.connect(self.fork_run)
        self.compare.history_wanted.connect(lambda run_id: self.spawn(self._history(run_id)))
        self.experiments.open_run.connect(self.open_run)

    # -- tasks ------------------------------------------------------------------------------
    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self.tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task) -> None:
        self.tasks.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            message = str(exc) if isinstance(exc, DaemonError) else f"{type(exc).__name__}: {exc}"
            self.errors.append(message)
            self.tracebacks.append("".join(traceback.format_exception(exc)))
            self.statusBar().showMessage(message, 15000)

    async def start(self) -> None:
        """Find (or start) the daemon, then fill the views and follow the runs."""
        endpoint, self.started_daemon = await ensure_daemon(self.home)
        self.client = AsyncDaemonClient.for_endpoint(endpoint, self.home)
        started = (f"started a daemon for {self.home} (pid {self.started_daemon.pid}); it keeps running"
                   if self.started_daemon else f"daemon pid {endpoint.pid}")
        self.daemon_label.setText(f"{started} at {endpoint.address}")
        reply = await self.client.workers()
        self.catalog.show_workers(reply)
        self.new_run.set_workers([w.name for w in reply.workers])
        for info in await self.client.list():
            self._take(info)
        self.spawn(self._watch())
        self.spawn(self._poll())

    async def stop(self) -> None:
        for view in self.run_views.values():
            view.close_view()
        self.experiments.close_view()
        self.arena.close_view()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.client is not None:
            await self.client.close()
            # gRPC's asyncio engine shuts down when its last channel is freed: do it now, while the Qt
            # loop it registered its socket with still exists (at interpreter exit it no longer does)
            self.client = None
            gc.collect()

    def closeEvent(self, event: Any) -> None:  # noqa: N802  (Qt's name)
        if not self.closed.done():
            self.closed.set_result(True)
        super().closeEvent(event)

    # -- the daemon's answers ------------------------------------------------------------------
    def _take(self, info: Any) -> None:
        self.runs.update_run(info)
        self.experiments.update_run(info)
        self.compare.add_run(info.run_id, info.run_dir, f"{info.worker} {info.algorithm} {info.env_id}".strip())

    async def _watch(self) -> None:
        try:
            async for change in self.client.watch(include_current=True):
                self._take(change.run)
        except DaemonError as exc:
            if exc.code != grpc.StatusCode.UNAVAILABLE:
                raise
            self.connection_lost = True  # _poll reconnects and follows again

    async def _poll(self) -> None:
        """The runs' newest metrics every couple of seconds; a lost daemon is looked for again, and followed."""
        while True:
            await asyncio.sleep(LIST_EVERY_S)
            try:
                runs = await self.client.list()
            except DaemonError as exc:
                if exc.code != grpc.StatusCode.UNAVAILABLE:
                    raise
                self.connection_lost = True
                self.daemon_label.setText(f"the daemon is unreachable ({exc}); looking for it again")
                await self._reconnect()
                continue
            for info in runs:
                self._take(info)
            if self.connection_lost:
                self.connection_lost = False
                self.reconnects += 1
                self.daemon_label.setText(f"reconnected to the daemon at {self.client.address}")
                self.spawn(self._watch())
                for run_id, view in self.run_views.items():  # live views go on from what they have
                    if run_id not in self.streams or self.streams[run_id].done():
                        self.streams[run_id] = self.spawn(self._stream(run_id, view))

    async def _reconnect(self) -> None:
        """A client for the daemon now serving the home (a restarted one listens elsewhere)."""
        endpoint = find_daemon(self.home)
        if endpoint is None or endpoint.address == self.client.address:
            return
        old = self.client
        self.client = AsyncDaemonClient.for_endpoint(endpoint, self.home)
        await old.close()

    async def _describe(self, name: str) -> None:
        document = self.describe_cache.get(name)
        if document is None:
            document = await self.client.describe_worker(name)
            self.describe_cache[name] = document
        self.new_run.show_worker(document)

    async def _validate(self, config: dict[str, Any]) -> bool:
        ok, _normalised, error = await self.client.validate_config(config)
        self.new_run.show_validation(ok, error)
        return ok

    async def _submit(self, config: dict[str, Any]) -> None:
        if not await self._validate(config):
            return  # the error is shown under its field; nothing was submitted
        info = await self.client.submit(config)
        self.new_run.submitted(info.run_id)
        self._take(info)
        self.tabs.setCurrentWidget(self.runs)
        self.runs.select(info.run_id)

    async def _control(self, verb: str, run_id: str) -> None:
        self.statusBar().showMessage(f"{verb} {run_id}…")
        info = await self.client.control(verb, run_id)
        self._take(info)
        self.statusBar().showMessage(f"{run_id}: {info.state_reason or verb}", 5000)

    async def _history(self, run_id: str) -> None:
        events: list[dict[str, Any]] = []
        async for batch in self.client.telemetry(run_id, follow=False):
            events.extend(json.loads(e.json) for e in batch.events)
            await asyncio.sleep(0)
        self.compare.set_history(run_id, events)

    async def _stream(self, run_id: str, view: RunView) -> None:
        try:
            await self._follow(run_id, view)
        except DaemonError as exc:
            if exc.code != grpc.StatusCode.UNAVAILABLE:
                raise
            self.connection_lost = True  # _poll follows it again from the last event the view has

    async def _follow(self, run_id: str, view: RunView) -> None:
        async for batch in self.client.telemetry(run_id, from_seq=view.curves.last_seq + 1, follow=True):
            events = [json.loads(e.json) for e in batch.events]
            for start in range(0, len(events), CHUNK):
                view.add_events(events[start:start + CHUNK])
                await asyncio.sleep(0)

    # -- views -----------------------------------------------------------------------------------
    def open_run(self, run_id: str) -> RunView:
        view = self.run_views.get(run_id)
        if view is None:
            info = self.runs.runs.get(run_id)
            view = RunView(run_id, info.run_dir if info else None)
            self.run_views[run_id] = view
            title = f"{info.worker} {info.algorithm} …{run_id[-6:]}" if info else run_id[-18:]
            self.tabs.addTab(view, title)
            self.tabs.setTabToolTip(self.tabs.count() - 1, run_id)
            self.streams[run_id] = self.spawn(self._stream(run_id, view))
        self.tabs.setCurrentWidget(view)
        return view

    def fork_run(self, run_id: str) -> None:
        info = self.runs.runs.get(run_id)
        if info is None or not info.run_dir:
            return
        self.new_run.fork(Path(info.run_dir))
        self.tabs.setCurrentWidget(self.new_run)

    def _close_tab(self, index: int) -> None:
        view = self.tabs.widget(index)
        if isinstance(view, RunView):
            view.close_view()
            self.run_views.pop(view.run_id, None)
            stream = self.streams.pop(view.run_id, None)
            if stream is not None:
                stream.cancel()
            self.tabs.removeTab(index)
            view.deleteLater()
