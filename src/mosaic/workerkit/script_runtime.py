"""Run an upstream script (CleanRL style: ``python ppo.py --seed 1 ...``) as a MOSAIC run.

Some libraries are scripts, not APIs. Their shim does not import them: it
starts the unmodified script as a child process and translates what the
script prints into telemetry. :class:`ScriptRuntime` is the one reusable
runtime for that pattern, so such a shim is a command line plus a translator.

The protocol, top to bottom:

1. The child starts in a session of its own (its own process group), stdin
   closed, stdout and stderr piped. Its raw stderr is also kept, line by line,
   in ``<run>/logs/script.stderr``.
2. Two reader threads hand every line, as it comes, to the main loop, which
   calls ``translate(line, stream)`` (``stream`` is ``"stdout"`` or
   ``"stderr"``, or ``"telemetry"``: with ``telemetry_fd_env`` the child also
   gets the write end of a pipe of its own, its number in that environment
   variable, so what an observer inside the script reports never mixes with
   what the script prints; ``keep_stdout`` keeps stdout in ``logs/script.stdout``; with
   ``relay_stdout=False`` the translator does not want stdout, so the child writes it
   straight into that file, and nothing in MOSAIC wakes up for each line it prints).
   The translator returns zero or more ``(event_type,
   fields)`` pairs (``metrics``, ``episode``, ``log``, ``checkpoint_saved``…),
   which are emitted in order. Each ``metrics`` event ticks the run's progress
   (the watchdog's stall clock).
3. Between lines the loop honours the run's control: a pause stops the whole
   group (SIGSTOP) and holds the progress clock until resume (SIGCONT), with
   ``paused``/``resumed`` events; a cancel sends SIGTERM to the group, SIGKILL
   after ``grace_s``, and ends the run cancelled.
4. The child's exit decides the run: code 0 completes it (the summary counts
   what was relayed); anything else fails it with the code or signal and the
   last lines of its stderr. A translator that raises stops the child and
   fails the run, naming the line.
5. However ``run()`` ends, nothing of the child's group is left running.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from pathlib import Path
from typing import IO, Any, Callable, Iterable, Mapping, Sequence

from mosaic.workerkit.lifecycle import RunCancelled
from mosaic.pids import signal_group

Relay = tuple[str, Mapping[str, Any]]
Translator = Callable[[str, str], Iterable[Relay]]

STDERR_TAIL_LINES = 20
#: After the script exits, how long what it started may still write to its pipes.
EXIT_DRAIN_S = 2.0
_EOF = object()


class ScriptFailed(RuntimeError):
    """The script exited with an error, was killed, or printed something the translator refused."""


def exit_description(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


class ScriptRuntime:
    """A ``WorkerRuntime`` that runs ``command`` and relays what it prints (see the module docstring)."""

    def __init__(self, command: Sequence[str], context: Any, translate: Translator, *,
                 cwd: str | Path | None = None, env: Mapping[str, str] | None = None,
                 grace_s: float = 10.0, poll_s: float = 0.1, telemetry_fd_env: str | None = None,
                 keep_stdout: bool = False, relay_stdout: bool = True) -> None:
        self.command = [str(c) for c in command]
        self.ctx = context
        self.translate = translate
        self.cwd = str(cwd) if cwd is not None else None
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.grace_s = grace_s
        self.poll_s = poll_s
        self.telemetry_fd_env = telemetry_fd_env
        self.keep_stdout = keep_stdout
        self.relay_stdout = relay_stdout
        self.proc: subprocess.Popen[str] | None = None
        self.counts: dict[str, int] = {}
        self._stderr_tail: deque[str] = deque(maxlen=STDERR_TAIL_LINES)

    # -- the run -------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        started = time.monotonic()
        lines: queue.Queue[tuple[str, Any]] = queue.Queue()
        log_dir = Path(self.ctx.run_dir.root) / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        with contextlib.ExitStack() as stack:
            stderr_log = stack.enter_context((log_dir / "script.stderr").open("a", encoding="utf-8"))
            stdout_log = (stack.enter_context((log_dir / "script.stdout").open("a", encoding="utf-8"))
                          if self.keep_stdout else None)
            env, pass_fds, telemetry = dict(self.env), (), None
            if self.telemetry_fd_env:
                read_fd, write_fd = os.pipe()
                telemetry = stack.enter_context(os.fdopen(read_fd, "r", encoding="utf-8", errors="replace"))
                env[self.telemetry_fd_env], pass_fds = str(write_fd), (write_fd,)
            # stdout nobody translates goes straight to its log (or nowhere): no reader, no wake-ups
            stdout_target = (subprocess.PIPE if self.relay_stdout else
                             stdout_log if stdout_log is not None else subprocess.DEVNULL)
            try:
                self.proc = subprocess.Popen(self.command, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
                                             stdout=stdout_target, stderr=subprocess.PIPE, text=True,
                                             errors="replace", bufsize=1, start_new_session=True,
                                             pass_fds=pass_fds)
            finally:
                for fd in pass_fds:
                    os.close(fd)  # the child has it now; its exit closes the pipe
            streams = [(self.proc.stderr, "stderr", stderr_log, True)]
            if self.relay_stdout:
                streams.append((self.proc.stdout, "stdout", stdout_log, False))
            if telemetry is not None:
                streams.append((telemetry, "telemetry", None, False))
            readers = [threading.Thread(target=self._read, args=(pipe, name, lines, keep, tail),
                                        name=f"mosaic-script-{name}", daemon=True)
                       for pipe, name, keep, tail in streams]
            for reader in readers:
                reader.start()
            try:
                self._follow(lines, len(readers))
            except RunCancelled:
                self._stop()
                raise
            except BaseException:
                self._kill()
                raise
            finally:
                self._kill()  # grandchildren the script left behind go with it
                for reader in readers:
                    reader.join(timeout=5)
        returncode = self.proc.returncode
        if returncode != 0:
            tail = "\n".join(self._stderr_tail)
            raise ScriptFailed(f"{Path(self.command[0]).name} {exit_description(returncode)}"
                               + (f"; its last stderr lines:\n{tail}" if tail else ""))
        return {"returncode": returncode, "duration_s": round(time.monotonic() - started, 3),
                "relayed": dict(self.counts)}

    def _follow(self, lines: "queue.Queue[tuple[str, Any]]", open_streams: int = 2) -> None:
        """Relay lines until both streams ended and the child exited; honour pause and cancel meanwhile.

        Processes the script started inherit its pipes: once the script has
        exited, they get :data:`EXIT_DRAIN_S` to finish writing, then the group
        is killed (which closes the pipes), and the rest is read for at most
        as long again.
        """
        assert self.proc is not None
        exited_at: float | None = None
        killed = False
        while open_streams or self.proc.poll() is None:
            if self.proc.poll() is not None:
                exited_at = exited_at or time.monotonic()
                if time.monotonic() - exited_at > EXIT_DRAIN_S:
                    if killed:
                        break  # a leftover outside the group still holds a pipe: stop reading
                    self._kill()
                    killed, exited_at = True, time.monotonic()
            try:
                stream, line = lines.get(timeout=self.poll_s)
            except queue.Empty:
                self._control()
                continue
            if line is _EOF:
                open_streams -= 1
                continue
            self._relay(stream, line)
            self._control()
        self.proc.wait()

    def _relay(self, stream: str, line: str) -> None:
        try:
            relays = list(self.translate(line, stream))
        except Exception as exc:
            raise ScriptFailed(f"could not translate the script's {stream} line {line[:200]!r}: "
                               f"{type(exc).__name__}: {exc}") from exc
        for event_type, fields in relays:
            self.ctx.emitter.emit(event_type, **dict(fields))
            self.counts[event_type] = self.counts.get(event_type, 0) + 1
            if event_type == "metrics":
                iteration = fields.get("iteration")
                self.ctx.progress.tick(int(iteration) if isinstance(iteration, int) else None)

    def _control(self) -> None:
        """Pause (SIGSTOP/SIGCONT the group while RunControl blocks) and cancel."""
        control = self.ctx.control
        stopped = False

        def stop_child() -> None:
            nonlocal stopped
            stopped = signal_group(self.proc.pid, signal.SIGSTOP)

        try:
            control.checkpoint(on_pause=stop_child)  # blocks while paused; raises RunCancelled
        finally:
            if stopped:
                signal_group(self.proc.pid, signal.SIGCONT)

    # -- stopping ----------------------------------------------------------------
    def _stop(self) -> None:
        """SIGTERM to the group, SIGKILL after the grace period."""
        if self.proc is None or self.proc.poll() is not None:
            return
        signal_group(self.proc.pid, signal.SIGTERM)
        signal_group(self.proc.pid, signal.SIGCONT)  # a stopped process cannot act on SIGTERM
        asked = time.monotonic()
        try:
            self.proc.wait(timeout=self.grace_s)
        except subprocess.TimeoutExpired:
            self._kill()
            self.ctx.emitter.log(f"the script did not end within {self.grace_s:g} s of SIGTERM: killed",
                                 level="warning", script_exit=self.proc.returncode)
        else:
            self.ctx.emitter.log(f"the script {exit_description(self.proc.returncode)} "
                                 f"{time.monotonic() - asked:.2f} s after SIGTERM", level="info",
                                 script_exit=self.proc.returncode)

    def _kill(self) -> None:
        if self.proc is None:
            return
        signal_group(self.proc.pid, signal.SIGKILL)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover  (SIGKILL is not refused)
            pass

    def _read(self, pipe: IO[str], stream: str, lines: "queue.Queue[tuple[str, Any]]",
              keep: IO[str] | None, tail: bool = False) -> None:
        try:
            for raw in pipe:
                line = raw.rstrip("\n")
                if keep is not None:
                    keep.write(raw if raw.endswith("\n") else raw + "\n")
                    keep.flush()
                if tail:
                    self._stderr_tail.append(line)
                lines.put((stream, line))
        except (OSError, ValueError):  # the pipe closed under us: the child is gone
            pass
        finally:
            lines.put((stream, _EOF))
