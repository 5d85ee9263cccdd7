"""Shared-memory segments as files in ``/dev/shm``: naming, atomic creation, listing.

We use the tmpfs directly instead of :mod:`multiprocessing.shared_memory`:
its resource tracker unlinks (and warns about) segments that a process merely
attached to, and it cannot publish a segment atomically. Here a writer fills a
private temp file and ``rename``\\ s it over the stream's name, so readers see
either the old segment or a complete new one, and a restarted writer replaces
its predecessor in one step (readers notice by the changed inode).
"""

from __future__ import annotations

import mmap
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable


SHM_DIR = Path(os.environ.get("MOSAIC_SHM_DIR", "/dev/shm"))
PREFIX = "mosaic_fl."
STREAM_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class FastLaneError(Exception):
    """Shared memory is unavailable, full, or a segment is not a FastLane ring."""


class StreamNotFound(FastLaneError):
    """No segment of that name (yet)."""


def validate_stream_name(stream: str) -> str:
    if not isinstance(stream, str) or not STREAM_PATTERN.match(stream):
        raise ValueError(f"stream name {stream!r}: use 1-64 of [A-Za-z0-9_-]")
    return stream


def segment_name(run_id: str, stream: str) -> str:
    """``mosaic_fl.<run_id>.<stream>``: stream names hold no dots, so the last dot splits."""
    return f"{PREFIX}{run_id}.{validate_stream_name(stream)}"


def parse_segment_name(name: str) -> tuple[str, str] | None:
    """``(run_id, stream)`` of a FastLane segment name, else None."""
    if not name.startswith(PREFIX):
        return None
    run_id, sep, stream = name[len(PREFIX):].rpartition(".")
    return (run_id, stream) if sep and run_id and STREAM_PATTERN.match(stream) else None


def segment_path(name: str) -> Path:
    return SHM_DIR / name


def list_segments(run_id: str | None = None) -> list[str]:
    """FastLane segment names present now (optionally of one run), sorted."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return []
    out = []
    for name in names:
        parsed = parse_segment_name(name)
        if parsed and (run_id is None or parsed[0] == run_id):
            out.append(name)
    return sorted(out)


def list_temp_files() -> list[str]:
    """Half-built segments (``.mosaic_fl.<...>.<pid>.tmp``) left by a writer that died mid-create."""
    try:
        return sorted(n for n in os.listdir(SHM_DIR) if n.startswith("." + PREFIX) and n.endswith(".tmp"))
    except OSError:
        return []


@dataclass
class Segment:
    """An open, mapped segment; ``inode`` identifies this incarnation of the name."""

    name: str
    mm: mmap.mmap
    size: int
    inode: int

    def close(self) -> None:
        try:
            self.mm.close()
        except BufferError:  # a numpy view still alive somewhere: let GC unmap it
            pass


def create_segment(name: str, size: int, init: Callable[[mmap.mmap], None]) -> Segment:
    """Build a segment privately, let ``init(mm)`` fill its header, then publish it under ``name``.

    Space is reserved up front (``posix_fallocate``): a full ``/dev/shm`` is an
    error here rather than a SIGBUS in the middle of training.
    """
    if not SHM_DIR.is_dir():
        raise FastLaneError(f"{SHM_DIR} does not exist: FastLane needs POSIX shared memory (Linux)")
    tmp = SHM_DIR / f".{name}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            raise FastLaneError(f"cannot reserve {size} bytes in {SHM_DIR}: {exc}") from None
        mm = mmap.mmap(fd, size)
        inode = os.fstat(fd).st_ino
        init(mm)
        os.rename(tmp, segment_path(name))
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    finally:
        os.close(fd)
    return Segment(name, mm, size, inode)


def open_segment(name: str, writable: bool = False) -> Segment:
    """Map an existing segment (read-only unless asked)."""
    try:
        fd = os.open(segment_path(name), os.O_RDWR if writable else os.O_RDONLY)
    except FileNotFoundError:
        raise StreamNotFound(f"no FastLane segment {name!r} in {SHM_DIR}") from None
    try:
        st = os.fstat(fd)
        if st.st_size == 0:
            raise FastLaneError(f"segment {name!r} is empty")
        access = mmap.ACCESS_WRITE if writable else mmap.ACCESS_READ
        mm = mmap.mmap(fd, st.st_size, access=access)
    finally:
        os.close(fd)
    return Segment(name, mm, st.st_size, st.st_ino)


def current_inode(name: str) -> int | None:
    """The inode now behind ``name`` (None if gone): a change means a new writer."""
    try:
        return os.stat(segment_path(name)).st_ino
    except OSError:
        return None


def unlink_segment(name: str, inode: int | None = None) -> bool:
    """Remove ``name``; with ``inode``, only if it is still that incarnation (not a successor's)."""
    path = segment_path(name)
    try:
        if inode is not None and os.stat(path).st_ino != inode:
            return False
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False
