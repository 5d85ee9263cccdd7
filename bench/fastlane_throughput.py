"""FastLane throughput: frames/s and MB/s through shared memory, next to a plain memcpy.

For each frame size a writer process publishes frames while a reader process
copies every one of them out, checked by the seqlock. FastLane's writer never
waits for readers; to measure what the lane can *carry* the bench adds
back-pressure of its own (two semaphores: the writer stays less than a ring's
length ahead), so no frame is dropped and the rate is that of the whole
pipeline: one copy in, one copy out, in two processes.

Two references, measured in the same run:

* ``memcpy``: a plain ``np.copyto`` of the same bytes in one process (before
  and after the lane, averaged). ``ratio`` = lane MB/s / memcpy MB/s, the
  figure the issue asks for (target >= 0.5 for the large frames).
* ``raw pipe``: the same two-process pipeline through an anonymous shared
  buffer with no FastLane at all (no header, no seqlock, no metadata): what
  the machine allows for a cross-process hand-over. ``vs raw`` shows what
  FastLane itself costs.

    python bench/fastlane_throughput.py [--seconds 2] [--capacity 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import mmap
import multiprocessing as mp
import os
import secrets
import time

import numpy as np

from mosaic.fastlane.ring import Geometry, RingReader, RingWriter

SIZES = [(84, 84, 3), (400, 400, 3), (880, 560, 3)]  # as in the issue: W x H x C
CTX = mp.get_context("fork")


def memcpy_rate(nbytes: int, seconds: float) -> float:
    """Copies per second of ``nbytes`` between two preallocated buffers."""
    src = np.random.default_rng(0).integers(0, 256, nbytes, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    count, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(8):
            np.copyto(dst, src)
        count += 8
    return count / elapsed


class Pipe:
    """Bench-only flow control: ``free`` slots for the writer, ``filled`` ones for the reader."""

    def __init__(self, capacity: int) -> None:
        self.free, self.filled = CTX.Semaphore(capacity - 1), CTX.Semaphore(0)
        self.done = CTX.Value("b", 0, lock=False)
        self.ready, self.go, self.result = CTX.Event(), CTX.Event(), CTX.Queue()


def lane_writer(name: str, geometry: Geometry, capacity: int, seconds: float, pipe: Pipe) -> None:
    frame = np.random.default_rng(1).integers(0, 256, geometry.shape, dtype=np.uint8)
    with RingWriter(name, geometry, capacity) as ring:
        pipe.ready.set()
        pipe.go.wait(30)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            pipe.free.acquire()
            ring.write(frame, 0, n)
            n += 1
            pipe.filled.release()
        pipe.result.put(("writer", n, time.perf_counter() - start))
        pipe.done.value = 1
        pipe.filled.release()
        pipe.free.acquire()  # the reader has finished with the ring


def lane_reader(name: str, pipe: Pipe) -> None:
    pipe.ready.wait(30)
    ring = RingReader(name)
    buf = ring.new_buffer()
    delivered = missed = 0
    while True:
        pipe.filled.acquire()
        if pipe.done.value and delivered + missed >= ring.frames_written:
            break
        if ring.read(delivered + missed, out=buf) is not None:
            delivered += 1
        else:
            missed += 1
        pipe.free.release()
    pipe.result.put(("reader", delivered, missed, ring.torn_reads))
    ring.close()
    pipe.free.release()


def raw_writer(buf: np.ndarray, seconds: float, pipe: Pipe) -> None:
    frame = np.random.default_rng(1).integers(0, 256, buf.shape[1], dtype=np.uint8)
    pipe.go.wait(30)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        pipe.free.acquire()
        np.copyto(buf[n % len(buf)], frame)
        n += 1
        pipe.filled.release()
    pipe.result.put(("writer", n, time.perf_counter() - start))
    pipe.done.value = 1
    pipe.filled.release()


def raw_reader(buf: np.ndarray, pipe: Pipe) -> None:
    out, k = np.empty(buf.shape[1], np.uint8), 0
    while True:
        pipe.filled.acquire()
        if pipe.done.value:
            break
        np.copyto(out, buf[k % len(buf)])
        k += 1
        pipe.free.release()
    pipe.result.put(("reader", k, 0, 0))


def run_pair(writer_args: tuple, reader_args: tuple, pipe: Pipe, seconds: float) -> tuple[float, int, int, int]:
    procs = [CTX.Process(target=writer_args[0], args=writer_args[1:]),
             CTX.Process(target=reader_args[0], args=reader_args[1:])]
    for p in procs:
        p.start()
    time.sleep(0.3)
    pipe.go.set()
    out = dict((kind, values) for kind, *values in (pipe.result.get(timeout=seconds + 60) for _ in procs))
    for p in procs:
        p.join(30)
    written, elapsed = out["writer"]
    delivered, missed, torn = out["reader"]
    return delivered / elapsed, written, delivered, torn + missed


def lane_rate(geometry: Geometry, capacity: int, seconds: float) -> tuple[float, int, int, int]:
    name = f"mosaic_fl.bench-{os.getpid()}-{secrets.token_hex(3)}.lane"
    pipe = Pipe(capacity)
    return run_pair((lane_writer, name, geometry, capacity, seconds, pipe), (lane_reader, name, pipe), pipe, seconds)


def raw_rate(nbytes: int, capacity: int, seconds: float) -> float:
    mm = mmap.mmap(-1, nbytes * capacity)
    buf = np.frombuffer(mm, np.uint8).reshape(capacity, nbytes)
    pipe = Pipe(capacity)
    fps = run_pair((raw_writer, buf, seconds, pipe), (raw_reader, buf, pipe), pipe, seconds)[0]
    del buf
    return fps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--capacity", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the best of each is shown")
    args = parser.parse_args()
    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}, ring capacity {args.capacity}")
    print(f"{'frame WxHxC':<12} {'memcpy f/s':>10} {'memcpy MB/s':>11} {'lane f/s':>9} {'lane MB/s':>9} "
          f"{'ratio':>6} {'raw pipe f/s':>12} {'vs raw':>6}  lost/torn")
    for w, h, c in SIZES:
        geometry = Geometry(h, w, c)
        mb = geometry.frame_bytes / 1e6
        # Interleaved rounds, best of each: on a small shared machine single runs swing widely,
        # and the best run is the closest to what the code (not the neighbours) allows.
        copies, lanes, raws, lost = [], [], [], 0
        for _ in range(args.rounds):
            copies.append(memcpy_rate(geometry.frame_bytes, args.seconds / 2))
            fps_round, _, _, lost_round = lane_rate(geometry, args.capacity, args.seconds)
            lanes.append(fps_round)
            lost += lost_round
            raws.append(raw_rate(geometry.frame_bytes, args.capacity, args.seconds))
        copy, fps, raw = max(copies), max(lanes), max(raws)
        print(f"{w}x{h}x{c:<6} {copy:10.0f} {copy * mb:11.0f} {fps:9.0f} {fps * mb:9.0f} {fps / copy:6.2f} "
              f"{raw:12.0f} {fps / raw:6.2f}  {lost}")
    print("ratio = MB/s delivered through FastLane (writer and reader in two processes) / memcpy MB/s "
          "(target >= 0.50 for the large frames)")


if __name__ == "__main__":
    main()
