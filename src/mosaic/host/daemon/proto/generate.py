"""Generate ``mosaic_daemon_pb2*.py`` from the .proto with grpcio-tools.

Run through ``scripts/gen_proto``. The proto is compiled relative to ``src/``
so the generated modules import each other as ``mosaic.host.daemon.proto.…``.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

PROTO = "mosaic/host/daemon/proto/mosaic_daemon.proto"
GENERATED = ("mosaic_daemon_pb2.py", "mosaic_daemon_pb2.pyi", "mosaic_daemon_pb2_grpc.py")


def source_root() -> Path:
    """``src/``: the folder the proto path above is relative to."""
    return Path(__file__).resolve().parents[4]


def generate(out_root: Path) -> list[Path]:
    """Write the generated modules below ``out_root``; returns their paths."""
    from grpc_tools import protoc  # the tools are needed here only, never at run time

    out_root.mkdir(parents=True, exist_ok=True)
    well_known = resources.files("grpc_tools") / "_proto"
    args = ["grpc_tools.protoc", f"-I{source_root()}", f"-I{well_known}",
            f"--python_out={out_root}", f"--pyi_out={out_root}", f"--grpc_python_out={out_root}",
            str(source_root() / PROTO)]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {PROTO}")
    folder = out_root / Path(PROTO).parent
    return [folder / name for name in GENERATED]


if __name__ == "__main__":
    for path in generate(Path(sys.argv[1] if len(sys.argv) > 1 else source_root())):
        print(path)
