"""Greedy play of a CleanRL checkpoint: the script's own network class, loaded with its weights.

The network is rebuilt from the script module (imported, not run: its training
sits under ``if __name__ == "__main__"``) with the vector env the script
would make, so shapes and buffers (``action_scale``) match; then its weights
are loaded and it plays the task greedily: ppo the most likely action, dqn the
largest Q-value, c51 the largest expected return, sac the squashed mean, td3
and ddpg their deterministic actor. Results, confidence intervals, CSV and
GIF videos are written by :mod:`mosaic.workerkit.evaluation`, as for every worker.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mosaic.errors import UserError
from mosaic.workerkit.evaluation import (EvaluationResults, FrameSink, eval_lane, play_single_agent, print_results,
                                         save_results)

from cleanrl_worker import algorithms
from cleanrl_worker.checkpoint import MODULES_FILE, CleanRLCheckpointState
from cleanrl_worker.telemetry import AGENT, MODULE

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rendering for videos needs no display

#: Greedy action of each script's policy network for a batch of observations.
GREEDY: dict[str, Callable[[Any, Any], Any]] = {
    "ppo": lambda net, x: net.actor(x).argmax(dim=-1),
    "dqn": lambda net, x: net(x).argmax(dim=-1),
    "c51": lambda net, x: net.get_action(x)[0],
    "sac": lambda net, x: net.get_action(x)[2],
    "td3": lambda net, x: net(x),
    "ddpg": lambda net, x: net(x),
}


class Policy:
    """A checkpoint's policy network, acting greedily on single observations."""

    def __init__(self, state: CleanRLCheckpointState, folder: Path) -> None:
        import torch

        self.state = state
        self.algo = algorithms.get(state.algorithm, "checkpoint")
        algorithms.silence_gym_notice()
        self.module = importlib.import_module(self.algo.module)
        self.api = importlib.import_module(self.algo.env_api)
        params = state.params
        num_envs = int(params.get("num_envs", 1))
        envs = self.api.vector.SyncVectorEnv(
            [self.module.make_env(state.env_id, int(params.get("seed", 0)) + i, i, False, "eval")
             for i in range(num_envs)])
        cls = getattr(self.module, self.algo.policy_class)
        extra = ({k: params[k] for k in ("n_atoms", "v_min", "v_max")} if state.algorithm == "c51" else {})
        self.net = cls(envs, **extra)
        envs.close()
        weights = torch.load(folder / MODULES_FILE, map_location="cpu", weights_only=True)
        self.net.load_state_dict(weights[state.policy])
        self.net.eval()
        self.greedy = GREEDY[state.algorithm]
        self.module_id = MODULE

    def compute_action(self, obs: Any) -> Any:
        import torch

        with torch.no_grad():
            action = self.greedy(self.net, torch.as_tensor(np.asarray(obs, dtype=np.float32)).unsqueeze(0))
        action = action.cpu().numpy()[0]
        return int(action) if self.algo.action_space == "discrete" else action


def make_env(policy: Policy, render: bool) -> Any:
    if policy.algo.env_api == "gymnasium":
        return policy.api.make(policy.state.env_id, **({"render_mode": "rgb_array"} if render else {}))
    return policy.api.make(policy.state.env_id)


def play(policy: Policy, env: Any, seed: int, frames: FrameSink | None) -> tuple[float, int]:
    gymnasium_api = policy.algo.env_api == "gymnasium"
    obs = env.reset(seed=seed)
    if gymnasium_api:
        obs = obs[0]
    space = env.action_space
    total, length = 0.0, 0
    render = env.render if gymnasium_api else (lambda: env.render(mode="rgb_array"))
    while True:
        if frames is not None:
            frames.append(render, length, {AGENT: total})
        action = policy.compute_action(obs)
        if policy.algo.action_space == "box":
            action = np.clip(action, space.low, space.high)
        result = env.step(action)
        obs, reward = result[0], float(result[1])
        done = bool(result[2] or result[3]) if gymnasium_api else bool(result[2])
        total += reward
        length += 1
        if done:
            return total, length


def evaluate(request: Any) -> int:
    if request.opponent:
        raise UserError("--opponent: CleanRL runs are single-agent; there is no other seat")
    state = CleanRLCheckpointState.read(request.target, "--evaluate", "the cleanrl worker")
    from mosaic.workerkit.checkpoints import resolve

    folder = resolve(request.target, "--evaluate", "the cleanrl worker")
    policy = Policy(state, folder)
    env = make_env(policy, render=request.video > 0 or request.fastlane)
    lane = eval_lane(folder) if request.fastlane else None
    try:
        episodes, videos = play_single_agent(lambda seed, frames: play(policy, env, seed, frames), request.episodes,
                                             request.seed, AGENT, MODULE, request.video, lane)
    finally:
        env.close()
        if lane is not None:
            lane.close()
    results = EvaluationResults(episodes, {"family": algorithms.ENV_FAMILY, "env_id": state.env_id,
                                           "algorithm": state.algorithm}, str(folder))
    save_results(results, folder, None, videos)
    print_results(results, request.json)
    return 0
