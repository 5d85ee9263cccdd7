"""What a run's files on disk say, for a daemon that recovers runs or ends them: stored events,
the next sequence number, a torn last line, FastLane segments left behind."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from mosaic.runs import RunDir

log = logging.getLogger("mosaic.host.daemon")


def release_fastlane(run: RunDir) -> None:
    """Unlink the run's FastLane segments (a killed worker cannot), keeping the last frames."""
    try:
        from mosaic.fastlane.publisher import finish_run

        removed = finish_run(run.root, run.root.name)
    except Exception as exc:  # cleanup must never keep a run from ending
        log.warning("run %s: could not remove its FastLane segments: %s", run.root.name, exc)
        return
    if removed:
        log.info("run %s: removed FastLane segments %s", run.root.name, ", ".join(removed))


def count_lines(path: os.PathLike[str] | str) -> int:
    try:
        with open(path, "rb") as fh:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def next_seq_on_disk(path: os.PathLike[str] | str) -> int:
    """One past the last stored seq, from the file's tail (cheap for long runs)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - (1 << 16)))
            lines = fh.read().splitlines()
    except FileNotFoundError:
        return 0
    for line in reversed(lines):
        try:
            return int(json.loads(line)["seq"]) + 1
        except (ValueError, KeyError, TypeError):
            continue
    return 0


def count_daemon_events(run: RunDir) -> int:
    """Events the daemon wrote itself (they have no line in the worker's spool)."""
    return sum(1 for e in run.iter_events() if e.get("origin") == "daemon")


def stored_terminal(run: RunDir) -> dict[str, Any] | None:
    for kind in ("run_completed", "run_failed", "run_cancelled"):
        event = run.last_event(kind)
        if event is not None:
            return event
    return None


def drop_torn_tail(path: os.PathLike[str] | str) -> None:
    """Cut a half-written last line (the old daemon died mid-write) before appending."""
    try:
        with open(path, "rb+") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            if size == 0:
                return
            fh.seek(max(0, size - (1 << 20)))
            tail = fh.read()
            if tail.endswith(b"\n"):
                return
            cut = tail.rfind(b"\n")
            fh.truncate(size - len(tail) + cut + 1 if cut >= 0 else max(0, size - len(tail)))
    except FileNotFoundError:
        return
