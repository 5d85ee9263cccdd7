"""How a self-play run's pool grew: every snapshot, when, from which learner, and the final pool.

    python scripts/league_summary.py RUN_DIR   (prints JSON)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    run = Path(sys.argv[1])
    snapshots, last, iteration, steps = [], None, 0, 0
    for line in (run / "telemetry.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "metrics":
            iteration, steps = event["iteration"], event["timesteps_total"]
            last = event.get("self_play")
        elif event.get("type") == "log" and event.get("self_play_event"):
            snapshots.append({"after_iteration": iteration, "env_steps": steps,
                              **{k: event.get(k) for k in ("self_play_event", "module_id", "source",
                                                           "evicted", "exploiter_reset")}})
    learners = {m: {k: v for k, v in s.items() if k != "win_rate_vs"} for m, s in (last or {}).get("learners", {}).items()}
    print(json.dumps({"run": run.name, "iterations": iteration, "env_steps": steps, "events": snapshots,
                      "final_pool": (last or {}).get("pool"), "final_learners": learners}, indent=1))


if __name__ == "__main__":
    main()
