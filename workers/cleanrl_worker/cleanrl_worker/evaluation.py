"""Greedy play of a CleanRL checkpoint: the script's own network class, loaded with its weights.

The network is rebuilt from the script module (imported, not run: its training
sits under ``if __name__ == "__main__"``) with the vector env the script
would make, so shapes and buffers (``action_scale``) match; then its weights
are loaded and it plays the task greedily: ppo the most likely action, dqn and
dqn_atari the largest Q-value, c51 the largest expected return, sac the squashed
mean, td3 and ddpg their deterministic actor, ppo_continuous_action the mean of
its Gaussian, on observations normalised with the statistics the checkpoint kept
(env 0's, frozen). Atari games are played through the script's own wrappers
(frame skip, 84x84 grey frames, a stack of 4), a lost life going on to the next
until the game is over; the score and length are the script's
``RecordEpisodeStatistics`` ones (the game's unclipped score, in frames), and
frames are the ALE screen. ppo_atari and c51_atari play the same way through their scripts' wrappers (SB3
1.2.0's, gym's old API): the evaluation runs again in an interpreter with the script's overlay first on its
path, as the script's own process has it (:func:`in_overlay`). ppo_atari_envpool plays EnvPool's game the
same way (its agent's CNN, the largest logit), through the script's ``RecordEpisodeStatistics``; its lengths
are agent steps and its frames the agent's 84x84 grey view. Results, confidence intervals, CSV and GIF videos
are written by :mod:`mosaic.workerkit.evaluation`, as for every worker.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Callable

import numpy as np

from mosaic.errors import UserError
from mosaic.workerkit.evaluation import (EvaluationResults, FrameSink, eval_lane, play_single_agent, print_results,
                                         save_results)

from cleanrl_worker import algorithms
from cleanrl_worker.checkpoint import MODULES_FILE, OBS_NORM_FILE, CleanRLCheckpointState
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
    "dqn_atari": lambda net, x: net(x).argmax(dim=-1),
    "ppo_atari": lambda net, x: net.actor(net.network(x / 255.0)).argmax(dim=-1),
    "c51_atari": lambda net, x: net.get_action(x)[0],
    "ppo_continuous_action": lambda net, x: net.actor_mean(x),
    "ppo_atari_envpool": lambda net, x: net.actor(net.network(x / 255.0)).argmax(dim=-1),
}
#: ppo_continuous_action clips its normalised observations to this range (its TransformObservation).
OBS_CLIP = 10.0
#: Set (to the overlay's name) in the interpreter :func:`in_overlay` starts.
IN_OVERLAY = "MOSAIC_CLEANRL_EVAL_OVERLAY"


class Policy:
    """A checkpoint's policy network, acting greedily on single observations."""

    def __init__(self, state: CleanRLCheckpointState, folder: Path) -> None:
        import torch

        self.state = state
        self.algo = algorithms.get(state.algorithm, "checkpoint")
        algorithms.silence_gym_notice()
        self.family = algorithms.family_of(state.env_id) or algorithms.FAMILY
        self.module = importlib.import_module(self.algo.module)
        self.api = importlib.import_module(self.algo.env_api)
        algorithms.prepare_family(self.family)
        params = state.params
        if self.family == "envpool":  # the env as the script dresses it up for its Agent
            envs = algorithms.make_envpool(state.env_id)
            envs.single_action_space, envs.single_observation_space = envs.action_space, envs.observation_space
        else:
            num_envs = int(params.get("num_envs", 1))
            envs = self.api.vector.SyncVectorEnv([self.script_env(i) for i in range(num_envs)])
        cls = getattr(self.module, self.algo.policy_class)
        extra = {k: params[k] for k in ("n_atoms", "v_min", "v_max") if k in params} \
            if state.algorithm in ("c51", "c51_atari") else {}
        self.net = cls(envs, **extra)
        envs.close()
        weights = torch.load(folder / MODULES_FILE, map_location="cpu", weights_only=True)
        self.net.load_state_dict(weights[state.policy])
        self.net.eval()
        self.greedy = GREEDY[state.algorithm]
        self.module_id = MODULE
        self.obs_norm = None
        if (folder / OBS_NORM_FILE).is_file():
            import json

            stats = json.loads((folder / OBS_NORM_FILE).read_text())
            self.obs_norm = (np.asarray(stats["mean"], dtype=np.float64),
                             np.sqrt(np.asarray(stats["var"], dtype=np.float64) + float(stats["epsilon"])))
        elif self.algo.name == "ppo_continuous_action":
            raise UserError(f"--evaluate: {folder} holds no {OBS_NORM_FILE}: ppo_continuous_action's policy acts "
                            "on observations normalised by its training envs, and this checkpoint did not keep "
                            "their statistics; allowed: a checkpoint saved by this worker version")

    def script_env(self, idx: int) -> Any:
        """The script's own ``make_env`` thunk for sub-env ``idx``, called with the arguments it takes."""
        params = self.state.params
        values = {"env_id": self.state.env_id, "seed": int(params.get("seed", 0)) + idx, "idx": idx,
                  "capture_video": False, "run_name": "eval", "gamma": float(params.get("gamma", 0.99))}
        return self.module.make_env(*(values[name] for name in self.algo.make_env_args))

    def compute_action(self, obs: Any) -> Any:
        import torch

        obs = np.asarray(obs, dtype=np.float32)
        if self.obs_norm is not None:
            mean, std = self.obs_norm
            obs = np.clip((obs - mean) / std, -OBS_CLIP, OBS_CLIP).astype(np.float32)
        with torch.no_grad():
            action = self.greedy(self.net, torch.as_tensor(obs).unsqueeze(0))
        action = action.cpu().numpy()[0]
        return int(action) if self.algo.action_space == "discrete" else action


def make_env(policy: Policy, render: bool) -> Any:
    if policy.family == "envpool":  # one EnvPool env per game, seeded by it (play_envpool)
        return None
    if policy.family == "atari":  # the script's wrappers make the observations its network was trained on
        return policy.script_env(0)()
    if policy.algo.env_api == "gymnasium":
        return policy.api.make(policy.state.env_id, **({"render_mode": "rgb_array"} if render else {}))
    return policy.api.make(policy.state.env_id)


def play_atari(policy: Policy, env: Any, seed: int, frames: FrameSink | None) -> tuple[float, int]:
    """One game through the script's wrappers: a lost life ends their episode (EpisodicLifeEnv), not the game.

    The game is over when the script's ``RecordEpisodeStatistics`` (right above the ALE env) reports it; its
    return is the game's score (rewards unclipped) and its length the frames played.
    """
    old_api = policy.algo.env_api == "gym"  # ppo_atari and c51_atari: gym 0.23.1's reset and 4-tuple step
    obs = env.reset(seed=seed) if old_api else env.reset(seed=seed)[0]
    screen = env.unwrapped.ale.getScreenRGB
    clipped, steps = 0.0, 0
    while True:
        if frames is not None:
            frames.append(screen, steps, {AGENT: clipped})
        result = env.step(policy.compute_action(obs))
        obs, reward, info = result[0], result[1], result[-1]
        clipped += float(reward)
        steps += 1
        if "episode" in info:
            episode = info["episode"]
            return (float(np.asarray(episode["r"]).reshape(-1)[0]), int(np.asarray(episode["l"]).reshape(-1)[0]))
        if result[2] or (not old_api and result[3]):
            obs = env.reset() if old_api else env.reset()[0]


def play_envpool(policy: Policy, seed: int, frames: FrameSink | None) -> tuple[float, int]:
    """One game of an EnvPool Atari id, made as ppo_atari_envpool.py makes its envs (one of them, seeded
    ``seed``) and wrapped in the script's own ``RecordEpisodeStatistics``.

    A lost life ends EnvPool's episode (``episodic_life``), not the game: EnvPool goes on with the next life at
    the following step. The game is over at a ``done`` with no lives left (as the script counts an episode) or
    when EnvPool truncates it (its ``max_episode_steps``); the return and length are the script's ``info["r"]``
    and ``info["l"]``: the game's unclipped score and its agent steps (4 emulator frames each). Frames are
    what the agent sees: the newest 84x84 grey frame of its observation (EnvPool 0.8.4 has no render).
    """
    from cleanrl_worker.fastlane import agent_view

    raw = algorithms.make_envpool(policy.state.env_id, episodic_life=True, reward_clip=True, seed=seed)
    env = policy.module.RecordEpisodeStatistics(raw)
    try:
        obs = env.reset()
        steps = 0
        while True:
            if frames is not None:
                frames.append(lambda obs=obs: agent_view(obs, 0), steps, {AGENT: float(env.episode_returns[0])})
            obs, _, done, info = env.step(np.array([policy.compute_action(obs[0])]))
            steps += 1
            if done[0] and (int(info["lives"][0]) == 0 or bool(info["TimeLimit.truncated"][0])):
                return float(info["r"][0]), int(info["l"][0])
    finally:
        raw.close()


def play(policy: Policy, env: Any, seed: int, frames: FrameSink | None) -> tuple[float, int]:
    if policy.family == "envpool":
        return play_envpool(policy, seed, frames)
    if policy.family == "atari":
        return play_atari(policy, env, seed, frames)
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


def _quiet_env_seed_warning() -> None:
    """gym 0.23.1 warns (in colour, on stderr) that the scripts' ``make_env`` calls its deprecated ``env.seed``:
    nothing a user can change. The filter goes in after gym's import, whose logger puts its own first."""
    algorithms.silence_gym_notice()  # before gym's first import
    importlib.import_module("gym.logger")  # for its side effect: its own warning filter, first

    warnings.filterwarnings("ignore", message=r".*`env\.seed\(seed\)` is marked as deprecated",
                            category=DeprecationWarning)


def evaluate(request: Any) -> int:
    if request.opponent:
        raise UserError("--opponent: CleanRL runs are single-agent; there is no other seat")
    from mosaic.workerkit.threads import limit_torch_threads

    # one env, a batch of one observation: more threads only wait for each other (mosaic.workerkit.threads;
    # an Atari game took 76 s with torch's own choice on a busy 2-core machine, 6 s with one thread)
    limit_torch_threads(1)
    state = CleanRLCheckpointState.read(request.target, "--evaluate", "the cleanrl worker")
    algo = algorithms.get(state.algorithm, "checkpoint")
    if algo.overlay and os.environ.get(IN_OVERLAY) != algo.overlay:
        in_overlay(algo, request)
    from mosaic.workerkit.checkpoints import resolve

    folder = resolve(request.target, "--evaluate", "the cleanrl worker")
    if algo.env_api == "gym":
        _quiet_env_seed_warning()
    policy = Policy(state, folder)  # builds the script's envs (make_env) to shape its agent
    env = make_env(policy, render=request.video > 0 or request.fastlane)
    lane = eval_lane(folder) if request.fastlane else None
    try:
        episodes, videos = play_single_agent(lambda seed, frames: play(policy, env, seed, frames), request.episodes,
                                             request.seed, AGENT, MODULE, request.video, lane)
    finally:
        if env is not None:
            env.close()
        if lane is not None:
            lane.close()
    results = EvaluationResults(episodes, {"family": policy.family, "env_id": state.env_id,
                                           "algorithm": state.algorithm}, str(folder))
    save_results(results, folder, None, videos)
    print_results(results, request.json)
    return 0


def in_overlay(algo: algorithms.Algorithm, request: Any) -> None:
    """Run this evaluation again, in place of this process, in an interpreter whose path starts with the
    script's overlay, as the script's own process does: ppo_atari's and c51_atari's networks play the games
    their scripts wrap with SB3 1.2.0's Atari wrappers (the ``sb3-gym`` overlay), not SB3 2.x's beside which
    the worker runs. The process is replaced (same pid, signals and output), not a child started."""
    path = [algorithms.overlay_path(algo), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path), IN_OVERLAY: algo.overlay}
    argv = ["--evaluate", str(request.target), "--episodes", str(request.episodes), "--seed", str(request.seed),
            "--video", str(request.video), *(["--json"] if request.json else []),
            *(["--fastlane"] if request.fastlane else [])]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, "-m", "cleanrl_worker.cli", *argv], env)
