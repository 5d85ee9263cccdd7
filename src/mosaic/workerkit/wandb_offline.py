"""What an offline W&B run holds, read from its folder without W&B's server.

A run logged with ``wandb_mode: offline`` (:class:`mosaic.workerkit.run_fields.WandbTracking`)
is a folder ``wandb/offline-run-<time>-<id>/`` whose ``run-<id>.wandb`` file is W&B's
transaction log: records of W&B's own protobuf message (``wandb.proto.wandb_internal_pb2.Record``)
in LevelDB's log framing (32 KiB blocks; each piece a 7-byte header: CRC32, length,
type full/first/middle/last), after a 7-byte file header ``:W&B``, magic, version.
``wandb sync`` uploads it as it is; :func:`read_offline_run` reads back the run's
project, its config and the names of the values it logged, for tests and checks
(it needs the ``wandb`` package in the reading process, for its protobuf classes).

:class:`NetworkTrap` and :func:`trapped_environment` are for tests of W&B runs: every
address W&B could reach (its API URL, the HTTP(S) proxies) points at a local listener
that records connections, and there is no API key, so a run that tried the network
shows up in ``trap.connections`` instead of leaving the machine.
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

_BLOCK = 32768
_HEADER = struct.Struct("<IHB")  # checksum, length, piece type
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


@dataclass
class OfflineRun:
    folder: Path
    project: str = ""
    run_id: str = ""
    config: dict[str, str] = field(default_factory=dict)  # key -> W&B's JSON text of the value
    logged: set[str] = field(default_factory=set)  # history keys (metric names) the run logged
    kinds: dict[str, int] = field(default_factory=dict)  # record type -> count


def offline_runs(root: Path) -> list[Path]:
    """The offline W&B run folders under ``root``/wandb/, oldest first."""
    return sorted((Path(root) / "wandb").glob("offline-run-*"))


def records(path: Path) -> Iterator[Any]:
    """The records of one ``.wandb`` file, as ``wandb_internal_pb2.Record`` messages."""
    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B transaction log (header {data[:7]!r})")
    pos, pieces = _HEADER.size, []
    while pos + _HEADER.size <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER.size:  # a block's tail too short for a header is padding
            pos += left
            continue
        _, length, kind = _HEADER.unpack_from(data, pos)
        piece = data[pos + _HEADER.size:pos + _HEADER.size + length]
        pos += _HEADER.size + length
        if kind == 0:  # zero padding (a file still being written)
            continue
        pieces.append(piece)
        if kind in (_FULL, _LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(pieces))
            pieces = []
            yield record


def read_offline_run(folder: Path) -> OfflineRun:
    """Project, config and logged names of the offline run in ``folder`` (``offline-run-*``)."""
    folder = Path(folder)
    files = sorted(folder.glob("run-*.wandb"))
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file in {folder}")
    run = OfflineRun(folder)
    for record in records(files[0]):
        kind = record.WhichOneof("record_type")
        run.kinds[kind] = run.kinds.get(kind, 0) + 1
        if kind == "run":
            # a later run record (an update) may leave fields empty: keep what an earlier one said
            run.project = record.run.project or run.project
            run.run_id = record.run.run_id or run.run_id
            run.config.update({item.key: item.value_json for item in record.run.config.update})
        elif kind == "config":
            run.config.update({item.key: item.value_json for item in record.config.update})
        elif kind == "history":
            run.logged.update(item.key or "/".join(item.nested_key) for item in record.history.item)
    return run


class NetworkTrap:
    """A local TCP listener that records every connection made to it (the network W&B must not try)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections: list[bytes] = []  # the first bytes each connection sent
        threading.Thread(target=self._serve, name="wandb-network-trap", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed
                return
            conn.settimeout(2)
            try:
                self.connections.append(conn.recv(200) or b"(connected)")
            except OSError:
                self.connections.append(b"(connected)")
            conn.close()

    def close(self) -> None:
        self.sock.close()


def trapped_environment(trap: NetworkTrap, folder: Path) -> dict[str, str]:
    """Environment variables under which W&B reaches only ``trap``: its API URL and every proxy point
    there, no API key (``$NETRC`` a missing file), W&B's settings and caches under ``folder``."""
    folder = Path(folder)
    return {"WANDB_BASE_URL": trap.url, "WANDB_API_KEY": "", "NETRC": str(folder / "no-netrc"),
            "WANDB_CONFIG_DIR": str(folder / "config"), "WANDB_CACHE_DIR": str(folder / "cache"),
            "WANDB_DATA_DIR": str(folder / "data"), "NO_PROXY": "localhost,127.0.0.1",
            "no_proxy": "localhost,127.0.0.1",
            **{name: trap.url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                                           "all_proxy")}}
