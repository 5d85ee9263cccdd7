from __future__ import annotations

import io
import json
import math
import threading

import jsonschema
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mosaic.host.recorder import LineSplitter
from mosaic.workerkit.telemetry import MAX_LINE_BYTES, TelemetryEmitter, encode_event, parse_line
from mosaic.workerkit.telemetry_schema import TELEMETRY_SCHEMA

VALIDATOR = jsonschema.Draft202012Validator(TELEMETRY_SCHEMA)


def lines_of(buf: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().splitlines()]


def test_emitter_writes_valid_envelope_with_increasing_seq():
    buf = io.StringIO()
    em = TelemetryEmitter("run-1", stream=buf)
    em.run_started(worker="w", config_digest="0" * 64, versions={"python": "3"}, resources={})
    em.metrics(iteration=1, timesteps_total=10, episode_return_mean=1.5)
    em.run_completed({"ok": True})
    events = lines_of(buf)
    assert [e["seq"] for e in events] == [0, 1, 2]
    assert [e["type"] for e in events] == ["run_started", "metrics", "run_completed"]
    for event in events:
        VALIDATOR.validate(event)


def test_emitter_survives_numpy_and_nan():
    buf = io.StringIO()
    em = TelemetryEmitter("r", stream=buf)
    em.metrics(iteration=np.int64(3), timesteps_total=np.int32(7),
               episode_return_mean=np.float32("nan"), episode_return_max=float("inf"),
               agent_episode_returns_mean={"a": np.float64(1.25), "b": np.array(2.5)},
               extra=np.arange(3), weird=object())
    (event,) = lines_of(buf)  # strict JSON: json.loads would accept NaN, so check text too
    assert "NaN" not in buf.getvalue() and "Infinity" not in buf.getvalue()
    assert event["iteration"] == 3 and event["timesteps_total"] == 7
    assert event["episode_return_mean"] is None and event["episode_return_max"] is None
    assert event["agent_episode_returns_mean"] == {"a": 1.25, "b": 2.5}
    assert event["extra"] == [0, 1, 2]
    VALIDATOR.validate(event)


def test_emitter_is_thread_safe():
    buf = io.StringIO()
    em = TelemetryEmitter("r", stream=buf)

    def spam():
        for i in range(500):
            em.heartbeat(i=i)

    threads = [threading.Thread(target=spam) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seqs = [e["seq"] for e in lines_of(buf)]
    assert seqs == list(range(4000))


def test_emitter_goes_quiet_on_closed_stream():
    buf = io.StringIO()
    em = TelemetryEmitter("r", stream=buf)
    buf.close()
    assert em.heartbeat() is None  # no exception
    assert em.heartbeat() is None


def test_run_failed_carries_error_and_traceback():
    buf = io.StringIO()
    em = TelemetryEmitter("r", stream=buf)
    try:
        raise ValueError("boom")
    except ValueError as exc:
        em.run_failed(exc)
    (event,) = lines_of(buf)
    assert event["error_type"] == "ValueError" and event["message"] == "boom"
    assert "Traceback" in event["traceback"]
    VALIDATOR.validate(event)


def test_parser_passes_events_through_including_unknown_types_and_versions():
    line = json.dumps({"v": 7, "type": "future_thing", "run_id": "r", "seq": 1, "ts": 0, "x": 1})
    assert parse_line(line) == json.loads(line)
    assert parse_line(line.encode())["type"] == "future_thing"


def test_parser_turns_garbage_into_log_events():
    for garbage in [b"hello world", b"\xff\xfe\x00binary", b"[1,2,3]", b'{"no":"type"}', b"", b"42",
                    b'{"type":"log"} trailing', b'{"type": 5}', b"[" * 100_000]:
        event = parse_line(garbage)
        assert event["type"] == "log" and event["raw"] is True
        assert isinstance(event["message"], str)


def test_parser_accepts_surrounding_whitespace():
    assert parse_line(b'  {"type":"heartbeat","v":1}\r\n')["type"] == "heartbeat"


def test_parser_truncates_and_flags_long_lines():
    event = parse_line(b"x" * (MAX_LINE_BYTES + 10))
    assert event["truncated"] is True and event["original_bytes"] == MAX_LINE_BYTES + 10
    assert len(event["message"]) == MAX_LINE_BYTES


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300), st.text(max_size=300)))
def test_parser_never_raises(data):
    event = parse_line(data)
    assert isinstance(event, dict) and isinstance(event["type"], str)


@settings(max_examples=200, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=5), kids, max_size=4),
                    max_leaves=20))
def test_encode_event_always_gives_strict_json(payload):
    text = encode_event({"type": "log", "payload": payload})
    decoded = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
    assert decoded["type"] == "log"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40).filter(lambda b: b"\n" not in b), max_size=20),
       st.integers(min_value=1, max_value=17), st.integers(min_value=4, max_value=30))
def test_line_splitter_recovers_lines_from_any_chunking(lines, chunk, max_bytes):
    stream = b"".join(line + b"\n" for line in lines)
    splitter = LineSplitter(max_bytes=max_bytes)
    out = []
    for i in range(0, len(stream), chunk):
        out.extend(splitter.feed(stream[i:i + chunk]))
    out.extend(splitter.flush())
    expected = [line if len(line) <= max_bytes else line[:max_bytes + 1] for line in lines]
    assert out == expected


def test_line_splitter_flushes_unterminated_tail():
    splitter = LineSplitter()
    assert list(splitter.feed(b"abc")) == []
    assert list(splitter.flush()) == [b"abc"]


def test_schema_rejects_broken_events():
    good = {"v": 1, "type": "metrics", "run_id": "r", "seq": 0, "ts": 1.0,
            "iteration": 1, "timesteps_total": 5}
    VALIDATOR.validate(good)
    for broken in [{**good, "seq": -1}, {**good, "run_id": "../x"},
                   {k: v for k, v in good.items() if k != "iteration"},
                   {**good, "type": "nonsense"}, {**good, "episode_return_mean": "high"}]:
        assert not VALIDATOR.is_valid(broken), broken
    assert math.isfinite(good["ts"])
