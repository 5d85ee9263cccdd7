"""Cancel, pause and resume inside a worker, driven by POSIX signals.

SIGTERM/SIGINT ask for a clean stop; SIGUSR1 pauses and SIGUSR2 resumes.
Signal handlers only set flags; the training loop calls
:meth:`RunControl.checkpoint` at safe points (between episodes or
iterations), which blocks while paused and raises :class:`RunCancelled`
once a stop was asked for.
"""

from __future__ import annotations

import signal
import threading
from typing import Callable

from mosaic.telemetry import TelemetryEmitter

#: Worker exit codes (documented in docs/worker-contract.md).
EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 3


class RunCancelled(Exception):
    """Raised at a safe point after a stop was requested."""


class RunControl:
    def __init__(self, emitter: TelemetryEmitter | None = None) -> None:
        self.emitter = emitter
        self._cancel = threading.Event()
        self._paused = threading.Event()
        self._wake = threading.Event()
        self.cancel_reason = ""
        self.handles_signals = False

    # -- requests (signal handlers, tests, a GUI thread) ---------------------
    def request_cancel(self, reason: str = "cancel requested") -> None:
        self.cancel_reason = self.cancel_reason or reason
        self._cancel.set()
        self._wake.set()

    def request_pause(self) -> None:
        self._paused.set()

    def request_resume(self) -> None:
        self._paused.clear()
        self._wake.set()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel.is_set()

    def install_signal_handlers(self) -> None:
        self.handles_signals = True
        def on_stop(signum: int, _frame: object) -> None:
            self.request_cancel(f"received {signal.Signals(signum).name}")

        signal.signal(signal.SIGTERM, on_stop)
        signal.signal(signal.SIGINT, on_stop)
        signal.signal(signal.SIGUSR1, lambda *_: self.request_pause())
        signal.signal(signal.SIGUSR2, lambda *_: self.request_resume())

    # -- the training loop's side ----------------------------------------------
    def checkpoint(self, on_pause: Callable[[], None] | None = None) -> None:
        """Honour pending requests: block while paused, raise if cancelled."""
        if self._paused.is_set() and not self._cancel.is_set():
            if on_pause is not None:
                on_pause()
            if self.emitter:
                self.emitter.emit("paused")
            while self._paused.is_set() and not self._cancel.is_set():
                self._wake.wait(0.2)
                self._wake.clear()
            if not self._cancel.is_set() and self.emitter:
                self.emitter.emit("resumed")
        if self._cancel.is_set():
            raise RunCancelled(self.cancel_reason)


class Heartbeat:
    """Emits ``heartbeat`` events from a daemon thread so supervisors see liveness."""

    def __init__(self, emitter: TelemetryEmitter, interval_s: float) -> None:
        self.emitter = emitter
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mosaic-heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self.emitter.next_seq > 0:  # `run_started` always comes first
                self.emitter.heartbeat()

    def __enter__(self) -> "Heartbeat":
        if self.interval_s > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
