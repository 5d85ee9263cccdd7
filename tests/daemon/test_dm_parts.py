"""The daemon's parts on their own: registry state machine, and the stream's
disk/live join under a slow subscriber (real files, real asyncio)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time

import pytest

from mosaic.host.daemon.hub import TelemetryHub
from mosaic.host.daemon.registry import Registry, RunRecord
from mosaic.host.daemon.states import InvalidTransition, RunState
from mosaic.host.daemon.streaming import stream_run
from mosaic.host.recorder import RunRecorder
from mosaic.runs import RunStore


def new_record(run_id: str) -> RunRecord:
    now = time.time()
    return RunRecord(run_id=run_id, worker="random", state=RunState.QUEUED, run_dir=f"/tmp/{run_id}",
                     created_at=now, updated_at=now)


def test_registry_enforces_the_state_machine_and_keeps_history(tmp_path):
    registry = Registry(tmp_path / "registry.sqlite3")
    seen: list[tuple[str, RunState | None]] = []
    registry.add_listener(lambda record, previous: seen.append((record.state.value, previous)))
    registry.insert(new_record("a"))
    with pytest.raises(InvalidTransition):
        registry.transition("a", RunState.RUNNING)  # QUEUED must go through STARTING
    for state in (RunState.STARTING, RunState.RUNNING, RunState.PAUSED, RunState.RUNNING):
        registry.transition("a", state, f"to {state.value}")
    done = registry.transition("a", RunState.FAILED, "boom", exit_code=-9, failure_reason="boom")
    assert done.ended_at and done.exit_code == -9 and done.failure_reason == "boom"
    for state in RunState:
        with pytest.raises(InvalidTransition):
            registry.transition("a", state)  # nothing leaves a terminal state
    assert [to for _, to, _, _ in registry.history("a")] == [
        "QUEUED", "STARTING", "RUNNING", "PAUSED", "RUNNING", "FAILED"]
    assert seen[0] == ("QUEUED", None) and seen[-1] == ("FAILED", RunState.RUNNING)
    registry.insert(new_record("ab"))
    assert registry.resolve("latest").run_id == "ab"
    assert registry.resolve("ab").run_id == "ab"  # exact beats prefix
    with pytest.raises(Exception, match="ambiguous"):
        registry.resolve("")
    with pytest.raises(Exception, match="not known"):
        registry.resolve("a%")  # LIKE wildcards are literal
    assert registry.counts() == {"FAILED": 1, "QUEUED": 1}
    registry.close()
    mode = sqlite3.connect(tmp_path / "registry.sqlite3").execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"


def test_a_slow_subscriber_catches_up_from_disk_without_gaps_or_duplicates(tmp_path):
    run = RunStore(tmp_path).create("r", {}, {})
    total = 3000

    async def scenario() -> tuple[list[int], int]:
        hub = TelemetryHub(buffer_bytes=4000)  # a few dozen events, then the subscriber lags
        recorder = RunRecorder(run)

        async def produce() -> None:
            for i in range(total):
                line = json.dumps({"v": 1, "type": "episode", "run_id": "r", "seq": i, "ts": 1.0, "n": i})
                for event, text in recorder.feed_lines([line.encode()]):
                    hub.publish(event["seq"], event["type"], text)
                if i % 100 == 0:
                    await asyncio.sleep(0)
            hub.close()

        async def consume() -> tuple[list[int], int]:
            seqs, from_disk = [], 0
            async for items, disk in stream_run(run.telemetry_path, hub, 0, True):
                seqs += [s for s, _, _ in items]
                from_disk += len(items) if disk else 0
                await asyncio.sleep(0.001)  # slower than the producer
            return seqs, from_disk

        consumer = asyncio.create_task(consume())
        await asyncio.sleep(0)
        await produce()
        return await consumer

    seqs, from_disk = asyncio.run(scenario())
    assert seqs == list(range(total))
    assert 0 < from_disk < total  # it did lag, and it did catch up
