"""A tournament shard as a run: ``python -m mosaic.arena.shard_worker --config run.json``.

``mosaic arena run`` hands its shards (a few games of one pairing, :class:`mosaic.arena.tournament.Shard`)
to the experiments' execution backends (:mod:`mosaic.experiments.backends`) as ordinary runs of this small
job, so the local daemon's queue and CPU limits, and the Ray backend's launchers on a cluster's nodes,
apply to tournaments as to experiments. A config::

    {"worker": "arena", "run_id": ..., "environment": <the game's env>,
     "tournament": <the game's one-environment spec source>,
     "shard": {"first": LABEL, "second": LABEL, "games": [[pairing, game, seed, mover], ...]}}

``first`` and ``second`` are the pairing's two players; ``mover``, one of them, moves first in that game
(a game of three items, as shards of older drivers wrote them: ``first`` moves first).

It speaks the worker contract (docs/worker-contract.md): telemetry on stdout from ``run_started`` to
``run_completed`` / ``run_failed``, and one ``episode`` event per finished game whose ``game`` field is the
game's journal line, so the driver journals each game when it ends, not when the shard does.

It is MOSAIC's own job, not a library shim: no entry point, never listed by ``mosaic workers``; discovery
knows it by name only (:data:`mosaic.host.discovery.INTERNAL_WORKERS`), which is all the daemon and the
Ray backend's launchers need to start it, in MOSAIC's own environment.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from mosaic.configkit import option
from mosaic.errors import UserError
from mosaic.workerkit.contract import ResourceEstimate, WorkerCapabilities, WorkerMetadata
from mosaic.workerkit.run_fields import FieldMap, RunConfig

NAME = "arena"
NOT_TRAINING = "a shard plays a tournament's games: nothing is trained"


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    from importlib import metadata

    try:
        version = metadata.version("mosaic-marl")
    except metadata.PackageNotFoundError:
        version = "0"
    meta = WorkerMetadata(name="Arena shard (MOSAIC)", version=version,
                          description="Plays a tournament shard's games between players (docs/arena.md).",
                          upstream_library="mosaic-marl", upstream_version=version, license="MIT", homepage="")
    caps = WorkerCapabilities(worker_type=NAME, paradigms=("multi_agent",), policy_configurations=(),
                              env_families=("classic", "mpe", "sisl", "butterfly"), algorithms=("arena",),
                              action_spaces=("discrete", "masked_discrete", "box"),
                              observation_spaces=("box", "dict"), max_agents=100,
                              supports_checkpointing=False, supports_pause_resume=False,
                              resources=ResourceEstimate(cpus=1.0, memory_mb=300))
    return meta, caps


@dataclass
class ShardConfig(RunConfig):
    """Games of one pairing of a tournament (both seatings), played by one pair of player processes."""

    FIELDS: ClassVar[FieldMap] = FieldMap(
        honoured={"algorithm": "always 'arena'", "environment.family": "the game's env (the tournament's)",
                  "environment.env_id": "the game's env (the tournament's)",
                  "environment.env_kwargs": "the game's env (the tournament's)",
                  "reporting.heartbeat_interval_s": "heartbeats", "resources.cpus": "CPUs the backend reserves"},
        refused={"environment.env_ids": "one game per shard", "seed": "each game's seed is in the shard",
                 "total_timesteps": "the shard's games are its budget", "episodes": "the shard's games are its budget",
                 "num_envs": "one game at a time", "learning_rate": NOT_TRAINING, "gamma": NOT_TRAINING,
                 "batch_size": NOT_TRAINING, "algo_params": NOT_TRAINING,
                 "checkpoint.every_timesteps": "every game is journaled as it ends: nothing to checkpoint",
                 "checkpoint.keep": "no checkpoints", "checkpoint.restore_from": "no checkpoints",
                 "reporting.every_timesteps": "one event per game", "fastlane": "no frames",
                 "resources.threads": "its players' own", "resources.gpus": "its players' own"})

    algorithm: str = option("arena", help="always 'arena'")
    tournament: dict = option(default_factory=dict, help="the game's one-environment tournament spec "
                                                         "(mosaic.arena.tournament.parse_spec)")
    shard: dict = option(default_factory=dict, help="{first, second, games: [[pairing, game, seed, mover], ...]}: "
                                                    "the pairing's players; mover, one of them, moves first")

    @classmethod
    def algorithms(cls) -> tuple[str, ...]:
        return ("arena",)


def shard_of(config: ShardConfig) -> tuple[Any, Any]:
    """``(TournamentSpec, Shard)`` of a config; :class:`UserError` naming the field if they do not fit."""
    from mosaic.arena.tournament import Shard, parse_spec

    try:
        spec = parse_spec(config.tournament)
    except UserError as exc:
        raise UserError(f"tournament.{exc}") from None
    shard = config.shard
    labels = [p.label for p in spec.players]
    if not isinstance(shard, Mapping) or set(shard) != {"first", "second", "games"}:
        raise UserError("shard: expected {first, second, games: [[pairing, game, seed, mover], ...]}")
    for seat in ("first", "second"):
        if shard[seat] not in labels:
            raise UserError(f"shard.{seat}: {shard[seat]!r} is not a player; allowed: {', '.join(labels)}")
    games = shard["games"]
    if not isinstance(games, list) or not games or not all(
            isinstance(g, list) and len(g) in (3, 4) and isinstance(g[0], str) and all(
                isinstance(x, int) and not isinstance(x, bool) for x in g[1:3]) for g in games):
        raise UserError("shard.games: expected a list of [pairing, game, seed, mover]")
    pair = (shard["first"], shard["second"])
    for g in games:
        if len(g) == 4 and g[3] not in pair:
            raise UserError(f"shard.games: mover {g[3]!r} of game {g[1]} is not in the pairing; allowed: "
                            f"{', '.join(pair)}")
    return spec, Shard.of(*pair, games)


def _deep_validate(config: ShardConfig) -> None:
    shard_of(config)


class ShardRuntime:
    def __init__(self, config: ShardConfig, context: Any) -> None:
        self.config, self.ctx = config, context

    def run(self) -> dict[str, Any]:
        from mosaic.arena.tournament import play_shard, seat_groups
        from mosaic.provenance import config_digest, package_versions

        spec, shard = shard_of(self.config)
        emit = self.ctx.emitter
        one, two = seat_groups(spec)
        emit.run_started(worker=NAME, config_digest=config_digest(self.config.to_dict()),
                         versions=package_versions(("mosaic-marl", "pettingzoo")),
                         resources={"cpus": self.config.resources.cpus or 1, "gpus": 0}, algorithm="arena",
                         env=dict(spec.environment), seed=shard.games[0][2], agents=[*one, *two],
                         tournament=spec.title, first=shard.first, second=shard.second, games=len(shard.games))
        played = [0]

        def record(line: dict[str, Any]) -> None:
            emit.episode(episode=played[0], length=line["length"], returns=line["returns"], game=line)
            played[0] += 1
            self.ctx.control.checkpoint()  # a cancel stops the shard between two games

        play_shard(spec, shard, None, record)
        return {"games": played[0]}


def default_config() -> dict[str, Any]:
    return {"algorithm": "arena", "tournament": {}, "shard": {}}


def _program() -> Any:
    from mosaic.workerkit.cli import WorkerProgram

    return WorkerProgram(name=NAME, config_from_dict=ShardConfig.from_dict, make_runtime=ShardRuntime,
                         default_config=default_config, deep_validate=_deep_validate,
                         heartbeat_interval_s=lambda config: config.reporting.heartbeat_interval_s,
                         describe=get_worker_metadata, config_class=ShardConfig,
                         packages=("mosaic-marl", "pettingzoo"))


def main(argv: list[str] | None = None) -> int:
    from mosaic.workerkit.cli import worker_main

    return worker_main(_program(), argv)


if __name__ == "__main__":
    sys.exit(main())
