"""``python -m ray_worker.cli``: the Ray RLlib worker's process.

The shared worker command line (``mosaic.workerkit.cli``) with the Ray hooks:
``--schema ALGO`` prints an algorithm's hyperparameter JSON Schema,
``--dry-run`` shows agents, spaces and the resolved RLlib settings without
starting Ray, ``--evaluate`` plays a checkpoint without Ray.
"""

from __future__ import annotations

import sys

from mosaic.errors import UserError
from mosaic.workerkit.threads import limit_torch_threads
from mosaic.workerkit.cli import EvaluateRequest, WorkerProgram, worker_main
from ray_worker import algo_params, get_worker_metadata
from ray_worker.config import RayWorkerConfig, default_config


def deep_validate(config: RayWorkerConfig):
    """Checks that need the env (spaces vs algorithm) or the machine (GPUs, checkpoints), without Ray.

    Returns the env's description and the module layout it checked (``--dry-run`` prints them).
    """
    from ray_worker.algorithms import check_compatibility

    env_info, layout = _prepare(config)
    check_compatibility(config, env_info)
    if config.checkpoint.restore_from:
        from ray_worker.checkpoint_state import RayCheckpointState

        RayCheckpointState.read(config.checkpoint.restore_from, "checkpoint.restore_from", "the ray worker")
    if config.wandb:
        from ray_worker.analytics import check_wandb_available

        check_wandb_available()
    return env_info, layout


def _prepare(config: RayWorkerConfig):
    from ray_worker.policies import prepare

    _, env_info, layout = prepare(config)
    return env_info, layout


def _evaluate(request: EvaluateRequest) -> int:
    from ray_worker.policy_actor import RayPolicyController, read_checkpoint
    from mosaic.workerkit.evaluation import print_results
    from ray_worker.policy_evaluator import EvaluationConfig, run_evaluation

    limit_torch_threads(1)  # one env, batches of one: more threads only wait for each other
    info = read_checkpoint(request.target)
    controller = RayPolicyController.from_checkpoint(str(info.path))
    agents = list(controller.actors)
    if request.opponent:
        seats = agents[1:] if len(agents) > 1 else []
        if not seats:
            raise UserError("--opponent: the run has a single agent; there is no seat to give away")
        if request.opponent == "random":
            for agent in seats:
                controller.actors.pop(agent)
        else:
            other = RayPolicyController.from_checkpoint(request.opponent)
            for agent in seats:
                if agent not in other.actors:
                    raise UserError(f"--opponent: {request.opponent!r} has no policy for {agent!r}")
                controller.actors[agent] = other.actors[agent]
    # Against a single opponent in a 2-player game, play both seats in turn.
    alternate = bool(request.opponent) and len(controller.actors) == 1
    results = run_evaluation(EvaluationConfig(controller=controller, num_episodes=request.episodes,
                                              seed=request.seed, video_episodes=request.video,
                                              fastlane=request.fastlane, alternate_seats=alternate))
    print_results(results, request.json)
    return 0


def _dry_run(config: RayWorkerConfig, checked) -> dict:
    """Agents, spaces and the resolved RLlib settings (everything `mosaic run` checks that needs no Ray)."""
    from ray_worker.algorithms import resolve

    env_info, layout = checked
    return {"env": env_info.to_dict(), "rllib": resolve(config, env_info, layout)}


PROGRAM = WorkerProgram(
    name="ray",
    config_from_dict=RayWorkerConfig.from_dict,
    make_runtime=lambda config, context: __import__("ray_worker.runtime", fromlist=["x"]).RayWorkerRuntime(
        config, context),
    default_config=default_config,
    deep_validate=deep_validate,
    heartbeat_interval_s=lambda config: config.reporting.heartbeat_interval_s,
    describe=get_worker_metadata,
    config_class=RayWorkerConfig,
    packages=("mosaic-ray-worker", "ray", "torch", "gymnasium", "pettingzoo"),
    algo_params_schema=algo_params.schema,
    envs=lambda: __import__("ray_worker.environment", fromlist=["x"]).offered_envs(),
    dry_run=_dry_run,
    rounded_budget=lambda config, start: config.rounded_budget(start),
    evaluate=_evaluate,
    make_player=lambda target, options: __import__("ray_worker.player", fromlist=["x"]).RayPlayer.load(
        target, options),
)


def main(argv: list[str] | None = None) -> int:
    return worker_main(PROGRAM, argv)


if __name__ == "__main__":
    sys.exit(main())
