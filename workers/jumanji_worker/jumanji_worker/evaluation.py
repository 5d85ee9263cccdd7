"""``mosaic eval`` of a Jumanji checkpoint: episodes played by Jumanji's own evaluator, one by one.

The agent is rebuilt as ``train.py`` builds it (``setup_env`` and ``setup_agent``
from the run's composed config; ``ppo.setup_agent`` adds PPO) and Jumanji's
``Evaluator`` plays: greedy for an A2C or PPO checkpoint (``stochastic=False``:
the most likely legal action), the uniform legal-random policy for a checkpoint
of the ``random`` agent. ``train.py`` averages its evaluation batch; here the evaluator's one-episode function is
vmapped over the episodes' keys instead, so each episode's return, length and
the env's own measures (``extras``; TSP's tour length) are kept. Episode *i* is
reset from ``jax.random.PRNGKey(seed + i)``: the same instances for every
checkpoint of the same env, so a trained policy and the random one are compared
on the same problems. Videos and ``--fastlane`` replay the chosen episodes step
by step with the same keys, drawing each state with Jumanji's viewer.
"""

from __future__ import annotations

import time
from typing import Any

from mosaic.errors import UserError
from mosaic.workerkit.evaluation import (EpisodeMetrics, EvaluationResults, episode_progress, eval_lane, print_results,
                                         save_results)

from jumanji_worker.telemetry import AGENT, MODULE, env_measures


def build(config: Any) -> tuple[Any, Any, Any]:
    """(hydra config, agent, raw env) as ``train.py`` builds them."""
    from jumanji.training.setup_train import _make_raw_env, setup_env

    from jumanji_worker.config import compose
    from jumanji_worker.ppo import setup_agent

    cfg = compose(config)
    agent = setup_agent(cfg, setup_env(cfg))
    return cfg, agent, _make_raw_env(cfg)


def policy_params(agent: Any, training_state: Any) -> Any:
    """The actor's parameters of device 0 (None for the random agent, whose policy has none)."""
    import jax
    from jumanji.training.agents.a2c import A2CAgent

    if not isinstance(agent, A2CAgent):
        return None
    return jax.tree_util.tree_map(lambda x: x[0], training_state.params_state.params.actor)


def play_all(evaluator: Any, params: Any, seeds: list[int]) -> dict[str, Any]:
    """Jumanji's one-episode evaluation, vmapped over the episodes' keys: per-episode values."""
    import jax
    import numpy as np

    keys = jax.numpy.stack([jax.random.PRNGKey(s) for s in seeds])
    played = jax.jit(jax.vmap(evaluator._eval_one_episode, in_axes=(None, 0)))(params, keys)
    return {k: np.asarray(v) for k, v in played.items()}


def replay(env: Any, agent: Any, params: Any, stochastic: bool, seed: int, draw: Any) -> None:
    """Episode ``seed`` again, step by step as ``Evaluator`` plays it, calling ``draw(state, step, return)``."""
    import jax
    import jax.numpy as jnp
    from jumanji.training.agents.a2c import A2CAgent

    policy = agent.make_policy(policy_params=params, stochastic=stochastic)
    act = jax.jit(lambda obs, key: policy(obs, key)[0] if isinstance(agent, A2CAgent) else policy(obs, key))
    step = jax.jit(env.step)
    reset_key, key = jax.random.split(jax.random.PRNGKey(seed))
    state, timestep = jax.jit(env.reset)(reset_key)
    total, n = 0.0, 0
    draw(state, n, total)
    while not bool(timestep.last()):
        key, action_key = jax.random.split(key)
        observation = jax.tree_util.tree_map(lambda x: x[None], timestep.observation)
        state, timestep = step(state, jnp.squeeze(act(observation, action_key), axis=0))
        total += float(timestep.reward)
        n += 1
        draw(state, n, total)


def evaluate(request: Any) -> int:
    from jumanji_worker.frames import drawing_env
    from jumanji_worker.runtime import load_state, prepare_process, read_checkpoint

    if request.opponent:
        raise UserError("--opponent: Jumanji's envs here have one player; to compare with random play, "
                        "evaluate a run of the 'random' agent on the same --seed")
    folder, state, config = read_checkpoint(request.target, "--evaluate")
    prepare_process(config)
    from jumanji.training.evaluator import Evaluator

    cfg, agent, env = build(config)
    params = policy_params(agent, load_state(folder, state))
    from mosaic.workerkit import startup

    startup.resume()  # set up: XLA's compiling and the episodes run with the collector on
    stochastic = config.algorithm == "random"
    evaluator = Evaluator(eval_env=env, agent=agent, total_batch_size=1, stochastic=stochastic)
    seeds = [request.seed + i for i in range(request.episodes)]
    progress = episode_progress(len(seeds))  # one batched call plays them all: 0 of N, then N of N
    if progress is not None:
        progress.draw()
    start = time.perf_counter()
    played = play_all(evaluator, params, seeds)
    if progress is not None:
        progress.advance(len(seeds))
    each = (time.perf_counter() - start) / len(seeds)
    player = "random" if stochastic else MODULE
    episodes = []
    for i, seed in enumerate(seeds):
        values = {k: float(v[i]) for k, v in played.items()}
        episodes.append(EpisodeMetrics(i, seed, {AGENT: values["episode_return"]}, int(values["episode_length"]),
                                       each, {AGENT: player}, measures=env_measures(config.env_name, values)))

    videos: list[list[Any]] = []
    lane = eval_lane(folder) if request.fastlane else None
    shown = max(request.video, request.episodes if lane is not None else 0)
    if shown:
        drawer = drawing_env(cfg.env.registered_version)
        for i, seed in enumerate(seeds[:shown]):
            frames: list[Any] | None = [] if i < request.video else None

            def draw(s: Any, step: int, total: float, i: int = i, frames: list | None = frames) -> None:
                if frames is not None:
                    frames.append(drawer.render(s))
                if lane is not None:
                    lane.offer(lambda: drawer.render(s), i, step, {"episode_return": total})

            replay(env, agent, params, stochastic, seed, draw)
            if frames is not None:
                videos.append(frames)
    if lane is not None:
        lane.close()
    results = EvaluationResults(episodes, {"family": "jumanji", "env_id": cfg.env.registered_version,
                                           "config": config.env_name, "algorithm": config.algorithm,
                                           "policy": "greedy" if not stochastic else "uniform random legal"},
                                str(folder))
    save_results(results, folder, None, videos)
    print_results(results, request.json)
    return 0
