"""Process groups, hostile output, the concurrency limit, restarts and shutdown."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
from pathlib import Path

import psutil

from dm_helpers import random_config, wait_until, worker_seqs
from mosaic.host.daemon.client import state_name

# Started as the `random` worker's interpreter (--python random=THIS): for a run
# whose seed is 4242 it leaves a SIGTERM-immune child in the worker's process
# group; for seed 666 a child writes garbage into the worker's stdout while it
# runs. Then it becomes the real worker.
WRAPPER = textwrap.dedent(f"""\
    #!{sys.executable}
    import json, os, signal, subprocess, sys, time
    args = sys.argv[1:]
    seed = None
    if "--config" in args and "--run-dir" in args:
        seed = json.load(open(args[args.index("--config") + 1])).get("seed")
    if seed == 4242:
        subprocess.Popen([sys.executable, "-c",
                          "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
    if seed == 666 and os.fork() == 0:
        time.sleep(0.5)
        for piece in (b"\\x00\\xff\\xfe\\x80 binary\\n", b"plain print, not json\\n", b"[1, 2, 3]\\n",
                      b'{{"type": 5}}\\n', b'{{"deep": ' * 20000 + b"\\n", b"x" * (3 << 20) + b"\\n",
                      b"\\xc3\\x28 invalid utf-8\\n"):
            os.write(1, piece)
        os._exit(0)
    os.execv({sys.executable!r}, [{sys.executable!r}, *args])
    """)


def make_wrapper(tmp_path: Path) -> Path:
    path = tmp_path / "python-wrapper"
    path.write_text(WRAPPER)
    path.chmod(0o755)
    return path


def group_members(pgid: int) -> list[psutil.Process]:
    """Live processes of a group (a zombie is dead, just not yet reaped by its new parent)."""
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.Error):
            continue
    return members


def gone(proc: psutil.Process) -> bool:
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_cancel_kills_the_whole_process_group(daemon_factory, tmp_path):
    d = daemon_factory("--python", f"random={make_wrapper(tmp_path)}", "--cancel-grace", "10")
    run_id = d.submit(random_config(seed=4242))
    info = d.wait_state(run_id, "RUNNING")
    members = wait_until(lambda: len(m := group_members(info.pid)) >= 2 and m, 10,
                         "the worker and its child in one group")
    assert {p.pid for p in members} > {info.pid}
    d.client.cancel(run_id, reason="enough")
    info = d.wait_state(run_id, "CANCELLED", timeout=15)
    assert info.exit_code == 3  # the worker itself stopped cleanly
    wait_until(lambda: all(gone(p) for p in members), 5, "no process of the group left")
    assert group_members(info.pid) == []
    last = d.events(run_id)[-1]
    assert last["type"] == "run_cancelled" and last.get("origin") != "daemon"


def test_a_second_cancel_stops_waiting_for_the_worker(daemon_factory):
    """The first cancel waits for the worker's safe point (here up to a 10 s step); the second kills at once."""
    d = daemon_factory("--cancel-grace", "60")
    run_id = d.submit(random_config(total_timesteps=100, step_delay_s=10))
    d.wait_state(run_id, "RUNNING")
    wait_until(lambda: any(e["type"] == "run_started" for e in d.events(run_id)), 60, "the worker's first event")
    d.client.cancel(run_id, reason="first")
    assert d.state(run_id) == "RUNNING"  # still stepping: the cancel is honoured at the next step
    d.client.cancel(run_id, reason="second")
    info = d.wait_state(run_id, "CANCELLED", timeout=8)  # well before the step (or the 60 s grace) ends
    assert info.exit_code == -signal.SIGKILL
    last = d.events(run_id)[-1]
    assert last["type"] == "run_cancelled" and last["origin"] == "daemon"
    assert last["reason"] == "first (worker stopped by SIGKILL)", last
    assert "cancel asked again (second): SIGKILL now" in d.log()


def test_stopping_the_daemon_does_not_kill_a_run_it_is_already_cancelling(daemon_factory):
    """``experiment cancel`` then ``daemon stop``: the shutdown is not a second cancel; the run still reaches its
    safe point (here the end of a 3 s step) and ends as the worker ends it, within the first cancel's grace."""
    d = daemon_factory("--cancel-grace", "60")
    run_id = d.submit(random_config(total_timesteps=100, step_delay_s=3))
    d.wait_state(run_id, "RUNNING")
    wait_until(lambda: any(e["type"] == "run_started" for e in d.events(run_id)), 60, "the worker's first event")
    d.client.cancel(run_id, reason="first")
    assert d.stop(timeout=60) == 0
    last = d.events(run_id)[-1]
    assert last["type"] == "run_cancelled" and last.get("origin") != "daemon", last
    assert "SIGKILL" not in d.log()


def test_garbage_on_stdout_disturbs_neither_the_daemon_nor_other_runs(daemon_factory, tmp_path):
    d = daemon_factory("--python", f"random={make_wrapper(tmp_path)}")
    noisy = d.submit(random_config(seed=666, total_timesteps=1500, step_delay_s=0.002))
    calm = d.submit(random_config(seed=1, total_timesteps=1500, step_delay_s=0.002))
    streamed = [json.loads(e.json) for e in d.client.telemetry(noisy, 0, follow=True)]
    assert d.wait_state(noisy, "COMPLETED").exit_code == 0
    assert d.wait_state(calm, "COMPLETED").exit_code == 0
    stored = d.events(noisy)
    assert streamed == stored and [e["seq"] for e in stored] == list(range(len(stored)))
    raw = [e for e in stored if e.get("raw")]
    assert len(raw) == 7  # binary, plain, array, bad type, deep nesting, the long line, bad utf-8
    long = [e for e in raw if e.get("truncated")]
    assert len(long) == 1 and long[0]["original_bytes"] > 1 << 20 >= len(long[0]["message"])
    assert any("\ufffd" in e["message"] for e in raw)
    # the worker's own events all arrived, in order, around the garbage
    mine = worker_seqs(stored)
    assert mine == list(range(len(mine))) and stored[-1]["type"] == "run_completed"
    calm_events = d.events(calm)
    assert not any(e.get("raw") for e in calm_events)
    assert worker_seqs(calm_events) == list(range(len(calm_events)))
    assert d.client.health().pid == d.proc.pid


def test_concurrency_limit_queues_and_cancelled_queue_entries(daemon_factory):
    d = daemon_factory("--max-runs", "1")
    first, second, third = (d.submit(random_config()) for _ in range(3))
    d.wait_state(first, "RUNNING")
    info = d.client.get(second)
    assert state_name(info.state) == "QUEUED" and info.queue_position == 1
    assert d.client.get(third).queue_position == 2
    d.client.cancel(third)
    info = d.wait_state(third, "CANCELLED", timeout=2)
    assert not info.has_exit_code and d.events(third)[-1]["type"] == "run_cancelled"
    # The scheduler ran on that cancel; the first run keeps the only slot while it makes progress.
    progressed = len(d.events(first))
    wait_until(lambda: len(d.events(first)) > progressed + 5, 20, "the first run's progress")
    assert d.state(second) == "QUEUED"  # still waiting for the slot
    d.client.cancel(first)
    d.wait_state(first, "CANCELLED")
    d.wait_state(second, "RUNNING")
    d.client.cancel(second)
    d.wait_state(second, "CANCELLED")


def test_daemon_restart_reattaches_live_workers_and_fails_dead_ones(daemon_factory, tmp_path):
    d = daemon_factory()
    survivor = d.submit(random_config())
    casualty = d.submit(random_config())
    survivor_pid = d.wait_state(survivor, "RUNNING").pid
    casualty_pid = d.wait_state(casualty, "RUNNING").pid
    d.proc.kill()  # the daemon dies without a word
    d.proc.wait(10)
    os.kill(casualty_pid, signal.SIGKILL)  # and one worker dies while nobody watches
    seen = len(d.events(survivor))
    # the survivor keeps training (and printing to its stdout file) meanwhile
    stdout = d.home / "trainer" / "runs" / survivor / "logs" / "worker.stdout"
    printed = stdout.read_bytes().count(b"\n")
    wait_until(lambda: stdout.read_bytes().count(b"\n") > printed + 20, 20, "the survivor printing unwatched")
    d2 = daemon_factory()
    info = d2.wait_state(casualty, "FAILED", timeout=10)
    assert "daemon restarted" in info.failure_reason
    assert d2.events(casualty)[-1]["type"] == "run_failed"
    info = d2.client.get(survivor)
    assert state_name(info.state) == "RUNNING" and info.pid == survivor_pid
    # followed again: new events arrive, and none printed while the daemon was down is lost
    wait_until(lambda: d2.client.get(survivor).next_seq > seen + 50, 20, "the survivor's telemetry")
    d2.client.cancel(survivor)
    d2.wait_state(survivor, "CANCELLED")
    events = d2.events(survivor)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert worker_seqs(events) == list(range(len(events)))
    assert events[-1]["type"] == "run_cancelled"


def test_sigterm_stops_workers_gracefully_and_keeps_the_queue(daemon_factory):
    d = daemon_factory("--max-runs", "1")
    running = d.submit(random_config())
    queued = d.submit(random_config())
    pid = d.wait_state(running, "RUNNING").pid
    assert d.stop(timeout=30) == 0
    assert not psutil.pid_exists(pid) or gone(psutil.Process(pid))
    events = d.events(running)
    assert events[-1]["type"] == "run_cancelled" and events[-1].get("origin") != "daemon"
    d2 = daemon_factory()
    assert d2.state(running) == "CANCELLED" and "shutting down" in d2.client.get(running).state_reason
    d2.wait_state(queued, "RUNNING")  # the queue survived the restart
    d2.client.cancel(queued)
    d2.wait_state(queued, "CANCELLED")


def test_one_daemon_per_home(daemon_factory, tmp_path):
    d = daemon_factory()
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "mosaic", "daemon", "--port", "0"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "MOSAIC_HOME": str(d.home)})
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("mosaic: error: another daemon already serves")
    assert "Traceback" not in proc.stderr
    # another home, but the same port: one clear line, nothing else on stderr
    port = d.client.address.rsplit(":", 1)[1]
    proc = subprocess.run([sys.executable, "-m", "mosaic", "daemon", "--port", port], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "MOSAIC_HOME": str(tmp_path / "other")})
    assert proc.returncode == 2
    assert proc.stderr == f"mosaic: error: --port: cannot listen on 127.0.0.1:{port}: Address already in use\n"
    assert d.client.health().pid == d.proc.pid
