"""``mosaic eval`` of a Tianshou checkpoint: the algorithm rebuilt, its weights loaded, test-mode play.

The algorithm is rebuilt from the run's config and loaded from the checkpoint's
``state_dict``; its policy acts in Tianshou's evaluation mode (``policy.eval()``:
greedy Q-values without epsilon, the most likely action or the mean action where
the policy has a deterministic evaluation) through ``Policy.compute_action``.
Episode *i* is seeded ``seed + i``: the env's reset and torch's (and numpy's) generator, which a
policy that samples in evaluation mode (ppo) draws its actions from. Results, confidence intervals, CSV and GIF
videos are written by :mod:`mosaic.workerkit.evaluation`, as for every worker; with
``--fastlane`` the played frames stream as the run's ``eval`` stream
(:func:`mosaic.workerkit.evaluation.eval_lane`). A classic game's learner plays its seat
against random legal moves through MOSAIC's shared player, which scores win rates.
"""

from __future__ import annotations

from typing import Any

from mosaic.errors import UserError
from mosaic.workerkit.evaluation import (EvaluationResults, FrameSink, eval_lane, play_single_agent, print_results,
                                         save_results)

from tianshou_worker.telemetry import AGENT, MODULE


def play(policy: Any, env: Any, seed: int, frames: FrameSink | None) -> tuple[float, int]:
    import numpy as np
    import torch

    # A policy that samples its actions in evaluation mode (ppo's) draws from torch's generator: seeded
    # from the episode's seed, the same --seed plays the same episodes.
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    obs, info = env.reset(seed=seed)
    total, length = 0.0, 0
    while True:
        if frames is not None:
            frames.append(env.render, length, {AGENT: total})
        with torch.no_grad():
            action = policy.compute_action(obs)
        obs, reward, terminated, truncated, info = env.step(action)
        total += float(reward)
        length += 1
        if terminated or truncated:
            return total, length


def evaluate(request: Any) -> int:
    from mosaic.workerkit.threads import limit_torch_threads

    from tianshou_worker.envs import make_env
    from tianshou_worker.runtime import load_checkpoint, quiet

    quiet()
    limit_torch_threads(1)
    folder, state, config, algo = load_checkpoint(request.target, "--evaluate")
    if request.opponent:
        raise UserError("--opponent: " + ("the other seat of a classic game plays random legal moves here; other "
                                          "opponents are not offered yet" if config.classic else
                                          "Tianshou runs here are single-agent; there is no other seat"))
    algo.eval()
    if config.classic:
        return evaluate_game(request, folder, state, config, algo)
    policy = algo.policy
    env = make_env(config.resolved_env_id, render_mode="rgb_array" if request.video or request.fastlane else None)
    lane = eval_lane(folder) if request.fastlane else None
    try:
        episodes, videos = play_single_agent(lambda seed, frames: play(policy, env, seed, frames), request.episodes,
                                             request.seed, AGENT, MODULE, request.video, lane)
    finally:
        env.close()
        if lane is not None:
            lane.close()
    results = EvaluationResults(episodes, {"family": "gymnasium", "env_id": config.resolved_env_id,
                                           "algorithm": state.algorithm}, str(folder))
    save_results(results, folder, None, videos)
    print_results(results, request.json)
    return 0


def evaluate_game(request: Any, folder: Any, state: Any, config: Any, algo: Any) -> int:
    """A classic game: the learner's seat plays its greedy masked policy, the other seat random legal moves;
    MOSAIC's shared player (``mosaic.workerkit.evaluation.play_episodes``) plays and scores them (win rates)."""
    from mosaic.workerkit.evaluation import play_requested

    from tianshou_worker import classic
    from tianshou_worker.runtime import learner_of

    env = classic.make_game(config.resolved_env_id, "rgb_array" if request.video or request.fastlane else None)
    agents = list(env.possible_agents)
    seat = agents[classic.seat_index(agents, config.learner_seat)]
    seating = classic.Seating(classic.SeatActor(learner_of(config, algo).policy), seat)
    episodes, videos = play_requested(env, [seating], request, folder)
    results = EvaluationResults(episodes, {"family": "classic", "env_id": config.resolved_env_id,
                                           "algorithm": state.algorithm, "learner_seat": seat}, str(folder))
    save_results(results, folder, None, videos)
    print_results(results, request.json)
    return 0
