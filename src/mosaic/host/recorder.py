"""The telemetry proxy's storage half: worker stdout bytes → run folder.

:class:`LineSplitter` cuts a byte stream into bounded lines (a worker that
prints megabytes without a newline cannot exhaust memory).
:class:`RunRecorder` parses each line, stamps it into the run's own
sequence, appends it to ``telemetry.jsonl`` and keeps ``analytics.json``
current. ``mosaic run`` and the daemon both use it.
"""

from __future__ import annotations

import signal
import time
from typing import Any, Callable, Iterable, Iterator

from mosaic.runs import ManifestFields, RunDir
from mosaic.workerkit.telemetry import MAX_LINE_BYTES, SCHEMA_VERSION, TERMINAL_TYPES, encode_event, parse_line

EventCallback = Callable[[dict[str, Any]], None]


class LineSplitter:
    """Incremental splitter of a byte stream into lines of bounded length.

    An over-long line is delivered once, cut at ``max_bytes + 1`` bytes (so
    the parser sees it is too long), and the rest of it up to the next
    newline is dropped.
    """

    def __init__(self, max_bytes: int = MAX_LINE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._buf = bytearray()
        self._skipping = 0  # bytes of an over-long line being discarded

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        if not self._skipping:  # fast path: no line in this chunk is too long
            parts = chunk.split(b"\n")
            if (len(self._buf) + len(parts[0]) <= self.max_bytes
                    and max(map(len, parts)) <= self.max_bytes):
                if self._buf:
                    parts[0] = bytes(self._buf) + parts[0]
                    self._buf.clear()
                self._buf += parts.pop()
                return iter(parts)
        return self._feed_slow(chunk)

    def _feed_slow(self, chunk: bytes) -> Iterator[bytes]:
        start = 0
        while start < len(chunk):
            nl = chunk.find(b"\n", start)
            end = len(chunk) if nl < 0 else nl
            if self._skipping:
                self._skipping += end - start
            else:
                room = self.max_bytes + 1 - len(self._buf)
                piece = chunk[start:end]
                if len(piece) > room:
                    self._buf += piece[:room]
                    self._skipping = len(piece) - room
                    yield bytes(self._buf)
                    self._buf.clear()
                else:
                    self._buf += piece
            if nl < 0:
                return
            if self._skipping:
                self._skipping = 0
            else:
                yield bytes(self._buf)
                self._buf.clear()
            start = nl + 1

    def flush(self) -> Iterator[bytes]:
        """The final line if the stream ended without a newline."""
        if self._buf and not self._skipping:
            yield bytes(self._buf)
        self._buf.clear()
        self._skipping = 0


def signal_name(returncode: int) -> str | None:
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


class RunRecorder:
    """Stores one run's telemetry and keeps its manifest in step.

    The stored stream has its own strictly increasing ``seq``; a worker's
    own number is kept as ``worker_seq`` where the two differ (after a
    garbage line was stored as a ``log`` event, for instance).
    """

    def __init__(self, run: RunDir, run_id: str | None = None,
                 on_event: EventCallback | None = None,
                 parse: Callable[[bytes | str], dict[str, Any]] = parse_line) -> None:
        self.run = run
        self.run_id = run_id or run.run_id
        self.on_event = on_event
        self.parse = parse  # same contract as parse_line (the daemon passes a faster one)
        self.seq = 0
        self.last_type: str | None = None
        self.terminal: dict[str, Any] | None = None
        self.last_line = ""
        self._pending: list[bytes] | None = None  # inside feed_lines: writes wait here
        self._fh = run.telemetry_path.open("ab", buffering=0)
        # Resume numbering after events already stored (a re-attached run).
        for event in run.iter_events():
            self.seq = max(self.seq, int(event.get("seq", -1)) + 1)

    def close(self) -> None:
        try:
            self._fh.close()
        except OSError:  # its buffered tail could not be written (a full disk): the run has already failed
            pass

    def __enter__(self) -> "RunRecorder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def feed_lines(self, lines: Iterable[bytes]) -> list[tuple[dict[str, Any], str]]:
        """Store many lines with a single write; returns each event with its stored text.

        The daemon's hot path: one write per chunk of worker output instead
        of one per event.
        """
        out = []
        self._pending = []
        try:
            for line in lines:
                event = self.feed_line(line)
                out.append((event, self.last_line))
        finally:
            pending, self._pending = self._pending, None
            if pending:
                self._fh.write(b"".join(pending))
        return out

    def feed_line(self, line: bytes | str) -> dict[str, Any]:
        event = self.parse(line)
        if isinstance(line, bytes) and self._storable_as_is(event, line):
            return self._store(event, line.decode("utf-8"))
        return self.record(event)

    def _storable_as_is(self, event: dict[str, Any], line: bytes) -> bool:
        """Is the worker's line already exactly what we would store (the hot path)?

        True for a well-formed event with this run's id, the next seq and a
        timestamp, printed as one compact strict-JSON object: re-encoding it
        would change nothing that matters, and costs more than parsing.
        """
        return (event.get("seq") == self.seq and type(event.get("seq")) is int
                and event.get("run_id") == self.run_id and "v" in event
                and type(event.get("ts")) in (int, float)
                and line[:1] == b"{" and line[-1:] == b"}"
                and b"NaN" not in line and b"Infinity" not in line)

    def record(self, event: dict[str, Any]) -> dict[str, Any]:
        worker_seq = event.get("seq")
        event["v"] = event.get("v", SCHEMA_VERSION)
        if event.get("run_id") != self.run_id:
            if "run_id" in event:
                event["worker_run_id"] = event["run_id"]
            event["run_id"] = self.run_id
        if worker_seq != self.seq and isinstance(worker_seq, int):
            event["worker_seq"] = worker_seq
        event["seq"] = self.seq
        if not isinstance(event.get("ts"), (int, float)):
            event["ts"] = time.time()
        return self._store(event, encode_event(event))

    def _store(self, event: dict[str, Any], line: str) -> dict[str, Any]:
        self.last_line = line  # the daemon forwards the stored text as is
        data = (line + "\n").encode("utf-8")
        if self._pending is None:
            self._fh.write(data)
        else:
            self._pending.append(data)
        self.seq += 1
        self.last_type = event["type"]
        self._update_manifest(event)
        if self.on_event is not None:
            self.on_event(event)
        return event

    def _update_manifest(self, event: dict[str, Any]) -> None:
        if event["type"] in TERMINAL_TYPES:
            self.terminal = event
        fields = ManifestFields.for_event(event, self.run.read_manifest)
        if fields:
            self.run.update_manifest(**fields)

    def finish(self, returncode: int, stderr_tail: str = "") -> dict[str, Any]:
        """Record how the process ended; synthesise ``run_failed`` if it died silently."""
        sig = signal_name(returncode)
        if self.terminal is None or (returncode != 0 and self.terminal["type"] == "run_completed"):
            reason = f"worker killed by {sig}" if sig else f"worker exited with code {returncode}"
            if returncode == 0:
                reason = "worker exited without a final event"
            if stderr_tail:
                reason += f"; last stderr: {stderr_tail.strip()[-500:]}"
            self.record({"type": "run_failed", "error_type": "WorkerExited", "message": reason,
                         "exit_code": returncode, "signal": sig})
        self.run.update_manifest(**ManifestFields.exited(returncode, sig))
        return self.terminal or {}
