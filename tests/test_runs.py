from __future__ import annotations

import json
import time

import pytest

from mosaic.errors import UserError
from mosaic.host.recorder import RunRecorder
from mosaic.runs import RunStore, new_run_id, validate_run_id


@pytest.mark.parametrize("bad", ["../x", "..", ".", "a/b", "", "x" * 129, "sp ace", "é", "a\x00b", 5])
def test_bad_run_ids_are_rejected(bad):
    with pytest.raises(UserError, match="run_id"):
        validate_run_id(bad)


def test_good_run_ids_pass():
    for good in ["a", "run-1.2_3", "x" * 128, new_run_id()]:
        assert validate_run_id(good) == good


def test_run_ids_sort_by_creation_time():
    ids = []
    for _ in range(3):
        ids.append(new_run_id())
        time.sleep(0.002)
    assert ids == sorted(ids) and len(set(ids)) == 3


def test_store_creates_complete_folder(tmp_path):
    store = RunStore(tmp_path)
    run = store.create("r1", {"a": 1}, {"worker": "w"})
    assert run.root == tmp_path / "trainer" / "runs" / "r1"
    for name in ["config.json", "telemetry.jsonl", "analytics.json", "checkpoints", "tensorboard",
                 "logs", "eval", "videos"]:
        assert (run.root / name).exists(), name
    assert run.read_config() == {"a": 1}
    manifest = run.read_manifest()
    assert manifest["run_id"] == "r1" and manifest["worker"] == "w"
    assert manifest["artefacts"]["checkpoints"] == "checkpoints/"
    with pytest.raises(UserError, match="already exists"):
        store.create("r1", {}, {})
    assert [r.run_id for r in store.list()] == ["r1"]  # no staging leftovers


def test_store_never_leaves_paths_outside(tmp_path):
    store = RunStore(tmp_path / "home")
    for bad in ["../escape", "..", "/abs"]:
        with pytest.raises(UserError):
            store.create(bad, {}, {})
    assert not (tmp_path / "escape").exists()


def test_resolve_by_prefix_and_latest(tmp_path):
    store = RunStore(tmp_path)
    store.create("20260101-a", {}, {})
    store.create("20260102-b", {}, {})
    assert store.resolve("latest").run_id == "20260102-b"
    assert store.resolve("20260101").run_id == "20260101-a"
    with pytest.raises(UserError, match="ambiguous"):
        store.resolve("2026")
    with pytest.raises(UserError, match="not found"):
        store.resolve("nope")


def test_runs_list_by_creation_time_and_latest_is_the_newest_whatever_its_name(tmp_path):
    store = RunStore(tmp_path)
    store.create("zz-named-first", {}, {"created_at": 100.0})
    store.create("20260102-b", {}, {"created_at": 200.0})
    store.create("aa-named-last", {}, {"created_at": 300.0})
    assert [r.run_id for r in store.list()] == ["zz-named-first", "20260102-b", "aa-named-last"]
    assert store.resolve("latest").run_id == "aa-named-last"
    with pytest.raises(UserError, match="'latest' is reserved"):
        store.create("latest", {}, {})


def test_recorder_renumbers_and_tracks_manifest(tmp_path):
    run = RunStore(tmp_path).create("r", {}, {"worker": "w"})
    seen = []
    with RunRecorder(run, on_event=seen.append) as rec:
        rec.feed_line(json.dumps({"v": 1, "type": "run_started", "run_id": "r", "seq": 0, "ts": 1.0,
                                  "worker": "w", "config_digest": "0" * 64, "versions": {"python": "3"},
                                  "resources": {}, "algorithm": "PPO"}))
        rec.feed_line(b"some stray print")
        rec.feed_line(json.dumps({"v": 1, "type": "checkpoint_saved", "run_id": "r", "seq": 1,
                                  "ts": 2.0, "path": "checkpoints/c1", "iteration": 1}))
        rec.finish(-9)
    events = list(run.iter_events())
    assert [e["seq"] for e in events] == [0, 1, 2, 3]
    assert events[1]["type"] == "log" and events[1]["run_id"] == "r"
    assert events[2]["worker_seq"] == 1
    assert events[3]["type"] == "run_failed" and "SIGKILL" in events[3]["message"]
    manifest = run.read_manifest()
    assert manifest["status"] == "failed" and manifest["algorithm"] == "PPO"
    assert manifest["latest_checkpoint"] == "checkpoints/c1" and manifest["exit_signal"] == "SIGKILL"
    assert len(seen) == 4
