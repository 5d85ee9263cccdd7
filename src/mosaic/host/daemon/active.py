"""What the daemon keeps in memory of a run whose worker is starting, running or paused."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from mosaic.host.daemon.hub import TelemetryHub
from mosaic.host.daemon.process import SpoolReader, WorkerHandle
from mosaic.host.daemon.states import RunState
from mosaic.host.recorder import RunRecorder
from mosaic.runs import RunDir


@dataclass
class ActiveRun:
    """In-memory state of a run whose worker is starting, running or paused."""

    run_id: str
    run: RunDir
    hub: TelemetryHub
    state: RunState
    cpus: float
    heartbeat_timeout_s: float
    recorder: RunRecorder | None = None
    reader: SpoolReader | None = None
    handle: WorkerHandle | None = None
    started_mono: float = field(default_factory=time.monotonic)
    last_activity: float = field(default_factory=time.monotonic)
    cancel_requested: bool = False
    cancel_reason: str = ""
    pause_requested: bool = False
    watchdog_fired: bool = False
    progress: dict[str, Any] | None = None  # the progress fields of the newest heartbeat
    stalled_since: float | None = None  # when a heartbeat first said `stalled`
    ending: bool = False  # _finish is under way
    kill_timer: asyncio.TimerHandle | None = None
    settling: bool = False  # the worker is gone; its run is being ended
    finished: asyncio.Event = field(default_factory=asyncio.Event)
