"""JSONL telemetry: one JSON object per stdout line, versioned.

Workers *emit* with :class:`TelemetryEmitter`; MOSAIC *parses* with
:func:`parse_line`. The protocol is documented in ``docs/telemetry.md`` and
described as JSON Schema in :mod:`mosaic.workerkit.telemetry_schema`.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
import traceback as _traceback
from typing import IO, Any, Callable, Mapping

SCHEMA_VERSION = 1

#: Lifecycle and data event types of schema version 1.
EVENT_TYPES = (
    "run_started",
    "metrics",
    "episode",
    "checkpoint_saved",
    "heartbeat",
    "log",
    "paused",
    "resumed",
    "run_completed",
    "run_failed",
    "run_cancelled",
)
TERMINAL_TYPES = frozenset({"run_completed", "run_failed", "run_cancelled"})
ENVELOPE_FIELDS = ("v", "type", "run_id", "seq", "ts")

#: Lines longer than this (bytes) are cut and flagged rather than parsed.
MAX_LINE_BYTES = 1 << 20


# --------------------------------------------------------------------------
# Emitting
# --------------------------------------------------------------------------


def _to_builtin(value: Any) -> Any:
    """`json` fallback for numpy scalars/arrays and other odd values.

    Duck-typed so the core never imports numpy.
    """
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return repr(value)


def _sanitize(value: Any) -> Any:
    """Make a payload strict-JSON safe: NaN/inf become null, numpy becomes builtin."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): _sanitize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_sanitize(v) for v in value]
    return _sanitize(_to_builtin(value))


def encode_event(event: Mapping[str, Any]) -> str:
    """Serialise one event to a single strict-JSON line (no trailing newline)."""
    try:
        return json.dumps(event, allow_nan=False, default=_to_builtin, separators=(",", ":"))
    except (ValueError, TypeError, RecursionError):
        return json.dumps(_sanitize(event), allow_nan=False, separators=(",", ":"))


class TelemetryEmitter:
    """Thread-safe writer of telemetry events for one run.

    Every line is flushed at once so a reader sees events live, and a payload
    that cannot be encoded degrades to a ``log`` event instead of crashing the
    worker. A closed stdout (reader gone) silences the emitter rather than
    killing training. A run ends with one terminal event: once one was
    written, later events (say, from a watchdog or a heartbeat racing the
    main thread) are dropped.
    """

    def __init__(
        self,
        run_id: str,
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.time,
        on_run_started: Callable[[], None] | None = None,
    ) -> None:
        self.run_id = run_id
        self._stream = stream if stream is not None else sys.stdout
        self._clock = clock
        self._lock = threading.Lock()
        self._seq = 0
        self._closed = False
        self.terminal: str | None = None
        #: Called once ``run_started`` is written: the run is set up.
        self._on_run_started = on_run_started

    @property
    def next_seq(self) -> int:
        return self._seq

    def emit(self, type: str, **fields: Any) -> dict[str, Any] | None:
        """Write one event; returns the event as written (``None`` if silenced)."""
        with self._lock:
            if self._closed or self.terminal is not None:
                return None
            event = {"v": SCHEMA_VERSION, "type": type, "run_id": self.run_id,
                     "seq": self._seq, "ts": self._clock()}
            for key, value in fields.items():
                if key not in event:
                    event[key] = value
            try:
                line = encode_event(event)
            except Exception as exc:  # last resort: never crash the worker
                event = {"v": SCHEMA_VERSION, "type": "log", "run_id": self.run_id,
                         "seq": self._seq, "ts": self._clock(), "level": "error",
                         "message": f"could not encode {type!r} event: {exc!r}"}
                line = json.dumps(event)
            try:
                self._stream.write(line + "\n")
                self._stream.flush()
            except (BrokenPipeError, ValueError, OSError):
                self._closed = True
                return None
            self._seq += 1
            if type in TERMINAL_TYPES:
                self.terminal = type
            return event

    # Convenience wrappers keep worker code readable and field names uniform.
    def run_started(self, *, worker: str, config_digest: str, versions: Mapping[str, str],
                    resources: Mapping[str, Any], **extra: Any) -> dict | None:
        event = self.emit("run_started", worker=worker, config_digest=config_digest,
                          versions=dict(versions), resources=dict(resources), **extra)
        if self._on_run_started is not None:
            self._on_run_started()
        return event

    def metrics(self, *, iteration: int, timesteps_total: int, **values: Any) -> dict | None:
        return self.emit("metrics", iteration=iteration, timesteps_total=timesteps_total, **values)

    def episode(self, *, episode: int, length: int, returns: Mapping[str, float],
                **extra: Any) -> dict | None:
        return self.emit("episode", episode=episode, length=length, returns=dict(returns), **extra)

    def checkpoint_saved(self, *, path: str, iteration: int, **extra: Any) -> dict | None:
        return self.emit("checkpoint_saved", path=path, iteration=iteration, **extra)

    def heartbeat(self, **extra: Any) -> dict | None:
        return self.emit("heartbeat", **extra)

    def log(self, message: str, level: str = "info", **extra: Any) -> dict | None:
        return self.emit("log", level=level, message=message, **extra)

    def run_completed(self, summary: Mapping[str, Any] | None = None, **extra: Any) -> dict | None:
        return self.emit("run_completed", summary=dict(summary or {}), **extra)

    def run_failed(self, error: BaseException) -> dict | None:
        tb = "".join(_traceback.format_exception(type(error), error, error.__traceback__))
        return self.failure(type(error).__name__, str(error), tb)

    def failure(self, error_type: str, message: str, traceback: str = "", **extra: Any) -> dict | None:
        """``run_failed`` for a failure that is not an exception in hand (a stall, a dead thread)."""
        return self.emit("run_failed", error_type=error_type, message=message, traceback=traceback, **extra)

    def run_cancelled(self, reason: str = "", **extra: Any) -> dict | None:
        return self.emit("run_cancelled", reason=reason, **extra)


# --------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------

# The C scanner behind json.loads, minus its per-call overhead: parsing is
# the telemetry proxy's hot path.
_scan_once = json.JSONDecoder().scan_once


def _loads(text: str) -> Any:
    try:
        value, end = _scan_once(text, 0)
    except StopIteration:  # leading whitespace or not JSON at all
        return json.loads(text)
    if end != len(text) and text[end:].strip():
        raise ValueError("extra data after JSON value")
    return value


def parse_line(line: bytes | str, max_bytes: int = MAX_LINE_BYTES) -> dict[str, Any]:
    """Turn one stdout line into an event dict; never raises.

    * a JSON object with a string ``type`` passes through unchanged, whatever
      its type or version (so newer workers still flow through older cores);
    * anything else (plain prints, binary, other JSON) becomes a ``log``
      event whose ``message`` is the text, flagged ``raw``;
    * a line longer than ``max_bytes`` is cut to that size and flagged
      ``truncated`` with its ``original_bytes``.

    Events produced here may lack ``run_id``/``seq``/``ts``; the recorder
    that stores them fills those in.
    """
    size = len(line)
    if size > max_bytes:
        text = line[:max_bytes]
        if isinstance(text, bytes):
            text = text.decode("utf-8", "replace")
        return {"v": SCHEMA_VERSION, "type": "log", "level": "warning", "raw": True,
                "truncated": True, "original_bytes": size, "message": text}
    try:
        event = _loads(line.decode("utf-8") if isinstance(line, bytes) else line)
    except (ValueError, UnicodeDecodeError, RecursionError):
        event = None
    if type(event) is dict and type(event.get("type")) is str:
        return event
    if isinstance(line, bytes):
        text = line.decode("utf-8", "replace")
    else:
        text = line
    return {"v": SCHEMA_VERSION, "type": "log", "level": "info", "raw": True,
            "message": text.rstrip("\r\n")}


def is_terminal(event: Mapping[str, Any]) -> bool:
    return event.get("type") in TERMINAL_TYPES
