"""``python -m ray_worker.cli``: the Ray RLlib worker's process.

Beyond the shared worker flags (``--config``, ``--validate``,
``--default-config``): ``--schema ALGO`` prints an algorithm's
hyperparameter JSON Schema and ``--dry-run`` shows agents, spaces and the
resolved RLlib settings without starting Ray.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from mosaic.errors import ConfigError, UserError
from mosaic.worker_cli import WorkerProgram, build_config, load_config_data, worker_main
from ray_worker import algo_params
from ray_worker.config import RayWorkerConfig, default_config


def deep_validate(config: RayWorkerConfig):
    """Checks that need the env (spaces vs algorithm) or the machine (GPUs, checkpoints), without Ray.

    Returns the env's description and the module layout it checked (``--dry-run`` prints them).
    """
    from ray_worker.algorithms import check_compatibility

    env_info, layout = _prepare(config)
    check_compatibility(config, env_info)
    restore = config.checkpoint.restore_from
    if restore and not (Path(restore) / "mosaic_state.json").is_file():
        raise ConfigError("checkpoint.restore_from", f"{restore!r} is not a checkpoint of this worker "
                          "(no mosaic_state.json in it)")
    if config.resources.num_gpus > 0 and not config.resources.address:
        import torch

        if not torch.cuda.is_available():
            raise ConfigError("resources.num_gpus", f"{config.resources.num_gpus} GPUs asked for, but this "
                              "machine has none; use 0 (CPU) or join a cluster with resources.address")
    if config.wandb:
        from ray_worker.analytics import check_wandb_available

        check_wandb_available()
    return env_info, layout


def _prepare(config: RayWorkerConfig):
    from ray_worker.policies import prepare

    _, env_info, layout = prepare(config)
    return env_info, layout


def _add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--schema", metavar="ALGORITHM",
                        help=f"print the hyperparameter JSON Schema of one of {', '.join(algo_params.algorithms())}")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate, build one env, print agents, spaces and RLlib settings; no Ray")
    parser.add_argument("--evaluate", metavar="RUN_OR_CHECKPOINT",
                        help="play a trained run (its latest checkpoint) or a checkpoint, without Ray")
    parser.add_argument("--episodes", type=int, default=20, help="--evaluate: episodes to play")
    parser.add_argument("--opponent", help="--evaluate: 'random', or another run/checkpoint for the other seat(s)")
    parser.add_argument("--video", type=int, nargs="?", const=1, default=0, metavar="N",
                        help="--evaluate: record the first N episodes as GIF (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="--evaluate: first episode seed")
    parser.add_argument("--json", action="store_true", help="--evaluate: print results as JSON")
    parser.add_argument("--fastlane", action="store_true",
                        help="--evaluate: stream frames for `mosaic watch RUN --stream eval`")


def _evaluate(args: argparse.Namespace) -> int:
    from ray_worker.policy_actor import RayPolicyController, read_checkpoint
    from ray_worker.policy_evaluator import EvaluationConfig, run_evaluation

    if args.episodes < 1:
        raise UserError(f"--episodes: must be >= 1, got {args.episodes}")
    info = read_checkpoint(args.evaluate)
    controller = RayPolicyController.from_checkpoint(str(info.path))
    agents = list(controller.actors)
    if args.opponent:
        seats = agents[1:] if len(agents) > 1 else []
        if not seats:
            raise UserError("--opponent: the run has a single agent; there is no seat to give away")
        if args.opponent == "random":
            for agent in seats:
                controller.actors.pop(agent)
        else:
            other = RayPolicyController.from_checkpoint(args.opponent)
            for agent in seats:
                if agent not in other.actors:
                    raise UserError(f"--opponent: {args.opponent!r} has no policy for {agent!r}")
                controller.actors[agent] = other.actors[agent]
    # Against a single opponent in a 2-player game, play both seats in turn.
    alternate = bool(args.opponent) and len(controller.actors) == 1
    results = run_evaluation(EvaluationConfig(controller=controller, num_episodes=args.episodes,
                                              seed=args.seed, video_episodes=args.video,
                                              fastlane=args.fastlane, alternate_seats=alternate))
    print(json.dumps(results.to_dict(), indent=2) if args.json else
          results.table() + f"\nsaved to {results.output_dir}")
    return 0


def _handle_arguments(args: argparse.Namespace) -> int | None:
    if args.evaluate:
        return _evaluate(args)
    if args.schema:
        print(algo_params.schema_json(args.schema.upper()))
        return 0
    if args.dry_run:
        if not args.config:
            raise UserError("config: --dry-run needs --config PATH")
        from ray_worker.algorithms import resolve

        config = build_config(PROGRAM, load_config_data(args.config))
        env_info, layout = deep_validate(config)  # everything `mosaic run` checks that needs no Ray
        print(json.dumps({"config": config.to_dict(), "env": env_info.to_dict(),
                          "rllib": resolve(config, env_info, layout)}, indent=2, default=str))
        return 0
    return None


PROGRAM = WorkerProgram(
    name="ray",
    config_from_dict=RayWorkerConfig.from_dict,
    make_runtime=lambda config, context: __import__("ray_worker.runtime", fromlist=["x"]).RayWorkerRuntime(
        config, context),
    default_config=default_config,
    deep_validate=deep_validate,
    heartbeat_interval_s=lambda config: config.heartbeat_interval_s,
    add_arguments=_add_arguments,
    handle_arguments=_handle_arguments,
)


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
