"""Telemetry parse throughput on one core: events/s and MB/s.

Target: >= 200k events/s for typical worker lines. Prints the measured rate
and its ratio to the target; run with ``python bench/telemetry_parse.py``.
"""

from __future__ import annotations

import io
import time

from mosaic.workerkit.telemetry import TelemetryEmitter, parse_line

TARGET_EVENTS_PER_S = 200_000


def make_lines(n: int) -> list[bytes]:
    buf = io.StringIO()
    em = TelemetryEmitter("20261121-233334-123-9f3a1c", stream=buf)
    for i in range(n):
        if i % 10 == 0:
            em.metrics(iteration=i, timesteps_total=i * 100, env_steps_per_s=1234.5,
                       episode_return_mean=-12.5, episode_len_mean=25.0,
                       agent_episode_returns_mean={"agent_0": -4.1, "agent_1": -4.2, "agent_2": -4.2})
        elif i % 3 == 0:
            em.heartbeat()
        else:
            em.episode(episode=i, length=25, returns={"agent_0": -4.1, "agent_1": -4.2, "agent_2": -4.2})
    return [line.encode() for line in buf.getvalue().splitlines()]


def measure(lines: list[bytes], repeats: int = 5) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for line in lines:
            parse_line(line)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    lines = make_lines(200_000)
    nbytes = sum(len(line) for line in lines)
    seconds = measure(lines)
    rate = len(lines) / seconds
    print(f"lines: {len(lines)}  mean size: {nbytes / len(lines):.0f} B")
    print(f"parse: {rate:,.0f} events/s  {nbytes / seconds / 1e6:.1f} MB/s (best of 5, one core)")
    print(f"ratio to target {TARGET_EVENTS_PER_S:,} events/s: {rate / TARGET_EVENTS_PER_S:.2f}")
    garbage = [b"plain print from a library " * 3] * 100_000
    g_seconds = measure(garbage, repeats=3)
    print(f"garbage lines -> log events: {len(garbage) / g_seconds:,.0f} lines/s")


if __name__ == "__main__":
    main()
