"""A command whose stderr is a terminal (a pseudo-terminal), for tests of what MOSAIC draws only on one: the
progress lines of ``mosaic run``, ``mosaic eval`` and ``mosaic arena run``."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence


@dataclass
class TerminalRun:
    returncode: int
    stdout: str
    terminal: str  # what was written to the terminal (stderr), control sequences included


def run_on_terminal(args: Sequence[str], home: Path, env: dict[str, str] | None = None,
                    timeout: float = 300) -> TerminalRun:
    """``python -m mosaic ARGS`` with stdout piped and stderr on a pseudo-terminal of 120 columns."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    chunks: list[bytes] = []

    def drain() -> None:  # the terminal's buffer is small: read while the command writes
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # every writer has closed the terminal
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        proc = subprocess.run([sys.executable, "-m", "mosaic", *args], stdout=subprocess.PIPE, stderr=slave,
                              stdin=subprocess.DEVNULL, text=True, timeout=timeout,
                              env={**os.environ, "MOSAIC_HOME": str(home), **(env or {})})
    finally:
        os.close(slave)
        reader.join(timeout=30)
        os.close(master)
    return TerminalRun(proc.returncode, proc.stdout, b"".join(chunks).decode(errors="replace"))
