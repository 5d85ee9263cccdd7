"""PNG files from frames and back, with zlib and struct only (no imaging dependency).

Frames of any supported dtype are shown as 8-bit: floats in [0, 1] are scaled
by 255, other values are clipped to 0..255. Metadata travels in a ``tEXt``
chunk so a saved frame still says which episode and step it shows.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

SIGNATURE = b"\x89PNG\r\n\x1a\n"
_COLOR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> grey, grey+alpha, RGB, RGBA
_CHANNELS = {v: k for k, v in _COLOR_TYPES.items()}
META_KEY = b"mosaic-fastlane"


def to_uint8(pixels: np.ndarray) -> np.ndarray:
    """An HxWxC uint8 image of any frame."""
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    if pixels.dtype == np.uint8:
        return pixels
    data = pixels.astype(np.float64)
    if pixels.dtype.kind == "f" and data.size and np.nanmax(data) <= 1.0:
        data = data * 255.0
    return np.clip(np.nan_to_num(data), 0, 255).astype(np.uint8)


def _chunk(kind: bytes, payload: bytes) -> bytes:
    return struct.pack(">I", len(payload)) + kind + payload + struct.pack(">I", zlib.crc32(kind + payload))


def encode_png(pixels: np.ndarray, meta: dict[str, Any] | None = None, level: int = 3) -> bytes:
    image = to_uint8(pixels)
    h, w, c = image.shape
    if c not in _COLOR_TYPES:  # more than 4 channels: show the first three
        image, c = np.ascontiguousarray(image[:, :, :3]), 3
    rows = np.empty((h, 1 + w * c), np.uint8)
    rows[:, 0] = 0  # filter type 0 (none) per scanline
    rows[:, 1:] = image.reshape(h, w * c)
    out = [SIGNATURE, _chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, _COLOR_TYPES[c], 0, 0, 0))]
    if meta:
        out.append(_chunk(b"tEXt", META_KEY + b"\0" + json.dumps(meta, default=str).encode("latin-1", "replace")))
    out += [_chunk(b"IDAT", zlib.compress(rows.tobytes(), level)), _chunk(b"IEND", b"")]
    return b"".join(out)


def write_png(path: Path | str, pixels: np.ndarray, meta: dict[str, Any] | None = None) -> Path:
    """Write atomically (a viewer may be reading the previous version)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(encode_png(pixels, meta))
    tmp.replace(path)
    return path


def _unfilter(raw: bytes, h: int, w: int, c: int) -> np.ndarray:
    stride = w * c
    out = np.zeros((h, stride), np.uint8)
    prev = np.zeros(stride, np.int32)
    pos = 0
    for y in range(h):
        kind, line = raw[pos], np.frombuffer(raw, np.uint8, stride, pos + 1).astype(np.int32)
        pos += 1 + stride
        if kind == 0:
            cur = line
        elif kind == 2:
            cur = (line + prev) & 0xFF
        else:  # 1 (sub), 3 (average), 4 (paeth) depend on the left pixel: go byte by byte
            cur = np.zeros(stride, np.int32)
            for x in range(stride):
                a = cur[x - c] if x >= c else 0
                b, d = prev[x], prev[x - c] if x >= c else 0
                if kind == 1:
                    pred = a
                elif kind == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - d
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - d)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else d)
                cur[x] = (line[x] + pred) & 0xFF
        out[y] = cur
        prev = cur
    return out.reshape(h, w, c)


def read_png(path: Path | str) -> tuple[np.ndarray, dict[str, Any]]:
    """Decode an 8-bit, non-interlaced PNG (what :func:`encode_png` writes) and its metadata."""
    data = Path(path).read_bytes()
    if not data.startswith(SIGNATURE):
        raise ValueError(f"{path}: not a PNG file")
    pos, idat, meta = len(SIGNATURE), [], {}
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack_from(">I", data, pos)
        kind, payload = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        if zlib.crc32(kind + payload) != struct.unpack_from(">I", data, pos + 8 + length)[0]:
            raise ValueError(f"{path}: bad CRC in {kind!r} chunk")
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", payload)
            if depth != 8 or interlace or color not in _CHANNELS:
                raise ValueError(f"{path}: only 8-bit non-interlaced grey/RGB(A) PNGs are supported")
            channels = _CHANNELS[color]
        elif kind == b"IDAT":
            idat.append(payload)
        elif kind == b"tEXt":
            key, _, text = payload.partition(b"\0")
            if key == META_KEY:
                try:
                    meta = json.loads(text.decode("latin-1"))
                except ValueError:
                    meta = {}
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    return _unfilter(raw, height, width, channels), meta
