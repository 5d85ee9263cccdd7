"""The daemon's kept ``--validate-many`` processes (:class:`mosaic.host.launcher.ConfigChecker`): the same
answers as a fresh process, one process across calls, closed when idle, replaced when it died, and gone with its
stdin. Real worker processes (the random worker), no mocks."""

from __future__ import annotations

import os
import signal

import pytest

from mosaic.errors import UserError
from mosaic.host.discovery import discover_workers
from mosaic.host.launcher import ConfigChecker, validate_configs
from mosaic.testing.waiting import wait_until

RANDOM = discover_workers().get("random")
GOOD = {"worker": "random", "environment": {"family": "classic", "env_id": "connect_four_v3"},
        "total_timesteps": 500, "seed": 3, "run_id": "chk-1"}
BAD = {**GOOD, "total_timesteps": 0, "run_id": "chk-2"}


def gone(pid: int) -> bool:
    """Reaped (close waits for its exit), or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.fixture
def checker():
    made = ConfigChecker()
    yield made
    made.close()


def test_a_kept_process_answers_as_a_fresh_one_and_serves_the_next_call(checker):
    fresh = validate_configs(RANDOM, [GOOD, BAD])
    rounded_fresh: list = []
    rounded_kept: list = []
    validate_configs(RANDOM, [GOOD], rounded=rounded_fresh)
    kept = checker.check(RANDOM, [GOOD, BAD])
    assert kept[0] == fresh[0] and isinstance(kept[1], UserError) and str(kept[1]) == str(fresh[1])
    assert str(kept[1]).startswith("total_timesteps"), str(kept[1])
    [pid] = checker.pids()
    checker.check(RANDOM, [GOOD], rounded=rounded_kept)
    assert rounded_kept == rounded_fresh
    assert checker.pids() == [pid], "a second call started another process instead of using the kept one"


def test_a_long_batch_does_not_block_on_full_pipes(checker):
    """Answers are read while the lines still go in: a batch whose answers overfill a pipe completes."""
    configs = [{**GOOD, "run_id": f"chk-many-{i}", "seed": i} for i in range(400)]
    answers = checker.check(RANDOM, configs)
    assert [a["seed"] for a in answers] == list(range(400))


def test_idle_processes_are_closed_and_a_dead_one_is_replaced(checker):
    checker.check(RANDOM, [GOOD])
    [pid] = checker.pids()
    assert checker.close_idle() == 0 and checker.pids() == [pid], "closed before it was idle for keep_s"
    os.kill(pid, signal.SIGKILL)  # killed while kept (for memory, say): the next call is answered by a new one,
    assert isinstance(checker.check(RANDOM, [GOOD])[0], dict)  # whether or not it has ended by then
    [new] = checker.pids()
    assert new != pid
    checker.keep_s = 0.0
    assert checker.close_idle() == 1 and checker.pids() == []
    wait_until(lambda: gone(new), 10, "the idle process to end")


def test_a_process_that_dies_mid_batch_is_a_clear_error_and_not_kept(checker, tmp_path):
    """A worker whose interpreter cannot start: the error names the worker; nothing is kept."""
    with pytest.raises(OSError):
        checker.check(RANDOM, [GOOD], python=str(tmp_path / "no-python"))
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'boom: cannot import the worker' >&2\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(UserError, match="'random' could not check the configs: boom: cannot import the worker"):
        checker.check(RANDOM, [GOOD], python=str(broken))
    assert checker.pids() == []


def test_the_process_ends_when_its_stdin_closes(checker):
    """So it cannot outlive the daemon that holds it, however the daemon ends."""
    checker.check(RANDOM, [GOOD])
    [pid] = checker.pids()
    held = checker._idle[("random", RANDOM.python or __import__("sys").executable)]
    held.proc.stdin.close()
    assert held.proc.wait(30) == 0
