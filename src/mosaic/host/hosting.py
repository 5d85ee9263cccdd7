"""Start a worker command and follow its output and exit: the one place MOSAIC spawns a worker.

Three ways of hosting a run are layers on this module, each keeping what makes it different:

* :class:`mosaic.host.launcher.WorkerProcess` (``mosaic run``): the worker's stdout is a pipe read by a
  thread until it closes;
* the daemon (:mod:`mosaic.host.daemon.process`, :mod:`~mosaic.host.daemon.supervisor`): stdout goes to a
  spool file read by the event loop, so a worker outlives a daemon restart and is re-attached;
* the cluster's :class:`mosaic.host.cell_launcher.CellLauncher`: the worker runs below a guard process
  (``PR_SET_PDEATHSIG``, adopting orphans) whose stdout is the worker's.

What they share is here: the worker's command and environment (its hash seed from the run's seed), starting
it in a session of its own (:func:`start`, :func:`start_async`), the config handshake (``--handshake``:
the worker checks the config, then is told its run folder), following its stdout line by line
(:func:`follow_output`), and the tail of its stderr for a run that ended without saying why.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Mapping, Sequence

from mosaic.errors import UserError
from mosaic.host.recorder import LineSplitter
from mosaic.runs import RunDir

#: Variables of the launching process that must not reach a worker. ``WANDB_SERVICE`` names the W&B service
#: of a process that used W&B (a notebook, a test process, an RLlib driver): a worker's W&B runs would attach
#: to that service, with its settings, instead of starting their own (an offline run then lost its project).
NOT_INHERITED = ("WANDB_SERVICE",)
#: What a worker prefixes its one error line with (stripped from the message shown).
ERROR_PREFIXES = ("mosaic: error: ", "{worker}: error: ")
READ_CHUNK = 1 << 16


def worker_command(worker: Any, python: str | None = None) -> list[str]:
    """``python -m <worker>.cli`` with the worker's own environment's interpreter when it has one."""
    return [python or worker.python or sys.executable, "-m", worker.cli_module]


def worker_env(extra: Mapping[str, str] | None = None, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a worker: ``base`` (this process's) less :data:`NOT_INHERITED`, unbuffered, ``extra``."""
    env = {name: value for name, value in (os.environ if base is None else base).items()
           if name not in NOT_INHERITED}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def hash_seed(seed: Any) -> dict[str, str]:
    """PYTHONHASHSEED from a run's seed, unless the user set one (or the seed is not an int).

    Python randomises str hashing per process; libraries that iterate over sets of agent ids (RLlib does)
    then batch agents in a different order in every process, and the same seed stops giving the same run.
    """
    if "PYTHONHASHSEED" in os.environ or not isinstance(seed, int) or isinstance(seed, bool):
        return {}
    return {"PYTHONHASHSEED": str(seed % 4294967296)}


def run_hash_seed(run: RunDir) -> dict[str, str]:
    """:func:`hash_seed` of the seed in a run folder's config."""
    if "PYTHONHASHSEED" in os.environ:
        return {}
    try:
        return hash_seed(run.read_config().get("seed", 0))
    except (OSError, ValueError):
        return {}


def run_command(worker: Any, run: RunDir, python: str | None = None,
                env: Mapping[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The command and environment of a run's worker, the same for ``mosaic run``, the daemon and a cell."""
    cmd = [*worker_command(worker, python), "--config", str(run.config_path), "--run-dir", str(run.root)]
    return cmd, worker_env({"MOSAIC_RUN_DIR": str(run.root), **run_hash_seed(run), **(env or {})})


def start(cmd: Sequence[str], *, env: Mapping[str, str], stdout: Any = subprocess.PIPE, stderr: Any = None,
          stdin: Any = subprocess.DEVNULL, new_session: bool = True,
          preexec_fn: Callable[[], None] | None = None) -> subprocess.Popen:
    """Start a worker command; with ``new_session`` it leads its own process group, which
    :func:`mosaic.pids.signal_group` stops as a whole."""
    return subprocess.Popen(list(cmd), stdin=stdin, stdout=stdout, stderr=stderr, env=dict(env),
                            start_new_session=new_session, preexec_fn=preexec_fn)


async def start_async(cmd: Sequence[str], *, env: Mapping[str, str], stdout: IO[bytes],
                      stderr: IO[bytes]) -> asyncio.subprocess.Process:
    """:func:`start` for an event loop (the daemon): in its own session, stdin closed."""
    return await asyncio.create_subprocess_exec(*cmd, stdin=asyncio.subprocess.DEVNULL, stdout=stdout,
                                                stderr=stderr, start_new_session=True, env=dict(env))


def run_to_end(cmd: Sequence[str], text: str, timeout_s: float,
               env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """A worker command that reads ``text`` and answers (``--validate``): its output, once it exited.
    :class:`subprocess.TimeoutExpired` after ``timeout_s``."""
    return subprocess.run(list(cmd), input=text, capture_output=True, text=True, timeout=timeout_s,
                          env=worker_env() if env is None else dict(env))


def stderr_tail(path: Path, limit: int = 2000) -> str:
    """The last ``limit`` bytes of a worker's stderr log ('' if there is none)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def error_line(stderr: str, worker_name: str, code: int) -> str:
    """The worker's last stderr line without its error prefix (or its exit code when it printed none)."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    text = lines[-1] if lines else f"exit code {code}"
    for prefix in ERROR_PREFIXES:
        prefix = prefix.format(worker=worker_name)
        text = text[len(prefix):] if text.startswith(prefix) else text
    return text


def refusal(stderr: str, worker_name: str, code: int) -> UserError:
    """A worker that would not take a config: exit 2 is its refusal (its line is the message); anything
    else means it could not check it."""
    text = error_line(stderr, worker_name, code)
    return UserError(text) if code == 2 else UserError(f"worker {worker_name!r} could not check the config: {text}")


def read_until(fd: int, buffer: bytes, enough: Callable[[bytes], bool], deadline: float) -> tuple[bytes, bool]:
    """Reads a worker's output ``fd`` onto ``buffer`` until ``enough(buffer)``: returns the buffer and True, or the
    buffer and False if the output ends first. :class:`TimeoutError` at ``deadline`` (``time.monotonic()``)."""
    import select

    while not enough(buffer):
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, READ_CHUNK)
        if not chunk:
            return buffer, False
        buffer += chunk
    return buffer, True


def read_first_line(proc: subprocess.Popen, timeout_s: float) -> tuple[bytes | None, bytes]:
    """The first line the worker prints (None if it exits first) and what followed it already."""
    try:
        buffer, line_ended = read_until(proc.stdout.fileno(), b"", lambda read: b"\n" in read,
                                        time.monotonic() + timeout_s)
    except TimeoutError:
        raise UserError(f"the worker did not check the config within {timeout_s:g} s") from None
    if not line_ended:
        return None, b""
    line, _, rest = buffer.partition(b"\n")
    return line, rest


def handshake_config(proc: subprocess.Popen, config: Mapping[str, Any], worker_name: str, log_path: Path,
                     timeout_s: float) -> tuple[dict[str, Any], bytes]:
    """The first half of ``--handshake``: send the config, read the worker's answer (the config normalised).
    Returns the answer and the telemetry bytes already read after it; raises :func:`refusal` if the worker
    exits instead (its stderr is ``log_path``)."""
    proc.stdin.write(json.dumps(dict(config)).encode() + b"\n")
    proc.stdin.flush()
    line, rest = read_first_line(proc, timeout_s)
    if line is None:
        code = proc.wait()
        raise refusal(stderr_tail(log_path), worker_name, code)
    return json.loads(line), rest


def handshake_run_dir(proc: subprocess.Popen, run: RunDir) -> None:
    """The second half of ``--handshake``: the run folder exists; the worker goes on to run in it."""
    proc.stdin.write(json.dumps({"run_dir": str(run.root)}).encode() + b"\n")
    proc.stdin.close()


def follow_output(fd: int, pending: bytes, feed: Callable[[Iterable[bytes]], None]) -> None:
    """Read a worker's stdout from ``fd`` until it closes, handing ``feed`` its complete lines as they come
    (``pending``: bytes read before, first), then any last line without a newline."""
    splitter = LineSplitter()
    feed(splitter.feed(pending))
    while True:
        chunk = os.read(fd, READ_CHUNK)
        if not chunk:
            break
        feed(splitter.feed(chunk))
    feed(splitter.flush())


def release_fastlane(run: RunDir) -> list[str]:
    """Unlink the FastLane segments a run left behind (keeping last frames); never raises."""
    try:
        from mosaic.fastlane.publisher import finish_run

        return finish_run(run.root, run.run_id)
    except Exception:  # cleanup must not turn a finished run into a crash
        return []
