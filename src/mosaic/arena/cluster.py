"""A tournament's games on an existing Ray cluster (``mosaic arena run SPEC --backend ray --address ADDR``).

Each shard (a few games of one seating, :func:`mosaic.arena.tournament.shards`) is a Ray task reserving one
CPU on some node, in MOSAIC's own environment there, as the experiments' launcher actors are: it starts its
two players as processes on that node (``mosaic player TARGET``, each in its worker's own environment there)
and plays its games with the same :func:`mosaic.arena.tournament.play_shard` as a local tournament. The
games come back to the driver, which journals them as each shard ends; a task lost with its node is retried
by Ray elsewhere (``max_retries``), and a driver that dies loses only the games of the shards in flight,
replayed by ``mosaic arena run`` with the same seeds and so the same results.

A run target must be readable on every node: a run folder on storage every node sees (or the same path on
each node); built-in and scripted players need nothing.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable

from mosaic.errors import UserError

NAMESPACE = "mosaic-arena"
TASK_RETRIES = 2
#: Games per shard on a cluster: a shard's results come back when it ends, so a driver that dies loses (and its
#: resume replays, with the same seeds and so the same results) at most this many games per shard in flight.
RAY_SHARD_GAMES = 4


def _shard_task(source: dict[str, Any], shard: Any, home: str | None) -> list[dict[str, Any]]:
    import ray

    from mosaic.arena.tournament import parse_spec, play_shard

    node = ray.get_runtime_context().get_node_id()
    return [{**line, "node": node} for line in play_shard(parse_spec(source), shard, home)]


def run(tournament: Any, report: Callable[[str], None] | None = None, home: Path | str | None = None,
        address: str | None = None) -> int:
    """Play every game of ``tournament`` not yet journaled on the cluster at ``address``, shards of
    :data:`RAY_SHARD_GAMES` games as tasks; returns how many were played now."""
    from mosaic.arena.tournament import journal_to, pending, seat_groups, shards

    todo = pending(tournament)
    if not todo:
        return 0
    seat_groups(tournament.spec)
    return run_on_ray(tournament.spec, shards(todo, RAY_SHARD_GAMES), journal_to(tournament, report), address, home)


def run_on_ray(spec: Any, work: list[Any], journal: Callable[[dict[str, Any]], None], address: str | None,
               home: Path | str | None) -> int:
    """Run ``work`` (shards) as tasks on the cluster at ``address``; returns the games journaled."""
    import ray

    from mosaic.experiments.backends.ray import _probe
    from mosaic.runs import mosaic_home

    if not address:
        raise UserError("--address: the ray backend plays on an existing cluster; allowed: the address of its head "
                        "node, HOST:PORT (`ray start --head` prints it), or --backend local")
    if not ray.is_initialized():
        _probe(address)  # ray.init waits minutes for a head that is not there
        ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)
    task = ray.remote(num_cpus=1, max_retries=TASK_RETRIES, retry_exceptions=False)(_shard_task)
    home_path = str(Path(home or mosaic_home()).absolute())
    pending = {task.options(scheduling_strategy="SPREAD").remote(spec.source, shard, home_path): shard
               for shard in work}
    played = 0
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            shard = pending.pop(ref)
            try:
                lines = ray.get(ref)
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
                if isinstance(cause, UserError):
                    raise cause from None
                raise UserError(f"arena: the shard {shard.first} vs {shard.second} failed on the cluster: "
                                f"{type(cause).__name__}: {str(cause).strip().splitlines()[-1] if str(cause).strip() else ''}"
                                ) from None
            for line in lines:
                journal(line)
                played += 1
        return played
    finally:
        for ref in pending:  # a failure or Ctrl-C: nothing keeps playing on the cluster
            ray.cancel(ref, force=True)
