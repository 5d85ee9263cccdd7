"""A tournament's shards as runs on the experiments' execution backends (``mosaic arena run --parallel N``,
``--backend ray --address ADDR``).

Each shard (a few games of one pairing, :func:`mosaic.arena.tournament.shards`) becomes an ordinary run of
the ``arena`` job (:mod:`mosaic.arena.shard_worker`) submitted through :mod:`mosaic.experiments.backends`:
``local`` is the trainer daemon serving ``MOSAIC_HOME`` (started, and said so on stderr, when none runs), so
its queue and CPU limits apply; ``ray`` places the runs on an existing cluster's nodes through its launcher
actors. Either way the run's telemetry arrives in this machine's run store, and the driver (this process):

* writes each shard's run id and config to ``shards.jsonl`` in the tournament's folder before submitting it;
* keeps at most ``parallel`` shards submitted at once, polls their status, and journals each game from the
  shard run's telemetry (an ``episode`` event carrying the game's journal line) as soon as it is there;
* retries a failed shard (a new run) with only its games not journaled yet, :data:`RETRIES` times, the
  cause of each failure kept in ``shards.jsonl`` and said on stderr;
* cancels the shards in flight on Ctrl-C or a failure;
* after being killed, finds the shards it had submitted in ``shards.jsonl``: their games journaled since,
  those still running followed to their end (submitting a run id the backend has is not an error), the
  rest played again.
"""

from __future__ import annotations

import json
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from mosaic.errors import UserError
from mosaic.run_status import JOB_ENDED, JobState
from mosaic.runs import RunDir, append_jsonl, read_jsonl

SHARDS_FILE = "shards.jsonl"
#: A failed shard is submitted again (its unplayed games) this many times before the tournament stops.
RETRIES = 2
POLL_S = 0.2
#: Games per shard on a cluster without --parallel: every shard is submitted at once.
CLUSTER_SHARD_GAMES = 4
TERMINAL = JOB_ENDED


@dataclass
class _Flight:
    run_id: str
    config: dict[str, Any]
    attempt: int
    offset: int = 0
    node: str | None = None

    @property
    def shard(self) -> dict[str, Any]:
        return self.config["shard"]


def run(tournament: Any, backend: str, report: Callable[[str], None] | None = None, home: Path | str | None = None,
        parallel: int | None = None, address: str | None = None,
        announce: Callable[[str], None] | None = None) -> int:
    """Play every game of ``tournament`` not journaled yet as shard runs on ``backend`` (``local`` or
    ``ray``), ``parallel`` at once (None: every shard at once, the backend's resources capping them);
    returns how many games were journaled now."""
    from mosaic.arena.tournament import seat_groups
    from mosaic.experiments.backends import backend_for
    from mosaic.runs import mosaic_home

    if parallel is not None and (isinstance(parallel, bool) or not isinstance(parallel, int) or parallel < 1):
        raise UserError(f"--parallel: {parallel!r}; allowed: an integer >= 1")
    seat_groups(tournament.spec)
    home = Path(home or mosaic_home()).absolute()
    driver = Driver(tournament, home, report, parallel, announce or (lambda _line: None))
    driver.recover()
    if not driver.unfinished() and not driver.todo():
        return 0
    connection = backend_for(backend, home, announce, address=address)
    try:
        return driver.run(connection)
    finally:
        connection.close()


class Driver:
    def __init__(self, tournament: Any, home: Path, report: Callable[[str], None] | None, parallel: int | None,
                 announce: Callable[[str], None]) -> None:
        from mosaic.runs import RunStore

        self.tournament, self.home, self.report, self.parallel, self.announce = \
            tournament, home, report, parallel, announce
        self.store = RunStore(home)
        self.log_path = Path(tournament.root) / SHARDS_FILE
        self.done = {(g["pairing"], int(g["game"])) for g in tournament.games()}
        self.flights: dict[str, _Flight] = {}
        self.played = 0

    # -- the shard log ------------------------------------------------------------------------------------
    def _log(self, entry: dict[str, Any]) -> None:
        append_jsonl(self.log_path, entry)

    def _entries(self) -> list[dict[str, Any]]:
        return read_jsonl(self.log_path)

    def unfinished(self) -> list[dict[str, Any]]:
        """Shards submitted by an earlier driver that never logged their end, with games not journaled yet."""
        entries = self._entries()
        ended = {e["run_id"] for e in entries if e.get("state") in TERMINAL}
        return [e for e in entries if e.get("state") == "submitted" and e["run_id"] not in ended
                and any((g[0], g[1]) not in self.done for g in e["config"]["shard"]["games"])]

    def recover(self) -> None:
        """Journal the games that earlier shard runs played and no driver journaled (a driver killed, or
        stopped between a game's end and its next look): every run in the shard log, ended or not."""
        for entry in self._entries():
            if entry.get("state") == "submitted" and any(
                    (g[0], g[1]) not in self.done for g in entry["config"]["shard"]["games"]):
                self._absorb(_Flight(entry["run_id"], entry["config"], int(entry.get("attempt", 0))))

    def todo(self) -> list[tuple[str, int, str, str, int]]:
        busy = {(g[0], g[1]) for f in self.flights.values() for g in f.shard["games"]}
        return [item for item in self.tournament.spec.schedule()
                if (item[0], item[1]) not in self.done and (item[0], item[1]) not in busy]

    # -- games from a shard run's telemetry ----------------------------------------------------------------
    def _absorb(self, flight: _Flight) -> None:
        path = RunDir(self.store.runs_dir / flight.run_id).telemetry_path
        try:
            with path.open("rb") as handle:
                handle.seek(flight.offset)
                data = handle.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n") + 1  # whole lines only: a line being written waits for the next read
        flight.offset += end
        for raw in data[:end].splitlines():
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            game = event.get("game") if event.get("type") == "episode" else None
            if not isinstance(game, dict):
                continue
            key = (game["pairing"], int(game["game"]))
            if key in self.done:
                continue
            node = self._node(flight)
            line = {**game, "run_id": flight.run_id, **({"node": node} if node else {})}
            self.tournament.record(line)
            self.done.add(key)
            self.played += 1
            if self.report:
                self.report(f"{line['pairing']} game {line['game']}: {line['first']} vs {line['second']} -> "
                            f"{line['returns']}")

    def _node(self, flight: _Flight) -> str | None:
        """The cluster node that plays the shard (the Ray backend's manifest says it once placed)."""
        if not flight.node:  # read again until the manifest names it (a local run names none)
            try:
                node = self.store.get(flight.run_id).read_manifest().get("node") or {}
            except (OSError, ValueError, UserError):
                node = {}
            flight.node = str(node.get("id") or "") if isinstance(node, dict) else ""
        return flight.node or None

    # -- submitting ----------------------------------------------------------------------------------------
    def _config(self, run_id: str, shard: Any) -> dict[str, Any]:
        spec = self.tournament.spec
        env = {k: spec.environment[k] for k in ("family", "env_id", "env_kwargs") if k in spec.environment}
        return {"worker": "arena", "run_id": run_id, "environment": env, "tournament": spec.source,
                "shard": {"first": shard.first, "second": shard.second, "games": [list(g) for g in shard.games]},
                "resources": {"cpus": 1.0}}

    def _run_id(self) -> str:
        title = re.sub(r"[^A-Za-z0-9._-]", "_", self.tournament.spec.title.replace("/", "."))[:80]
        return f"arena-{title}-{secrets.token_hex(4)}"

    def _submit(self, backend: Any, batch: list[tuple[dict[str, Any], int]], again: bool = False) -> None:
        """Submit ``(config, attempt)`` shard runs in one call, each journaled in ``shards.jsonl`` first (a
        driver killed in between finds it)."""
        if not batch:
            return
        if not again:
            for config, attempt in batch:
                self._log({"run_id": config["run_id"], "state": "submitted", "attempt": attempt, "config": config,
                           "at": time.time()})
        answers = backend.submit_many([(config["run_id"], config) for config, _ in batch])
        for (config, attempt), error in zip(batch, answers):
            if error is None:
                self.flights[config["run_id"]] = _Flight(config["run_id"], config, attempt)
        for (config, _), error in zip(batch, answers):
            if error is not None:
                self._log({"run_id": config["run_id"], "state": JobState.FAILED, "cause": f"refused: {error}"})
                raise UserError(f"arena: the {backend.name} backend refused the shard run {config['run_id']}: "
                                f"{error}")

    # -- the loop ------------------------------------------------------------------------------------------
    def run(self, backend: Any) -> int:
        from mosaic.arena.tournament import shards

        self.announce(f"arena: shards as runs on {backend.describe()}")
        try:
            earlier = self.unfinished()  # a driver before this one was killed: follow what it submitted
            self._submit(backend, [(e["config"], int(e.get("attempt", 0))) for e in earlier], again=True)
            for entry in earlier:
                self._absorb(self.flights[entry["run_id"]])
                self.announce(f"arena: following shard run {entry['run_id']}, submitted before this driver")
            todo = self.todo()
            width = self.parallel or max(1, -(-len(todo) // CLUSTER_SHARD_GAMES))
            size = max(1, min(self.tournament.spec.games_per_pairing, -(-len(todo) // width) if todo else 1))
            if self.parallel is None:
                size = min(size, CLUSTER_SHARD_GAMES)
            queue = [(shard, 0) for shard in shards(todo, size)]
            limit = self.parallel or len(queue) + len(self.flights)
            while queue or self.flights:
                batch = []
                while queue and len(self.flights) + len(batch) < limit:
                    shard, attempt = queue.pop(0)
                    batch.append((self._config(self._run_id(), shard), attempt))
                self._submit(backend, batch)
                time.sleep(POLL_S)
                states = backend.status(list(self.flights))
                for run_id, state in states.items():
                    flight = self.flights[run_id]
                    self._absorb(flight)  # the status was read first: an ended run's lines are all there
                    if state is None or state[0] not in TERMINAL:
                        continue
                    del self.flights[run_id]
                    retry = self._ended(flight, state[0], state[1])
                    if retry is not None:
                        queue.insert(0, retry)
            return self.played
        except BaseException as exc:
            reason = f"the tournament's driver stopped: {type(exc).__name__}"
            for run_id in list(self.flights):  # nothing keeps playing for a driver that stopped
                try:
                    backend.cancel(run_id, reason)
                    self._absorb(self.flights[run_id])  # what it finished before the cancel: journaled
                    self._log({"run_id": run_id, "state": JobState.CANCELLED, "cause": reason})
                except Exception:  # noqa: BLE001 - the backend unreachable: resume follows the run
                    pass
            raise

    def _ended(self, flight: _Flight, state: str, cause: str) -> Any:
        """Log how a shard run ended; its games not journaled as a shard to submit again (None: none left)."""
        from mosaic.arena.tournament import Shard

        first, second = flight.shard["first"], flight.shard["second"]
        left = Shard.of(first, second, [g for g in flight.shard["games"] if (g[0], g[1]) not in self.done])
        entry = {"run_id": flight.run_id, "state": state, "cause": cause, "unplayed": len(left.games)}
        self._log(entry)
        if not left.games:
            return None
        if state == JobState.CANCELLED:
            raise UserError(f"arena: the shard run {flight.run_id} ({first} vs {second}) was cancelled"
                            f"{': ' + cause if cause else ''}; `mosaic arena run` again plays its {len(left.games)} "
                            "game(s) left")
        cause = cause or ("it ended without its games" if state == JobState.COMPLETED else "no cause given")
        if flight.attempt >= RETRIES:
            raise UserError(f"arena: the shard {first} vs {second} failed {flight.attempt + 1} times; last: "
                            f"{cause} (run {flight.run_id}: `mosaic logs {flight.run_id}`)")
        self.announce(f"arena: shard run {flight.run_id} ({first} vs {second}) {state}: {cause}; its "
                      f"{len(left.games)} unplayed game(s) again (retry {flight.attempt + 1} of {RETRIES})")
        return left, flight.attempt + 1
