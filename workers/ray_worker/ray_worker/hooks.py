"""The Ray worker's hooks for the shared command line (mosaic.workerkit.cli): ``--dry-run`` shows agents, spaces and
the resolved RLlib settings without starting Ray, ``--evaluate`` plays a checkpoint without Ray. Cheap to import:
Ray and torch are imported when one is called."""

from __future__ import annotations

from mosaic.errors import UserError
from mosaic.workerkit.cli import EvaluateRequest
from mosaic.workerkit.threads import limit_torch_threads
from ray_worker.config import RayWorkerConfig


def deep_validate(config: RayWorkerConfig):
    """Checks that need the env (spaces vs algorithm) or the machine (GPUs, checkpoints), without Ray.

    Returns the env's description and the module layout it checked (``--dry-run`` prints them).
    """
    from ray_worker.algorithms import check_compatibility

    env_info, layout = _prepare(config)
    check_compatibility(config, env_info)
    if config.checkpoint.restore_from:
        from mosaic.workerkit.checkpoints import TrainedAs, env_words, read_for_restore
        from ray_worker.checkpoint import RayCheckpointState, policies_in_words, trained_as

        wanted = TrainedAs("ray", config.algorithm, env_words(config.environment),
                           policies_in_words(dict(layout.agent_to_module) if layout else {}))
        read_for_restore(RayCheckpointState, config.checkpoint.restore_from, wanted, trained_as)
    if config.wandb:
        from ray_worker.analytics import check_wandb_available

        check_wandb_available()
    return env_info, layout


def _prepare(config: RayWorkerConfig):
    from ray_worker.policies import prepare

    _, env_info, layout = prepare(config)
    return env_info, layout


def evaluate(request: EvaluateRequest) -> int:
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
                controller.actors[agent].player = request.opponent  # the results name the opponent, not its module
    # Against a single opponent in a 2-player game, play both seats in turn.
    alternate = bool(request.opponent) and len(controller.actors) == 1
    results = run_evaluation(EvaluationConfig(controller=controller, num_episodes=request.episodes,
                                              seed=request.seed, video_episodes=request.video,
                                              fastlane=request.fastlane, alternate_seats=alternate))
    print_results(results, request.json)
    return 0


def dry_run(config: RayWorkerConfig, checked) -> dict:
    """Agents, spaces and the resolved RLlib settings (everything `mosaic run` checks that needs no Ray)."""
    from ray_worker.algorithms import resolve

    env_info, layout = checked
    return {"env": env_info.to_dict(), "rllib": resolve(config, env_info, layout)}
