"""When the daemon takes a run whose heartbeats go on to be stuck (pure logic: no clock, no I/O)."""

from __future__ import annotations

from typing import Any, Mapping

#: How long past its own stall bound a worker's heartbeats may go on before the
#: daemon fails the run (the worker's watchdog should have ended it by then).
STALL_GRACE_S = 30.0
#: How long a worker whose heartbeats say `stalled` gets to end its run itself.
STALLED_GRACE_S = 5.0


def stall_in(heartbeat: Mapping[str, Any], now: float) -> str:
    """Why a heartbeat shows a stuck run ("" when it is progressing): alive is not enough."""
    if heartbeat.get("stalled") is True:
        reason = heartbeat.get("stall_reason")
        return f"the worker reports it is stuck: {reason}" if reason else "the worker reports it is stuck"
    bound, last = heartbeat.get("stall_timeout_s"), heartbeat.get("last_progress_ts")
    if not isinstance(bound, (int, float)) or not isinstance(last, (int, float)) or bound <= 0:
        return ""
    idle = now - last
    if idle > bound + STALL_GRACE_S:
        return (f"no training progress for {idle:.1f} s (the run's stall bound is {bound:g} s, "
                f"{heartbeat.get('iterations', '?')} iterations done) while its heartbeats go on")
    return ""
