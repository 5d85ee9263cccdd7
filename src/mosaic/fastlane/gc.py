"""Removing segments nobody will write again: ``mosaic fastlane gc`` (and, later, the daemon).

A segment is garbage when its writer process is gone (checked by pid and
process start time, so a reused pid does not keep it alive), when the writer
closed it, or when the run it belongs to has finished. Segments written from
another host (a shared ``/dev/shm`` across containers) are left alone unless
forced, since their writers cannot be checked from here. The last frame is
kept in the run folder before a segment goes.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic.fastlane.ring import RingReader
from mosaic.fastlane.shm import (
    FastLaneError,
    SHM_DIR,
    list_segments,
    list_temp_files,
    parse_segment_name,
    unlink_segment,
)
from mosaic.pids import is_running
from mosaic.run_status import TERMINAL_STATES
from mosaic.runs import RunDir

FINISHED = tuple(state.manifest for state in TERMINAL_STATES)  # manifest spellings
CORRUPT_GRACE_S = 60.0


@dataclass
class SegmentStatus:
    """One segment as ``gc`` and ``mosaic fastlane ls`` see it."""

    name: str
    run_id: str
    stream: str
    size: int = 0
    pid: int = 0
    writer_alive: bool | None = None
    closed: bool = False
    geometry: str = ""
    frames: int = 0
    owner: dict[str, Any] = field(default_factory=dict)
    garbage_reason: str | None = None


def _run_finished(run_dir: str | None) -> bool:
    if not run_dir or not Path(run_dir).is_dir():
        return False
    return RunDir(Path(run_dir)).read_manifest().get("status") in FINISHED


def inspect(name: str, force: bool = False) -> SegmentStatus:
    run_id, stream = parse_segment_name(name) or ("?", "?")
    status = SegmentStatus(name, run_id, stream)
    try:
        st = os.stat(SHM_DIR / name)
        status.size = st.st_size
    except OSError:
        return status
    try:
        reader = RingReader(name)
    except FastLaneError as exc:
        if time.time() - st.st_mtime > CORRUPT_GRACE_S:
            status.garbage_reason = f"not a readable FastLane ring ({exc})"
        return status
    with reader:
        hd = reader.header
        status.pid, status.closed, status.owner = hd.writer_pid, reader.closed, hd.owner
        status.frames = reader.frames_written
        g = hd.geometry
        status.geometry = f"{g.height}x{g.width}x{g.channels} {g.dtype}"
    same_host = hd.owner.get("host") in (None, socket.gethostname())
    status.writer_alive = is_running(hd.writer_pid, hd.writer_start) if same_host else None
    if status.closed:
        status.garbage_reason = "closed by its writer"
    elif status.writer_alive is False:
        status.garbage_reason = f"writer {hd.writer_pid} is gone"
    elif _run_finished(hd.owner.get("run_dir")):
        status.garbage_reason = "its run has finished"
    elif status.writer_alive is None and force:
        status.garbage_reason = f"written from host {hd.owner.get('host')!r} (forced)"
    return status


def list_status(force: bool = False) -> list[SegmentStatus]:
    return [inspect(name, force) for name in list_segments()]


def collect_garbage(dry_run: bool = False, force: bool = False) -> list[SegmentStatus]:
    """Remove garbage segments (keeping their last frames); returns what was (or would be) removed."""
    from mosaic.fastlane.publisher import save_last_frame
    from mosaic.fastlane.registry import update_stream, writable

    removed = []
    for status in list_status(force):
        if status.garbage_reason is None:
            continue
        if not dry_run:
            run_dir = status.owner.get("run_dir")
            inode = None
            try:
                with RingReader(status.name) as reader:
                    inode = reader.inode
                    if writable(run_dir):
                        save_last_frame(run_dir, status.stream, reader.latest())
                        update_stream(run_dir, status.stream, state="closed")
            except (FastLaneError, OSError):
                pass
            if not unlink_segment(status.name, inode=inode):
                continue
        removed.append(status)
    for tmp in list_temp_files():
        pid = tmp.rsplit(".", 2)[-2]
        if pid.isdigit() and not is_running(int(pid)):
            if not dry_run:
                try:
                    os.unlink(SHM_DIR / tmp)
                except OSError:
                    continue
            removed.append(SegmentStatus(tmp, "?", "?", garbage_reason=f"half-built by dead process {pid}"))
    return removed
