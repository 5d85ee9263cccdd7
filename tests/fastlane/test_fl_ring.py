"""The ring in one process: layout round trips, torn-read detection, closing and replacing."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fl_helpers import check, pattern, unique_name
from mosaic.fastlane.ring import Geometry, RingReader, RingWriter, encode_meta, read_header
from mosaic.fastlane.shm import SHM_DIR, FastLaneError, StreamNotFound, list_segments

geometries = st.builds(Geometry, height=st.integers(1, 48), width=st.integers(1, 48),
                       channels=st.sampled_from([1, 2, 3, 4]),
                       dtype=st.sampled_from(["|u1", "<u2", "<f4", "<i4"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(geometry=geometries, capacity=st.integers(1, 6), frames=st.integers(0, 20))
def test_every_frame_still_in_the_ring_reads_back_exactly(geometry, capacity, frames):
    name = unique_name()
    with RingWriter(name, geometry, capacity) as writer, RingReader(name) as reader:
        assert reader.geometry == geometry and reader.header.capacity == capacity
        for n in range(frames):
            writer.write(pattern(geometry, n), n // 10, n % 10, {"n": n})
        assert reader.frames_written == frames
        latest = reader.latest()
        if frames == 0:
            assert latest is None
        else:
            assert latest.index == frames - 1
            check(latest, geometry)
        for n in range(frames):
            frame = reader.read(n)
            if n >= frames - capacity:
                check(frame, geometry)
            else:
                assert frame is None  # overwritten: never handed out as another frame
        assert reader.read(frames) is None  # not written yet
        assert reader.torn_reads == 0


def test_a_copy_that_races_the_writer_is_detected_not_returned():
    name = unique_name()
    geometry = Geometry(8, 8, 3)
    with RingWriter(name, geometry, capacity=1) as writer, RingReader(name) as reader:
        writer.write(pattern(geometry, 0), 0, 0, {"n": 0})
        original_copyto = np.copyto

        def copy_then_write(dst, src, **kw):  # the writer overwrites the slot mid-copy
            original_copyto(dst, src, **kw)
            if dst.shape == geometry.shape and reader.torn_reads == 0 and not getattr(copy_then_write, "done", 0):
                copy_then_write.done = 1
                np.copyto = original_copyto
                writer.write(pattern(geometry, 1), 0, 1, {"n": 1})

        np.copyto = copy_then_write
        try:
            assert reader.read(0) is None
        finally:
            np.copyto = original_copyto
        assert reader.torn_reads == 1
        check(reader.latest(), geometry)  # the retry gets the new frame intact


def test_a_slot_being_written_is_skipped():
    name = unique_name()
    geometry = Geometry(4, 4, 1)
    with RingWriter(name, geometry, capacity=2) as writer, RingReader(name) as reader:
        writer.write(pattern(geometry, 0), 0, 0, {"n": 0})
        writer._views.u64[0, 0] = 1  # as if the writer were half-way through frame 0 again
        assert reader.read(0) is None
        assert reader.torn_reads == 0


def test_frames_of_another_geometry_are_refused():
    name = unique_name()
    with RingWriter(name, Geometry(4, 5, 3)) as writer:
        with pytest.raises(ValueError, match="geometry"):
            writer.write(np.zeros((5, 4, 3), np.uint8))
        with pytest.raises(ValueError, match="geometry"):
            writer.write(np.zeros((4, 5, 3), np.float32))
        writer.write(np.zeros((4, 5, 3), np.uint8))


def test_metadata_is_bounded_and_json_safe():
    huge = {"rewards": {f"agent_{i}": float(i) for i in range(5000)}, "episode": 3, "bad": float("nan")}
    data = encode_meta(huge, 2048)
    assert len(data) <= 2048
    assert b'"truncated":true' in data and b'"episode":3' in data and b"NaN" not in data
    name = unique_name()
    with RingWriter(name, Geometry(2, 2, 1), meta_capacity=2048) as writer, RingReader(name) as reader:
        writer.write(np.zeros((2, 2, 1), np.uint8), 1, 2, huge)
        assert reader.latest().meta == {"episode": 3, "bad": None, "truncated": True}


def test_header_records_geometry_owner_and_writer():
    name = unique_name()
    with RingWriter(name, Geometry(3, 7, 4, "<f4"), capacity=5, owner={"run_id": "r1", "stream": "s"}) as w:
        with RingReader(name) as reader:
            hd = reader.header
            assert hd.geometry == Geometry(3, 7, 4, "<f4") and hd.capacity == 5
            assert hd.writer_pid == os.getpid() and hd.owner["run_id"] == "r1"
            assert hd.generation == w.generation and not hd.closed


def test_closing_marks_the_ring_and_unlinks_its_name():
    name = unique_name()
    writer = RingWriter(name, Geometry(2, 2, 3))
    writer.write(np.ones((2, 2, 3), np.uint8))
    reader = RingReader(name)
    writer.close()
    assert reader.closed and reader.replaced()
    assert reader.latest() is not None  # the mapping stays readable until the reader lets go
    reader.close()
    assert name not in list_segments()
    with pytest.raises(StreamNotFound):
        RingReader(name)


def test_a_new_writer_replaces_the_name_atomically():
    name = unique_name()
    first = RingWriter(name, Geometry(2, 2, 1))
    reader = RingReader(name)
    second = RingWriter(name, Geometry(3, 3, 1))  # a restart: same name, new segment
    assert reader.replaced() and not reader.closed
    with RingReader(name) as fresh:
        assert fresh.geometry == Geometry(3, 3, 1)
    first.close()  # must not unlink its successor
    assert name in list_segments()
    second.close()
    reader.close()
    assert name not in list_segments()


def test_foreign_files_are_not_rings(tmp_path):
    name = unique_name()
    (SHM_DIR / name).write_bytes(b"x" * 8192)
    try:
        with pytest.raises(FastLaneError, match="magic"):
            RingReader(name)
    finally:
        os.unlink(SHM_DIR / name)
    with pytest.raises(FastLaneError):
        read_header(b"\0" * 100, 100)
