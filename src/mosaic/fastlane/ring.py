"""The frame ring: one writer, any number of readers, lock-free (a seqlock per slot).

Segment layout (little-endian; offsets in bytes)::

    header (4096 bytes)
      0  magic "MOSAICFL"        8  version u32        12 header size u32
     16  height u32             20  width u32          24 channels u32
     28  capacity u32           32  dtype (numpy str, 8 bytes, NUL-padded)
     40  frame bytes u64        48  slot stride u64    56 meta capacity u32
     60  flags u32 (1 = closed) 64  writer pid u32     72 writer start time u64
     80  created ns u64         88  generation u64     96 write sequence u64
    104  owner length u32      128  owner JSON (run id, run dir, stream, pid)
    slot i at 4096 + i * stride
      0  sequence u64  8 timestamp ns u64  16 episode i64  24 step i64
     32  frame index u64  40 metadata length u32
     64  metadata JSON (meta capacity bytes)   then the frame, H x W x C of dtype

Frame ``n`` goes to slot ``n % capacity``. The writer sets the slot's sequence
to ``2n+1`` (odd: being written), copies, then sets ``2n+2`` and finally the
header's write sequence to ``n+1``. A reader copies slot ``n`` only if its
sequence reads ``2n+2`` before *and* after the copy; anything else is a torn
or stale read and is retried or skipped. Readers map the segment read-only,
so they can never disturb the writer.
"""

from __future__ import annotations

import json
import math
import os
import secrets
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from mosaic.fastlane.shm import (
    FastLaneError,
    Segment,
    create_segment,
    current_inode,
    open_segment,
    unlink_segment,
)
from mosaic.pids import start_ticks

MAGIC = b"MOSAICFL"
VERSION = 1
HEADER_SIZE = 4096
SLOT_HEADER = 64
ALIGN = 64
OWNER_OFFSET = 128
OWNER_MAX = HEADER_SIZE - OWNER_OFFSET
DEFAULT_META_CAPACITY = 2048
_HEAD = struct.Struct("<8sIIIIII8sQQII")  # magic .. flags (offsets 0..63)
_WRITER = struct.Struct("<IIQQQ")  # pid, reserved, start time, created ns, generation (64..95)
WRITE_SEQ_OFFSET = 96
FLAGS_OFFSET = 60
OWNER_LEN_OFFSET = 104
FLAG_CLOSED = 1
SUPPORTED_DTYPES = ("|u1", "|i1", "<u2", "<i2", "<f4", "<f8", "<u4", "<i4")

_fence_lock = threading.Lock()


def _fence() -> None:
    """Order the seqlock's stores/loads around the copy.

    On x86-64 (total store order) the program order of these C-level copies is
    already what other cores observe; the lock round trip is a cheap barrier
    for weaker memory models.
    """
    _fence_lock.acquire()
    _fence_lock.release()


def _round_up(value: int, to: int = ALIGN) -> int:
    return (value + to - 1) // to * to


@dataclass(frozen=True)
class Geometry:
    """Shape and dtype of every frame of one ring."""

    height: int
    width: int
    channels: int = 3
    dtype: str = "|u1"

    def __post_init__(self) -> None:
        if min(self.height, self.width, self.channels) < 1:
            raise ValueError(f"geometry {self}: every dimension must be >= 1")
        if self.channels > 4096 or self.height > 65536 or self.width > 65536:
            raise ValueError(f"geometry {self}: too large")
        if np.dtype(self.dtype).str not in SUPPORTED_DTYPES:
            raise ValueError(f"dtype {self.dtype!r} not supported (use one of {', '.join(SUPPORTED_DTYPES)})")

    @classmethod
    def of(cls, pixels: np.ndarray) -> "Geometry":
        """HxW (grey) or HxWxC arrays."""
        if pixels.ndim == 2:
            h, w, c = *pixels.shape, 1
        elif pixels.ndim == 3:
            h, w, c = pixels.shape
        else:
            raise ValueError(f"a frame must be HxW or HxWxC, got shape {pixels.shape}")
        return cls(int(h), int(w), int(c), pixels.dtype.str)

    @property
    def shape(self) -> tuple[int, int, int]:
        return (self.height, self.width, self.channels)

    @property
    def frame_bytes(self) -> int:
        return self.height * self.width * self.channels * np.dtype(self.dtype).itemsize

    def to_dict(self) -> dict[str, Any]:
        return {"height": self.height, "width": self.width, "channels": self.channels, "dtype": self.dtype}


@dataclass
class Frame:
    """One frame as a reader got it (a private copy)."""

    index: int
    timestamp_ns: int
    episode: int
    step: int
    meta: dict[str, Any]
    pixels: np.ndarray = field(repr=False)

    @property
    def age_s(self) -> float:
        return (time.time_ns() - self.timestamp_ns) / 1e9


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, np.generic):
        return _finite(value.item())
    return value


def encode_meta(meta: Mapping[str, Any] | None, capacity: int) -> bytes:
    """Compact JSON of at most ``capacity`` bytes; oversize records keep their scalars only."""
    if not meta:
        return b""
    data = json.dumps(_finite(dict(meta)), separators=(",", ":"), default=str).encode()
    if len(data) <= capacity:
        return data
    slim = {k: v for k, v in meta.items() if not isinstance(v, (dict, list, tuple))}
    slim["truncated"] = True
    data = json.dumps(_finite(slim), separators=(",", ":"), default=str).encode()
    return data if len(data) <= capacity else b'{"truncated":true}'[:capacity]


class _Views:
    """numpy views of a mapped ring (kept together so they can be dropped before unmapping)."""

    def __init__(self, mm: Any, geometry: Geometry, capacity: int, meta_capacity: int, stride: int) -> None:
        self.write_seq = np.ndarray((1,), np.uint64, buffer=mm, offset=WRITE_SEQ_OFFSET)
        self.u64 = np.ndarray((capacity, 5), np.uint64, buffer=mm, offset=HEADER_SIZE, strides=(stride, 8))
        self.i64 = np.ndarray((capacity, 5), np.int64, buffer=mm, offset=HEADER_SIZE, strides=(stride, 8))
        self.meta_len = np.ndarray((capacity,), np.uint32, buffer=mm, offset=HEADER_SIZE + 40,
                                   strides=(stride,))
        self.meta = np.ndarray((capacity, meta_capacity), np.uint8, buffer=mm,
                               offset=HEADER_SIZE + SLOT_HEADER, strides=(stride, 1))
        item = np.dtype(geometry.dtype).itemsize
        h, w, c = geometry.shape
        self.frames = np.ndarray((capacity, h, w, c), np.dtype(geometry.dtype), buffer=mm,
                                 offset=HEADER_SIZE + SLOT_HEADER + meta_capacity,
                                 strides=(stride, w * c * item, c * item, item))


def ring_size(geometry: Geometry, capacity: int, meta_capacity: int) -> tuple[int, int]:
    """(total bytes, slot stride)."""
    stride = _round_up(SLOT_HEADER + meta_capacity + geometry.frame_bytes)
    return HEADER_SIZE + capacity * stride, stride


class RingWriter:
    """Creates (or replaces) the segment ``name`` and publishes frames into it."""

    def __init__(self, name: str, geometry: Geometry, capacity: int = 4,
                 meta_capacity: int = DEFAULT_META_CAPACITY, owner: Mapping[str, Any] | None = None) -> None:
        if not 1 <= capacity <= 65536:
            raise ValueError(f"capacity {capacity}: must be 1..65536")
        meta_capacity = _round_up(max(0, meta_capacity))
        self.name, self.geometry, self.capacity, self.meta_capacity = name, geometry, capacity, meta_capacity
        size, self.stride = ring_size(geometry, capacity, meta_capacity)
        pid = os.getpid()
        owner_doc = {"pid": pid, "host": socket.gethostname(), **dict(owner or {})}
        owner_bytes = json.dumps(owner_doc, separators=(",", ":"), default=str).encode()[:OWNER_MAX]
        self.generation = secrets.randbits(63)

        def init(mm: Any) -> None:
            mm[OWNER_OFFSET:OWNER_OFFSET + len(owner_bytes)] = owner_bytes
            struct.pack_into("<I", mm, OWNER_LEN_OFFSET, len(owner_bytes))
            _WRITER.pack_into(mm, 64, pid, 0, start_ticks(pid), time.time_ns(), self.generation)
            struct.pack_into("<Q", mm, WRITE_SEQ_OFFSET, 0)
            _HEAD.pack_into(mm, 0, b"\0" * 8, VERSION, HEADER_SIZE, geometry.height, geometry.width,
                            geometry.channels, capacity, geometry.dtype.encode(), geometry.frame_bytes,
                            self.stride, meta_capacity, 0)
            mm[0:8] = MAGIC  # last: a segment with the magic is complete

        self._map: Segment | None = create_segment(name, size, init)
        self._views: _Views | None = _Views(self._map.mm, geometry, capacity, meta_capacity, self.stride)
        self.frames_written = 0

    @property
    def inode(self) -> int:
        return self._map.inode if self._map else 0

    @property
    def closed(self) -> bool:
        return self._views is None

    def write(self, pixels: np.ndarray, episode: int = 0, step: int = 0,
              meta: Mapping[str, Any] | bytes | None = None, timestamp_ns: int | None = None) -> int:
        """Publish one frame (it must have this ring's geometry); returns its index."""
        v = self._views
        if v is None:
            raise FastLaneError(f"writer of {self.name!r} is closed")
        if pixels.ndim == 2:
            pixels = pixels[:, :, None]
        if pixels.shape != self.geometry.shape or pixels.dtype.str != self.geometry.dtype:
            raise ValueError(f"frame {pixels.shape} {pixels.dtype} does not match the ring's geometry "
                             f"{self.geometry.shape} {self.geometry.dtype}")
        data = meta if isinstance(meta, bytes) else encode_meta(meta, self.meta_capacity)
        if len(data) > self.meta_capacity:
            raise ValueError(f"metadata of {len(data)} bytes exceeds the ring's {self.meta_capacity}")
        n = self.frames_written
        slot = n % self.capacity
        v.u64[slot, 0] = 2 * n + 1  # odd: readers keep off
        _fence()
        np.copyto(v.frames[slot], pixels, casting="no")
        if data:
            v.meta[slot, :len(data)] = np.frombuffer(data, np.uint8)
        v.meta_len[slot] = len(data)
        v.u64[slot, 1] = timestamp_ns if timestamp_ns is not None else time.time_ns()
        v.i64[slot, 2] = episode
        v.i64[slot, 3] = step
        v.u64[slot, 4] = n
        _fence()
        v.u64[slot, 0] = 2 * n + 2  # even: frame n is complete
        v.write_seq[0] = n + 1
        self.frames_written = n + 1
        return n

    def last_frame(self) -> Frame | None:
        """The newest frame, read back from our own ring (no race: we are the writer)."""
        v, n = self._views, self.frames_written - 1
        if v is None or n < 0:
            return None
        slot = n % self.capacity
        size = int(v.meta_len[slot])
        meta = json.loads(bytes(v.meta[slot, :size])) if size else {}
        return Frame(n, int(v.u64[slot, 1]), int(v.i64[slot, 2]), int(v.i64[slot, 3]), meta,
                     v.frames[slot].copy())

    def close(self, unlink: bool = True) -> None:
        """Mark the ring closed for its readers and (by default) remove its name."""
        if self._map is None:
            return
        flags = struct.unpack_from("<I", self._map.mm, FLAGS_OFFSET)[0]
        struct.pack_into("<I", self._map.mm, FLAGS_OFFSET, flags | FLAG_CLOSED)
        self._views = None
        mapping, self._map = self._map, None
        if unlink:
            unlink_segment(self.name, inode=mapping.inode)
        mapping.close()

    def __enter__(self) -> "RingWriter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@dataclass(frozen=True)
class RingHeader:
    """A ring's header as found in the segment."""

    geometry: Geometry
    capacity: int
    meta_capacity: int
    stride: int
    flags: int
    writer_pid: int
    writer_start: int
    created_ns: int
    generation: int
    owner: dict[str, Any]

    @property
    def closed(self) -> bool:
        return bool(self.flags & FLAG_CLOSED)


def read_header(buf: Any, size: int) -> RingHeader:
    """Validate and decode a header; :class:`FastLaneError` if it is not a (complete) ring."""
    if size < HEADER_SIZE:
        raise FastLaneError("segment smaller than a FastLane header")
    (magic, version, header_size, h, w, c, capacity, dtype, frame_bytes, stride, meta_cap,
     flags) = _HEAD.unpack_from(buf, 0)
    if magic != MAGIC:
        raise FastLaneError("not a FastLane ring (bad magic)")
    if version != VERSION or header_size != HEADER_SIZE:
        raise FastLaneError(f"FastLane ring version {version} is not supported (this is version {VERSION})")
    try:
        geometry = Geometry(h, w, c, dtype.rstrip(b"\0").decode())
    except (ValueError, TypeError, UnicodeDecodeError) as exc:
        raise FastLaneError(f"corrupt FastLane header: {exc}") from None
    if (frame_bytes != geometry.frame_bytes or capacity < 1
            or stride < SLOT_HEADER + meta_cap + frame_bytes or HEADER_SIZE + capacity * stride > size):
        raise FastLaneError("corrupt FastLane header (sizes do not add up)")
    pid, _, start, created, generation = _WRITER.unpack_from(buf, 64)
    owner_len = min(struct.unpack_from("<I", buf, OWNER_LEN_OFFSET)[0], OWNER_MAX)
    try:
        owner = json.loads(bytes(buf[OWNER_OFFSET:OWNER_OFFSET + owner_len])) if owner_len else {}
    except ValueError:
        owner = {}
    return RingHeader(geometry, capacity, meta_cap, stride, flags, pid, start, created, generation, owner)


class RingReader:
    """A read-only view of one ring; copies frames out, detects torn reads."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._map: Segment | None = open_segment(name)
        try:
            self.header = read_header(self._map.mm, self._map.size)
        except BaseException:
            self._map.close()
            raise
        hd = self.header
        self._views: _Views | None = _Views(self._map.mm, hd.geometry, hd.capacity, hd.meta_capacity, hd.stride)
        self.torn_reads = 0

    @property
    def geometry(self) -> Geometry:
        return self.header.geometry

    @property
    def inode(self) -> int:
        return self._map.inode if self._map else 0

    @property
    def frames_written(self) -> int:
        return int(self._views.write_seq[0]) if self._views else 0

    @property
    def closed(self) -> bool:
        """The writer closed this ring (finished, or replaced it after a geometry change)."""
        if self._map is None:
            return True
        return bool(struct.unpack_from("<I", self._map.mm, FLAGS_OFFSET)[0] & FLAG_CLOSED)

    def replaced(self) -> bool:
        """The name now points elsewhere (a restarted writer) or nowhere."""
        return current_inode(self.name) != self.inode

    def new_buffer(self) -> np.ndarray:
        return np.empty(self.geometry.shape, np.dtype(self.geometry.dtype))

    def read(self, index: int, out: np.ndarray | None = None) -> Frame | None:
        """Frame ``index`` if it is still in the ring and was copied intact, else None.

        A copy that raced the writer is detected (the slot's sequence changed)
        and counted in ``torn_reads``; it is never returned.
        """
        v = self._views
        if v is None or index < 0:
            return None
        slot = index % self.header.capacity
        expected = 2 * index + 2
        if int(v.u64[slot, 0]) != expected:
            return None  # not written yet, being written, or already overwritten
        _fence()
        pixels = out if out is not None else self.new_buffer()
        np.copyto(pixels, v.frames[slot], casting="no")
        size = min(int(v.meta_len[slot]), self.header.meta_capacity)
        meta_bytes = bytes(v.meta[slot, :size])
        stamp, episode, step = int(v.u64[slot, 1]), int(v.i64[slot, 2]), int(v.i64[slot, 3])
        _fence()
        if int(v.u64[slot, 0]) != expected:
            self.torn_reads += 1
            return None
        try:
            meta = json.loads(meta_bytes) if meta_bytes else {}
        except ValueError:
            meta = {}
        return Frame(index, stamp, episode, step, meta, pixels)

    def latest(self, out: np.ndarray | None = None, retries: int = 8) -> Frame | None:
        """The newest complete frame (None if none was written yet or every try raced)."""
        for _ in range(retries):
            written = self.frames_written
            if written == 0:
                return None
            frame = self.read(written - 1, out)
            if frame is not None:
                return frame
        return None

    def close(self) -> None:
        self._views = None
        if self._map is not None:
            self._map.close()
            self._map = None

    def __enter__(self) -> "RingReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
