#!/usr/bin/env python3
"""A purpose-built telemetry emitter that the daemon benchmark runs in place of a worker.

``bench/daemon_telemetry.py`` starts the daemon with ``--python random=<this
file>``, so for the ``random`` worker the daemon executes
``<this file> -m random_worker.cli --config CFG --run-dir DIR``. Config
validation (``--validate``) is handed to the real interpreter; a run reads
its config and prints, instead of playing an env: ``run_started``, then
``total_timesteps`` events of type ``episode`` (each a realistic ~200-byte
line whose envelope ``ts`` is the moment it was printed), then
``run_completed``. After ``run_started`` it waits for the file named by
``MOSAIC_BENCH_GO`` so that all runs of a scenario start at once, with their
subscribers already connected. ``step_delay_s`` sets the interval between events; 0 = as fast as
possible: all lines are formatted before the barrier and then written in 64 KiB
blocks, so the emitter's own CPU stays out of the measurement (``ts`` is then
the formatting time, and latency is not measured in that mode). Otherwise
each event is stamped and flushed when it is due.
"""

from __future__ import annotations

import json
import os
import sys
import time

REAL_PYTHON = os.environ.get("MOSAIC_BENCH_REAL_PYTHON", sys.executable)


def main(args: list[str]) -> int:
    if "--run-dir" not in args:  # --validate, --default-config: the real worker answers
        os.execv(REAL_PYTHON, [REAL_PYTHON, *args])
    with open(args[args.index("--config") + 1]) as fh:
        config = json.load(fh)
    run_id, count, delay = config["run_id"], int(config["total_timesteps"]), float(config["step_delay_s"])
    out = os.fdopen(os.dup(1), "w", buffering=1 << 16)
    head = f'{{"v":1,"type":"episode","run_id":"{run_id}","seq":'
    out.write(json.dumps({"v": 1, "type": "run_started", "run_id": run_id, "seq": 0, "ts": time.time(),
                          "worker": "bench-emitter", "config_digest": "0" * 64,
                          "versions": {"python": sys.version.split()[0]}, "resources": {}}) + "\n")
    out.flush()
    def line(i: int) -> str:
        return (f'{head}{i},"ts":{time.time():.6f},"episode":{i},"length":25,'
                f'"returns":{{"agent_0":-4.125,"agent_1":-4.25,"agent_2":-4.375}},"winner":null,'
                f'"duration_s":0.0012}}\n')

    # Flat out: format everything before the barrier, so that what is measured
    # is MOSAIC's path and not this script's string formatting.
    ready = "".join(line(i) for i in range(1, count + 1)) if not delay else ""
    go = os.environ.get("MOSAIC_BENCH_GO")  # start together with the other runs
    while go and not os.path.exists(go):
        time.sleep(0.001)
    if ready:
        out.write(ready)
    next_at = time.perf_counter()
    for i in range(1, count + 1) if delay else ():
        out.write(line(i))
        out.flush()
        next_at += delay
        pause = next_at - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
    out.write(json.dumps({"v": 1, "type": "run_completed", "run_id": run_id, "seq": count + 1,
                          "ts": time.time(), "summary": {"events": count}}) + "\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
