"""Throttle, PNG, publisher failure handling, naming, and the lazy import of the package."""

from __future__ import annotations

import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
from mosaic.fastlane.png import encode_png, read_png, to_uint8, write_png
from mosaic.fastlane.publisher import Publisher
from mosaic.fastlane.shm import list_segments, parse_segment_name, segment_name
from mosaic.fastlane.throttle import Throttle


def test_throttle_caps_the_frame_rate():
    throttle = Throttle(fps=20)
    t0 = time.monotonic()
    assert throttle.due()
    throttle.done(t0, 0.0001)
    assert throttle.interval == pytest.approx(0.05)
    assert not throttle.due(t0 + 0.049) and throttle.due(t0 + 0.05)  # the clock given: no race with the real one


def test_expensive_renders_lower_the_rate_to_stay_within_budget():
    throttle = Throttle(fps=30, max_overhead=0.05)
    throttle.done(time.monotonic(), 0.02)  # a 20 ms render may happen every 0.4 s at most
    assert throttle.interval == pytest.approx(0.4)
    assert throttle.effective_fps == pytest.approx(2.5)
    cheap = Throttle(fps=30, max_overhead=0.05)
    cheap.done(time.monotonic(), 0.0001)
    assert cheap.interval == pytest.approx(1 / 30)


def test_no_cap_means_every_frame():
    throttle = Throttle(fps=0)
    throttle.done(time.monotonic(), 0.001)
    assert throttle.due()


@settings(max_examples=40, deadline=None)
@given(h=st.integers(1, 40), w=st.integers(1, 40), c=st.sampled_from([1, 2, 3, 4]), seed=st.integers(0, 2**16))
def test_png_round_trip(tmp_path_factory, h, w, c, seed):
    pixels = np.random.default_rng(seed).integers(0, 256, (h, w, c), dtype=np.uint8)
    path = write_png(tmp_path_factory.mktemp("png") / "f.png", pixels, {"episode": 3})
    decoded, meta = read_png(path)
    np.testing.assert_array_equal(decoded, pixels)
    assert meta == {"episode": 3}


def test_png_is_readable_by_an_independent_decoder(tmp_path):
    pygame = pytest.importorskip("pygame")
    pixels = np.zeros((30, 50, 3), np.uint8)
    pixels[:, :25] = (255, 0, 0)
    pixels[10, 40] = (1, 2, 3)
    path = write_png(tmp_path / "f.png", pixels)
    surface = pygame.image.load(str(path))
    assert surface.get_size() == (50, 30)
    assert tuple(surface.get_at((0, 0)))[:3] == (255, 0, 0) and tuple(surface.get_at((40, 10)))[:3] == (1, 2, 3)


def test_frames_of_other_dtypes_are_shown_as_8_bit():
    assert to_uint8(np.array([[[0.0, 0.5, 1.0]]], np.float32)).tolist() == [[[0, 127, 255]]]
    assert to_uint8(np.array([[[-5.0, 300.0, 7.0]]], np.float32)).tolist() == [[[0, 255, 7]]]
    assert encode_png(np.zeros((2, 2, 6), np.uint8)).startswith(b"\x89PNG")


def test_names_round_trip_and_reject_bad_streams():
    name = segment_name("20261122-0000-abc.x", "runner-3")
    assert parse_segment_name(name) == ("20261122-0000-abc.x", "runner-3")
    assert parse_segment_name("psm_1234") is None
    with pytest.raises(ValueError):
        segment_name("run", "a.b")
    with pytest.raises(ValueError):
        segment_name("run", "")


def test_a_failing_render_turns_the_stream_off_instead_of_raising(tmp_path):
    logged = []
    publisher = Publisher(FastLaneTarget("fail-run", str(tmp_path), FastLaneConfig(enabled=True, fps=0, max_overhead=0)),
                          "main", log=logged.append)
    assert publisher.offer(lambda: np.zeros((4, 4, 3), np.uint8), 0, 0)
    assert segment_name("fail-run", "main") in list_segments()

    def broken():
        raise RuntimeError("no renderer")

    assert not publisher.offer(broken, 0, 1)
    assert publisher.failed and "no renderer" in logged[0]
    assert not publisher.due()  # off for good: no more render calls
    assert segment_name("fail-run", "main") not in list_segments()
    assert not publisher.offer(lambda: None, 0, 2)
    publisher.close()


def test_a_publisher_that_never_publishes_leaves_nothing(tmp_path):
    publisher = Publisher(FastLaneTarget("idle-run", str(tmp_path), FastLaneConfig(enabled=True)), "main")
    publisher.close()
    assert not list_segments("idle-run") and not (tmp_path / "fastlane.json").exists()


def test_package_import_needs_no_numpy():
    code = ("import sys; sys.modules['numpy'] = None\n"
            "import mosaic.fastlane, mosaic.fastlane.config, mosaic.clients.cli\n"
            "assert mosaic.fastlane.FastLaneConfig().fps == 30\nprint('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
