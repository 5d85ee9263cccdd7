"""Writer and readers in separate processes: contention, attach order, restart, geometry change."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fl_helpers import CTX, check, pattern, start, stop, unique_name, wait_for, write_frames
from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
from mosaic.fastlane.follow import StreamFollower
from mosaic.fastlane.publisher import Publisher
from mosaic.fastlane.ring import Geometry, RingReader
from mosaic.fastlane.shm import StreamNotFound, list_segments, segment_name


def read_under_contention(name: str, geometry: Geometry, until_frames: int, timeout: float = 30):
    """Read the newest frame over and over while the writer runs; check every frame returned."""
    reader = wait_for(lambda: _try_attach(name))
    seen, indices = 0, set()
    buf = reader.new_buffer()
    deadline = time.monotonic() + timeout
    try:
        # A reader that starts late on a busy machine may find the writer done: it still
        # reads (the writer holds its last frames) until it has checked at least one frame.
        while (reader.frames_written < until_frames or seen == 0) and time.monotonic() < deadline:
            frame = reader.latest(out=buf)
            if frame is not None:
                check(frame, geometry)  # a torn copy would fail here: it must never come back
                seen += 1
                indices.add(frame.index)
        return seen, len(indices), reader.torn_reads
    finally:
        reader.close()


def _try_attach(name: str) -> RingReader | None:
    try:
        return RingReader(name)
    except StreamNotFound:
        return None


def _reader_child(name: str, geometry: Geometry, until: int, results) -> None:
    try:
        results.put(("ok", *read_under_contention(name, geometry, until)))
    except BaseException as exc:  # report, don't hang the parent
        results.put(("error", repr(exc), 0, 0))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(height=st.integers(1, 120), width=st.integers(1, 160), channels=st.sampled_from([1, 3, 4]),
       dtype=st.sampled_from(["|u1", "<f4"]), capacity=st.integers(1, 4))
def test_readers_in_other_processes_only_ever_get_intact_frames(height, width, channels, dtype, capacity):
    geometry = Geometry(height, width, channels, dtype)
    name = unique_name()
    frames = 3000
    hold = CTX.Event()
    writer = start(write_frames, name, geometry, frames, capacity, hold=hold)
    results = CTX.Queue()
    other = start(_reader_child, name, geometry, frames, results)  # a second reader process
    try:
        seen, distinct, _ = read_under_contention(name, geometry, frames)
        status, *rest = results.get(timeout=60)
        assert status == "ok", rest
        assert seen > 0 and distinct > 0 and rest[0] > 0
    finally:
        hold.set()
        stop(writer)
        stop(other)
    assert name not in list_segments()


def test_torn_reads_happen_under_contention_and_are_all_detected():
    """One slot, big frames, a writer in a tight loop: readers collide with it and must notice."""
    geometry = Geometry(512, 512, 3)  # 768 KiB per frame
    name = unique_name()
    hold = CTX.Event()
    writer = start(write_frames, name, geometry, None, 1, duration_s=25, hold=hold)
    reader = wait_for(lambda: _try_attach(name))
    buf = reader.new_buffer()
    good = 0
    deadline = time.monotonic() + 25
    try:
        while time.monotonic() < deadline and not (reader.torn_reads >= 3 and good >= 20):
            index = reader.frames_written - 1
            frame = reader.read(index, out=buf)  # no retry: count every collision
            if frame is not None:
                check(frame, geometry)
                good += 1
        assert reader.torn_reads >= 3, f"no collision seen in 25 s ({good} clean reads)"
        assert good >= 20
    finally:
        reader.close()
        hold.set()
        os.kill(writer.pid, signal.SIGTERM)
        stop(writer)
        # SIGTERM skips the writer's close: remove what it left, as gc would
        for leftover in list_segments():
            if leftover == name:
                os.unlink(f"/dev/shm/{name}")


def test_reader_attached_before_the_writer_starts():
    name = unique_name()
    geometry = Geometry(16, 24, 3)
    follower = StreamFollower(name)
    assert follower.poll() is None and not follower.attached
    hold = CTX.Event()
    writer = start(write_frames, name, geometry, 50, 4, tag="late", hold=hold, period_s=0.001)
    try:
        frame = wait_for(follower.poll)
        check(frame, geometry, tag="late")
        last = wait_for(lambda: (f := follower.poll()) is not None and f.index == 49 and f)
        check(last, geometry, tag="late")
    finally:
        follower.close()
        hold.set()
        stop(writer)


def test_reader_attached_after_the_writer_has_published():
    name = unique_name()
    geometry = Geometry(30, 20, 1)
    hold = CTX.Event()
    writer = start(write_frames, name, geometry, 25, 4, tag="early", hold=hold)
    try:
        reader = wait_for(lambda: (r := _try_attach(name)) is not None and r.frames_written == 25 and r)
        with reader:
            frame = reader.latest()
            assert frame.index == 24
            check(frame, geometry, tag="early")
            assert [reader.read(i) is not None for i in range(19, 25)] == [False] * 2 + [True] * 4
    finally:
        hold.set()
        stop(writer)
    assert name not in list_segments()


def test_follower_reattaches_after_the_writer_is_killed_and_restarted():
    name = unique_name()
    geometry = Geometry(12, 12, 3)
    first = start(write_frames, name, geometry, None, 4, tag="A", duration_s=60, period_s=0.002)
    follower = StreamFollower(name, recheck_s=0.05)
    try:
        check(wait_for(follower.poll), geometry, tag="A")
        os.kill(first.pid, signal.SIGKILL)  # a crash: no close, the segment stays
        first.join(10)
        assert name in list_segments()
        hold = CTX.Event()
        second = start(write_frames, name, geometry, 40, 4, tag="B", hold=hold, period_s=0.002)
        try:
            frame = wait_for(lambda: (f := follower.poll()) is not None and f.meta.get("tag") == "B" and f)
            check(frame, geometry, tag="B")
            assert follower.attachments == 2
        finally:
            hold.set()
            stop(second)
    finally:
        follower.close()
    assert name not in list_segments()  # the restarted writer's close removed the shared name


def _publish_two_geometries(run_dir: str, run_id: str, hold) -> None:
    publisher = Publisher(FastLaneTarget(run_id, run_dir, FastLaneConfig(enabled=True, fps=0)), "main")
    small, tall = Geometry(32, 48, 3), Geometry(64, 20, 1)
    for n in range(10):
        publisher.publish(pattern(small, n), n // 10, n % 10, {"n": n, "tag": "small"})
        time.sleep(0.003)
    for n in range(10):
        publisher.publish(pattern(tall, n), n // 10, n % 10, {"n": n, "tag": "tall"})
        time.sleep(0.003)
    hold.wait(60)
    publisher.close()


def test_a_geometry_change_recreates_the_stream_and_readers_follow(tmp_path):
    run_id = f"geo-{os.getpid()}-{time.monotonic_ns()}"
    name = segment_name(run_id, "main")
    follower = StreamFollower(name, recheck_s=0.05)
    hold = CTX.Event()
    writer = start(_publish_two_geometries, str(tmp_path), run_id, hold)
    try:
        seen = []

        last_index = []

        def reached_tall():
            frame = follower.poll()  # None when no new frame has come since the last poll
            if frame is not None:
                seen.append((frame.meta["tag"], frame.pixels.shape))
                last_index[:] = [frame.index]
                check(frame, Geometry(*frame.pixels.shape, frame.pixels.dtype.str), tag=frame.meta["tag"])
            return seen and seen[-1][0] == "tall" and last_index == [9]

        wait_for(reached_tall)
        tags = [tag for tag, _ in seen]
        assert tags == sorted(tags, key=lambda tag: tag == "tall")  # never back to the old geometry
        assert {shape for tag, shape in seen if tag == "tall"} == {(64, 20, 1)}
        assert {shape for tag, shape in seen if tag == "small"} <= {(32, 48, 3)}
    finally:
        follower.close()
        hold.set()
        stop(writer)
    assert name not in list_segments()
    assert (tmp_path / "fastlane" / "main.png").is_file()  # the last frame outlives the segment


FOREIGN_WRITER = """\
import os, sys, time
import numpy as np
from mosaic.fastlane.ring import Geometry, RingWriter
if os.fork():  # the intermediate process exits: the writer is no longer in the test's process tree
    os._exit(0)
os.setsid()
with RingWriter(sys.argv[1], Geometry(4, 4, 3), 2) as writer:
    writer.write(np.zeros((4, 4, 3), np.uint8), 0, 0, {})
    print(os.getpid(), flush=True)
    time.sleep(300)
"""


def test_leak_checks_blame_only_this_process_trees_segments():
    """Another MOSAIC run streaming on the machine is not a leak of the tests (nor to be removed)."""
    from mosaic.fastlane.shm import SHM_DIR
    from mosaic.testing import fastlane_leaks

    before = set(list_segments())
    geometry = Geometry(4, 4, 3)
    mine, crashed, theirs = unique_name("mine"), unique_name("crashed"), unique_name("theirs")
    hold = CTX.Event()
    live = start(write_frames, mine, geometry, 1, hold=hold)
    dying = start(write_frames, crashed, geometry, 1, hold=CTX.Event())
    foreign = subprocess.Popen([sys.executable, "-c", FOREIGN_WRITER, theirs], stdout=subprocess.PIPE, text=True)
    foreign_pid = int(foreign.stdout.readline())
    try:
        wait_for(lambda: {mine, crashed, theirs} <= set(list_segments()))
        os.kill(dying.pid, signal.SIGKILL)  # a writer that died without closing: its segment stays
        dying.join(10)
        assert fastlane_leaks(before) == sorted([mine, crashed])
    finally:
        hold.set()
        stop(live)
        os.kill(foreign_pid, signal.SIGKILL)
        foreign.wait(10)
        for name in (crashed, theirs):
            try:
                os.unlink(SHM_DIR / name)
            except FileNotFoundError:
                pass
    assert not {mine, crashed, theirs} & set(list_segments())
