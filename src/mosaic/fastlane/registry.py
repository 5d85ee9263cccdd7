"""Which streams a run has: the registry file ``<run>/fastlane.json`` plus a scan of ``/dev/shm``.

Writers (possibly several processes: one per env runner) record their
stream under a file lock; viewers merge that with the segments actually
present, so a stream is found even when the registry is not writable (an env
runner on another node) and a finished stream still points at its saved
last frame (``<run>/fastlane/<stream>.png``).
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from mosaic.fastlane.shm import list_segments, parse_segment_name, segment_path
from mosaic.runs import write_json_atomic

REGISTRY_FILE = "fastlane.json"
LOCK_FILE = ".fastlane.lock"
FRAMES_DIR = "fastlane"
REGISTRY_VERSION = 1


def registry_path(run_dir: Path | str) -> Path:
    return Path(run_dir) / REGISTRY_FILE


def last_frame_path(run_dir: Path | str, stream: str) -> Path:
    """Where a stream's last frame is kept once its segment is gone."""
    return Path(run_dir) / FRAMES_DIR / f"{stream}.png"


@contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    with open(run_dir / LOCK_FILE, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_registry(run_dir: Path | str) -> dict[str, Any]:
    try:
        data = json.loads(registry_path(run_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"version": REGISTRY_VERSION, "streams": {}}
    if not isinstance(data, dict) or not isinstance(data.get("streams"), dict):
        return {"version": REGISTRY_VERSION, "streams": {}}
    return data


def update_stream(run_dir: Path | str, stream: str, **fields: Any) -> None:
    """Merge ``fields`` into the stream's registry entry (atomic, safe across processes)."""
    run_dir = Path(run_dir)
    with _locked(run_dir):
        data = read_registry(run_dir)
        entry = data["streams"].setdefault(stream, {})
        entry.update(fields, updated=time.time())
        write_json_atomic(registry_path(run_dir), data)


@dataclass(frozen=True)
class StreamInfo:
    """One stream of a run as a viewer sees it."""

    name: str
    segment: str
    live: bool  # its segment exists now
    last_frame: Path | None  # saved PNG of a finished stream, if any
    entry: dict[str, Any]


def discover(run_dir: Path | str | None, run_id: str) -> list[StreamInfo]:
    """Every stream of a run, live or finished, sorted by name."""
    entries: dict[str, dict[str, Any]] = {}
    if run_dir is not None:
        entries = {k: v for k, v in read_registry(run_dir)["streams"].items() if isinstance(v, dict)}
    segments = {parse_segment_name(n)[1]: n for n in list_segments(run_id)}
    out = []
    for name in sorted(set(entries) | set(segments)):
        entry = entries.get(name, {})
        segment = segments.get(name) or entry.get("segment") or ""
        live = bool(segment) and segment_path(segment).exists()
        saved = last_frame_path(run_dir, name) if run_dir is not None else None
        out.append(StreamInfo(name, segment, live, saved if saved and saved.is_file() else None, entry))
    return out


def writable(run_dir: Path | str | None) -> bool:
    return run_dir is not None and os.path.isdir(run_dir) and os.access(run_dir, os.W_OK)
