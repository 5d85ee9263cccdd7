"""Cancel, pause and resume inside a worker, driven by POSIX signals.

SIGTERM/SIGINT ask for a clean stop; SIGUSR1 pauses and SIGUSR2 resumes.
Signal handlers only set flags; the training loop calls
:meth:`RunControl.checkpoint` at safe points (between episodes or
iterations), which blocks while paused and raises :class:`RunCancelled`
once a stop was asked for.

A run that stops moving must not hang for ever. The runtime reports
progress to a :class:`ProgressTracker` (one tick per completed iteration)
and registers the threads it depends on; a :class:`RunWatchdog` thread
checks both and ends a run whose thread died or whose progress stalled, and
ends a cancelled run that cannot reach a safe point.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
import weakref
from typing import Any, Callable

from mosaic.workerkit.telemetry import TelemetryEmitter

#: Worker exit codes (documented in docs/worker-contract.md).
EXIT_COMPLETED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_CANCELLED = 3


class RunCancelled(Exception):
    """Raised at a safe point after a stop was requested."""


class ProgressTracker:
    """How far a run has got, and whether it still moves.

    The runtime calls :meth:`start` with its stall bound when training
    begins, :meth:`tick` after each completed iteration, and
    :meth:`watch_thread` for background threads it cannot live without.
    :meth:`problem` names what is wrong (a dead thread, no progress within
    the bound); :meth:`heartbeat_fields` tells supervisors the same.
    Thread-safe; the clock stops while the run is paused.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.iterations = 0
        self.stall_timeout_s: float | None = None
        self.bound_source = ""
        self._last = clock()
        self._last_wall = time.time()
        self._held = False
        self._longest_iteration_s = 0.0
        self._threads: list[tuple[str, threading.Thread]] = []
        self._stopped_at: float | None = None
        self._wind_down_bound: float | None = None

    def start(self, stall_timeout_s: float | None, source: str = "") -> None:
        """Expect a tick at least every ``stall_timeout_s`` seconds from now (None: no bound)."""
        with self._lock:
            self._stopped_at = self._wind_down_bound = None
            self.stall_timeout_s = stall_timeout_s
            self.bound_source = source
            self._last, self._last_wall = self._clock(), time.time()

    def stop(self) -> None:
        """Training is over (final checkpoint, shutdown, or an error on its way out).

        No more ticks are expected, and the watched threads may now end. The
        stall bound still covers the way out: a run whose shutdown outlasts it
        (a library waiting for ever on a frozen process) is stalled too.
        """
        with self._lock:
            if self._stopped_at is None:
                self._stopped_at = self._clock()
                self._wind_down_bound = None if self._held else self.stall_timeout_s
            self.stall_timeout_s = None
            self._threads.clear()

    def tick(self, iterations: int | None = None) -> None:
        """An iteration completed: the stall clock starts again."""
        with self._lock:
            now = self._clock()
            self._longest_iteration_s = max(self._longest_iteration_s, now - self._last)
            self.iterations = self.iterations + 1 if iterations is None else iterations
            self._last, self._last_wall = now, time.time()

    def hold(self) -> None:
        """Paused: no progress is expected until :meth:`release`."""
        with self._lock:
            self._held = True

    def release(self) -> None:
        """Resumed: the stall clock starts again from now."""
        with self._lock:
            self._held = False
            self._last, self._last_wall = self._clock(), time.time()

    def watch_thread(self, thread: threading.Thread, role: str = "") -> None:
        """The run depends on ``thread``: its death fails the run."""
        with self._lock:
            self._threads.append((role or thread.name, thread))

    @property
    def since_progress_s(self) -> float:
        return self._clock() - self._last

    @property
    def longest_iteration_s(self) -> float:
        return self._longest_iteration_s

    def stalled(self) -> float | None:
        """The bound that was exceeded, if the run stalled."""
        with self._lock:
            bound, held, since = self.stall_timeout_s, self._held, self._clock() - self._last
        return bound if bound is not None and not held and since > bound else None

    def shutdown_stalled(self) -> tuple[float, float] | None:
        """``(seconds since training ended, bound)`` if the way out outlasted the stall bound."""
        with self._lock:
            if self._stopped_at is None or self._wind_down_bound is None:
                return None
            since = self._clock() - self._stopped_at
            return (since, self._wind_down_bound) if since > self._wind_down_bound else None

    def dead_threads(self) -> list[tuple[str, threading.Thread]]:
        with self._lock:
            return [(role, t) for role, t in self._threads if t.ident is not None and not t.is_alive()]

    def problem(self) -> tuple[str, str] | None:
        """``(error_type, message)`` when the run cannot go on, else None."""
        for role, thread in self.dead_threads():
            cause = thread_failure(thread)
            return "ThreadDied", (f"{role} (thread {thread.name!r}) died"
                                  + (f": {cause[0]}" if cause else " without raising")
                                  + "; training cannot go on without it")
        bound = self.stalled()
        if bound is not None:
            where = f" ({self.bound_source})" if self.bound_source else ""
            return "StalledRun", (f"no training progress for {self.since_progress_s:.1f} s: the stall bound"
                                  f"{where} is {bound:g} s; {self.iterations} iterations "
                                  "completed before it stopped")
        shutdown = self.shutdown_stalled()
        if shutdown is not None:
            where = f" ({self.bound_source})" if self.bound_source else ""
            return "StalledRun", (f"training ended {shutdown[0]:.1f} s ago but the run has not finished "
                                  f"shutting down (final checkpoint, the library's cleanup): the stall bound"
                                  f"{where} is {shutdown[1]:g} s; {self.iterations} iterations completed")
        return None

    def heartbeat_fields(self) -> dict[str, Any]:
        """What a heartbeat says about progress (docs/telemetry.md)."""
        with self._lock:
            fields: dict[str, Any] = {"iterations": self.iterations, "last_progress_ts": self._last_wall,
                                      "since_progress_s": round(self._clock() - self._last, 3),
                                      "stall_timeout_s": self.stall_timeout_s}
        problem = self.problem()
        fields["stalled"] = problem is not None
        if problem is not None:
            fields["stall_reason"] = f"{problem[0]}: {problem[1]}"
        return fields


#: Exceptions that ended threads: (summary, traceback) by thread.
_thread_failures: "weakref.WeakKeyDictionary[threading.Thread, tuple[str, str]]" = weakref.WeakKeyDictionary()
_hook_lock = threading.Lock()


def thread_failure(thread: threading.Thread) -> tuple[str, str] | None:
    """``(summary, traceback)`` of the exception that ended ``thread``, if one did (and was recorded)."""
    return _thread_failures.get(thread)


def record_thread_failures() -> None:
    """Remember why threads died (``threading.excepthook``), so a failure can name the cause."""
    with _hook_lock:
        previous = threading.excepthook
        if getattr(previous, "_mosaic_records", False):
            return

        def hook(args: threading.ExceptHookArgs) -> None:
            if args.thread is not None and args.exc_type is not SystemExit:
                tb = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
                text = str(args.exc_value or "")
                summary = f"{args.exc_type.__name__}: {text}" if text else args.exc_type.__name__
                _thread_failures[args.thread] = (summary, tb)
            previous(args)

        hook._mosaic_records = True  # type: ignore[attr-defined]
        threading.excepthook = hook


def thread_stacks(*threads: threading.Thread | None) -> str:
    """Where threads are right now (the main thread by default): the telling part of a stall."""
    frames = sys._current_frames()
    wanted = [t for t in threads if t is not None] or [threading.main_thread()]
    parts = []
    for thread in wanted:
        frame = frames.get(thread.ident or -1)
        if frame is not None:
            parts.append(f"thread {thread.name!r}:\n" + "".join(traceback.format_stack(frame)))
    return "\n".join(parts)


class RunControl:
    def __init__(self, emitter: TelemetryEmitter | None = None,
                 progress: ProgressTracker | None = None) -> None:
        self.emitter = emitter
        self.progress = progress
        self._cancel = threading.Event()
        self._paused = threading.Event()
        self._wake = threading.Event()
        self.cancel_reason = ""
        self.cancel_requested_at: float | None = None
        #: The runtime reached a safe point after the cancel and is stopping on its own.
        self.cancel_honoured = False
        self.handles_signals = False
        self._abort_hooks: list[Callable[[], None]] = []

    # -- requests (signal handlers, tests, a GUI thread) ---------------------
    def request_cancel(self, reason: str = "cancel requested") -> None:
        self.cancel_reason = self.cancel_reason or reason
        if self.cancel_requested_at is None:
            self.cancel_requested_at = time.monotonic()
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

    def on_abort(self, hook: Callable[[], None]) -> None:
        """Best-effort cleanup to run if the process must end abruptly (stall, dead thread)."""
        self._abort_hooks.append(hook)

    def run_abort_hooks(self, timeout_s: float = 5.0) -> None:
        """Run the cleanup hooks in a helper thread, giving up after ``timeout_s``."""
        def run_all() -> None:
            for hook in self._abort_hooks:
                try:
                    hook()
                except Exception:  # best effort: the process is ending anyway
                    pass

        helper = threading.Thread(target=run_all, name="mosaic-abort-cleanup", daemon=True)
        helper.start()
        helper.join(timeout_s)

    # -- the training loop's side ----------------------------------------------
    def checkpoint(self, on_pause: Callable[[], None] | None = None) -> None:
        """Honour pending requests: block while paused, raise if cancelled."""
        if self._paused.is_set() and not self._cancel.is_set():
            if on_pause is not None:
                on_pause()
            if self.progress:
                self.progress.hold()
            if self.emitter:
                self.emitter.emit("paused")
            while self._paused.is_set() and not self._cancel.is_set():
                self._wake.wait(0.2)
                self._wake.clear()
            if self.progress:
                self.progress.release()
            if not self._cancel.is_set() and self.emitter:
                self.emitter.emit("resumed")
        if self._cancel.is_set():
            self.cancel_honoured = True
            raise RunCancelled(self.cancel_reason)


class Heartbeat:
    """Emits ``heartbeat`` events from a daemon thread so supervisors see liveness.

    With a :class:`ProgressTracker` each heartbeat also says whether training
    moves, so a supervisor can tell "alive" from "alive and stuck".
    """

    def __init__(self, emitter: TelemetryEmitter, interval_s: float,
                 progress: ProgressTracker | None = None) -> None:
        self.emitter = emitter
        self.interval_s = interval_s
        self.progress = progress
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mosaic-heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            if self.emitter.next_seq > 0:  # `run_started` always comes first
                self.emitter.heartbeat(**(self.progress.heartbeat_fields() if self.progress else {}))

    def __enter__(self) -> "Heartbeat":
        if self.interval_s > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)


#: A cancelled run gets this long to reach a safe point (or three times its
#: longest iteration so far, up to CANCEL_WAIT_MAX_S) before the watchdog ends
#: it; launchers kill after 30 s.
CANCEL_WAIT_S = 10.0
CANCEL_WAIT_MAX_S = 20.0
#: A cancelled run that reached its safe point must have ended this long after
#: the request (final checkpoint and cleanup included), or the watchdog ends
#: it where it is: a library's cleanup can wait for ever on a frozen process.
CANCEL_DEADLINE_S = 25.0


class RunWatchdog:
    """A thread that ends a run which cannot end itself.

    Every ``period_s`` it asks the :class:`ProgressTracker` for a problem (a
    registered thread died, no progress within the bound) and calls
    ``on_failure(error_type, message)``; and when a cancel was asked for but
    the runtime has not reached a safe point in time (stuck inside the
    library), or reached it but its cleanup has not ended by
    ``cancel_deadline_s`` after the request, it calls
    ``on_stuck_cancel(message)``. Either callback is expected to end the
    process; the watchdog fires at most once.
    """

    def __init__(self, progress: ProgressTracker, control: RunControl,
                 on_failure: Callable[[str, str], None], on_stuck_cancel: Callable[[str], None],
                 period_s: float = 0.5, cancel_wait_s: float = CANCEL_WAIT_S,
                 cancel_deadline_s: float = CANCEL_DEADLINE_S) -> None:
        self.progress = progress
        self.control = control
        self.on_failure = on_failure
        self.on_stuck_cancel = on_stuck_cancel
        self.period_s = period_s
        self.cancel_wait_s = cancel_wait_s
        self.cancel_deadline_s = cancel_deadline_s
        self.fired = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="mosaic-watchdog", daemon=True)

    def cancel_wait(self) -> float:
        return min(CANCEL_WAIT_MAX_S, max(self.cancel_wait_s, 3 * self.progress.longest_iteration_s))

    def check(self) -> bool:
        """One look; True if it fired."""
        control = self.control
        if control.cancel_requested:
            waited = time.monotonic() - (control.cancel_requested_at or time.monotonic())
            if not control.cancel_honoured and waited > self.cancel_wait():
                self.fired = True
                self.on_stuck_cancel(f"{control.cancel_reason}; the run did not reach a safe point within "
                                     f"{waited:.1f} s and was stopped where it was (no final checkpoint)")
                return True
            if control.cancel_honoured and waited > self.cancel_deadline_s:
                self.fired = True
                self.on_stuck_cancel(f"{control.cancel_reason}; the run reached a safe point but its cleanup "
                                     f"(final checkpoint, the library's shutdown) had not ended {waited:.1f} s "
                                     "after the request, and it was stopped where it was")
                return True
        problem = None if control.cancel_requested else self.progress.problem()
        if problem is not None:
            self.fired = True
            self.on_failure(*problem)
            return True
        return False

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                if self.check():
                    return
            except Exception as exc:  # the watchdog must outlive its own bugs
                print(f"mosaic watchdog: check failed: {exc!r}", file=sys.stderr)

    def __enter__(self) -> "RunWatchdog":
        record_thread_failures()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2)
