"""StreamTelemetry's core: stored history from disk, then the live hub, no gaps.

A subscriber registers with the hub *before* reading the file, and the hub
tells it the first seq it will see live. Everything older comes from
``telemetry.jsonl``. Because the recorder writes each event to the file
before publishing it (both on the event loop), the file holds exactly the
events before that seq, so the two halves join without loss or duplicates.
A subscriber that lags past its buffer re-joins the same way.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import IO, AsyncIterator

from mosaic.host.daemon.hub import Item, TelemetryHub

try:  # stored lines are strict JSON, so the fast parser reads every one of them
    from orjson import loads
except ImportError:  # pragma: no cover
    from json import loads

MAX_BATCH_EVENTS = 2_000  # per batch replayed from disk
MAX_BATCH_BYTES = 2 << 20  # per batch, replayed or live
#: A subscriber further behind than this many events catches up from disk first.
CATCH_UP_GAP = 5_000
#: Least time between two live batches of one stream (bounds the latency it adds).
COALESCE_S = 0.01


def _read_batch(fh: IO[bytes], from_seq: int, until: int | None) -> tuple[list[Item], bool]:
    """Up to one batch of stored events with ``from_seq <= seq < until``; (items, at_end)."""
    items: list[Item] = []
    size = 0
    while len(items) < MAX_BATCH_EVENTS and size < MAX_BATCH_BYTES:
        pos = fh.tell()
        raw = fh.readline()
        if not raw:
            return items, True
        if not raw.endswith(b"\n"):  # a line still being written: not ours to send
            fh.seek(pos)
            return items, True
        try:
            event = loads(raw)
            seq = int(event["seq"])
        except (ValueError, KeyError, TypeError):
            continue
        if until is not None and seq >= until:
            return items, True
        if seq >= from_seq:
            line = raw[:-1].decode("utf-8", "replace")
            items.append((seq, str(event.get("type", "")), line))
            size += len(line)
    return items, False


async def replay(path: Path, from_seq: int, until: int | None = None) -> AsyncIterator[list[Item]]:
    """Stored events as batches, read in a thread so the event loop stays free."""
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return
    with fh:
        while True:
            items, at_end = await asyncio.to_thread(_read_batch, fh, from_seq, until)
            if items:
                from_seq = items[-1][0] + 1
                yield items
            if at_end:
                return


async def stream_run(path: Path, hub: TelemetryHub | None, from_seq: int = 0,
                     follow: bool = True) -> AsyncIterator[tuple[list[Item], bool]]:
    """Batches ``(items, from_disk)`` of one run's events from ``from_seq`` on.

    Ends after the last event when the run is over (or at once after the
    stored history when ``follow`` is false or there is no live hub).
    """
    next_seq = max(0, from_seq)
    if hub is None or not follow:
        async for items in replay(path, next_seq):
            yield items, True
        return
    while True:
        # Far behind (a late joiner, or a lagging subscriber): read the file until
        # close to the live edge before holding a live buffer that would overflow.
        while hub.next_seq - next_seq > CATCH_UP_GAP and not hub.closed:
            target = hub.next_seq
            async for items in replay(path, next_seq, target):
                next_seq = items[-1][0] + 1
                yield items, True
            next_seq = max(next_seq, target)
        sub, live_from = hub.subscribe()
        try:
            if next_seq < live_from:
                async for items in replay(path, next_seq, live_from):
                    next_seq = items[-1][0] + 1
                    yield items, True
                next_seq = max(next_seq, live_from)
            loop = asyncio.get_running_loop()
            last_sent = -COALESCE_S
            while not sub.lagging:
                if not sub.items:
                    if hub.closed:
                        return
                    sub.wake.clear()
                    await sub.wake.wait()
                    continue
                # Many small messages cost far more than a few big ones: under load,
                # send at most one batch per COALESCE_S (an idle stream sends at once).
                wait = last_sent + COALESCE_S - loop.time()
                if wait > 0 and sub.buffered_bytes < MAX_BATCH_BYTES and not hub.closed:
                    await asyncio.sleep(wait)
                    continue
                items = sub.drain(MAX_BATCH_BYTES)
                if items and items[0][0] < next_seq:
                    items = [item for item in items if item[0] >= next_seq]
                if items:
                    next_seq = items[-1][0] + 1
                    yield items, False
                    last_sent = loop.time()
        finally:
            hub.unsubscribe(sub)
