"""``run_evaluation``: play loaded policies for N episodes, without Ray, and record results."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mosaic.errors import UserError
from ray_worker.evaluation_results import EpisodeMetrics, EvaluationResults
from ray_worker.policy_actor import RayPolicyActor, RayPolicyController, environment_config

RANDOM = "random"


@dataclass
class EvaluationConfig:
    actor: RayPolicyActor | None = None
    controller: RayPolicyController | None = None
    num_episodes: int = 20
    max_steps: int | None = None
    seed: int = 0
    video_episodes: int = 0  # record the first N episodes as GIF
    output_dir: str | None = None  # default: <run>/eval/<timestamp>/ when the checkpoint is in a run
    save: bool = True
    fastlane: bool = False  # stream frames to `mosaic watch RUN --stream eval`
    alternate_seats: bool = False  # 2-player games: swap the two seats every episode (fair to both sides)
    fastlane_fps: float = 30.0


def _legal_random(rng: np.random.Generator, space: Any, obs: Any, info: Any) -> Any:
    mask = obs.get("action_mask") if isinstance(obs, dict) else (info or {}).get("action_mask")
    if mask is not None:
        return int(rng.choice(np.flatnonzero(mask)))
    space.seed(int(rng.integers(2**31)))
    return space.sample()


def _controller(config: EvaluationConfig) -> RayPolicyController:
    if config.controller is not None:
        return config.controller
    if config.actor is None:
        raise UserError("EvaluationConfig needs an actor or a controller")
    mapping = config.actor.info.state.agent_to_module
    agents = [a for a, m in mapping.items() if m == config.actor.module_id] or list(mapping)
    return RayPolicyController({a: config.actor for a in agents})


def _reference_actor(controller: RayPolicyController) -> RayPolicyActor:
    if not controller.actors:
        raise UserError("the controller has no policies to evaluate")
    return next(iter(controller.actors.values()))


def _run_folder(checkpoint: Path) -> Path | None:
    parent = checkpoint.parent
    return parent.parent if parent.name == "checkpoints" else None


def run_evaluation(config: EvaluationConfig) -> EvaluationResults:
    from ray_worker.config import PolicyConfiguration
    from ray_worker.environment import EnvironmentFactory

    controller = _controller(config)
    ref = _reference_actor(controller)
    info = ref.info
    env_cfg = environment_config(info)
    ctde = info.state.policy_configuration == PolicyConfiguration.SHARED_VALUE_FUNCTION.name
    factory = EnvironmentFactory(env_cfg, global_state=ctde,
                                 critic_actions=bool((info.state.ctde or {}).get("critic_actions")))
    rendering = bool(config.video_episodes or config.fastlane)
    env, _ = factory.make_pettingzoo(render_mode="rgb_array" if rendering else None)
    lane = _lane(info.path, config) if config.fastlane else None
    for agent, actor in controller.actors.items():
        if agent not in env.possible_agents:
            raise UserError(f"agent {agent!r} is not in {env_cfg.env_id}; agents: {', '.join(env.possible_agents)}")
        actor.check_space(agent, env.observation_space(agent), env.action_space(agent))
    rng = np.random.default_rng(config.seed)
    seatings = [controller]
    if config.alternate_seats and len(env.possible_agents) == 2:
        first, second = env.possible_agents
        swapped = {second if a == first else first if a == second else a: actor
                   for a, actor in controller.actors.items()}
        seatings.append(RayPolicyController(swapped, controller.default, controller.seed))
    is_aec = hasattr(env, "agent_iter")
    episodes: list[EpisodeMetrics] = []
    frames_per_episode: list[list[np.ndarray]] = []
    try:
        for i in range(config.num_episodes):
            seed = config.seed + i
            record = i < config.video_episodes
            frames: list[np.ndarray] = []
            start = time.perf_counter()
            sink = _FrameSink(frames if record else None, lane, i)
            seating = seatings[i % len(seatings)]
            players = {a: (seating.actors[a].module_id if a in seating.actors else RANDOM)
                       for a in env.possible_agents}
            returns, length = (_play_aec if is_aec else _play_parallel)(
                env, seating, rng, seed, config.max_steps, sink if (record or lane) else None)
            winner = None
            if len(returns) == 2:
                (a, ra), (b, rb) = returns.items()
                winner = None if ra == rb else (a if ra > rb else b)
            episodes.append(EpisodeMetrics(i, seed, returns, length, time.perf_counter() - start,
                                           dict(players), winner))
            if record:
                frames_per_episode.append(frames)
    finally:
        env.close()
        if lane is not None:
            lane.close()
    from mosaic import configkit

    results = EvaluationResults(episodes, configkit.to_dict(env_cfg), str(info.path))
    if config.save:
        folder = Path(config.output_dir) if config.output_dir else None
        run = _run_folder(info.path)
        if folder is None:
            if run is None:
                raise UserError("output_dir: the checkpoint is not inside a run folder; give an output_dir")
            folder = run / "eval" / time.strftime("%Y%m%d-%H%M%S")
        for n, frames in enumerate(frames_per_episode):
            if frames:
                results.videos.append(str(_write_gif(frames, folder / "videos" / f"episode_{n:03d}.gif")))
        results.save(folder)
        if run is not None and folder.resolve().is_relative_to(run.resolve()):
            _record_in_manifest(run, folder, results)
    return results


def _act(controller: RayPolicyController, agent: str, obs: Any, info: Any, rng: np.random.Generator,
         space: Any) -> Any:
    actor = controller.actor_for(agent)
    if actor is None:
        return _legal_random(rng, space, obs, info)
    return actor.compute_action(obs)


def _play_aec(env: Any, controller: RayPolicyController, rng: np.random.Generator, seed: int,
              max_steps: int | None, frames: "_FrameSink | None") -> tuple[dict[str, float], int]:
    env.reset(seed=seed)
    returns = {a: 0.0 for a in env.possible_agents}
    length = 0
    for agent in env.agent_iter():
        obs, _, term, trunc, info = env.last()
        action = None if term or trunc else _act(controller, agent, obs, info, rng, env.action_space(agent))
        env.step(action)
        for a, r in env.rewards.items():
            returns[a] += float(r)
        if action is not None:
            length += 1
            if frames is not None:
                frames.append(env.render, length, returns)
        if max_steps and length >= max_steps:
            break
    return returns, length


def _play_parallel(env: Any, controller: RayPolicyController, rng: np.random.Generator, seed: int,
                   max_steps: int | None, frames: "_FrameSink | None") -> tuple[dict[str, float], int]:
    obs, infos = env.reset(seed=seed)
    returns = {a: 0.0 for a in env.possible_agents}
    length = 0
    while env.agents:
        # Batch agents that share a module: one forward pass per module and step.
        actions: dict[str, Any] = {}
        groups: dict[int, list[str]] = {}
        for agent in env.agents:
            actor = controller.actor_for(agent)
            if actor is None:
                actions[agent] = _legal_random(rng, env.action_space(agent), obs[agent], infos.get(agent))
            else:
                groups.setdefault(id(actor), []).append(agent)
        for agents in groups.values():
            actor = controller.actor_for(agents[0])
            for agent, action in zip(agents, actor.compute_actions([obs[a] for a in agents])):
                actions[agent] = action
        obs, rewards, _, _, infos = env.step(actions)
        for a, r in rewards.items():
            returns[a] += float(r)
        length += 1
        if frames is not None:
            frames.append(env.render, length, returns)
        if max_steps and length >= max_steps:
            break
    return returns, length


class _FrameSink:
    """Where rendered frames go: the episode's video and/or a FastLane stream."""

    def __init__(self, video: list | None, lane: Any, episode: int) -> None:
        self.video, self.lane, self.episode = video, lane, episode

    def append(self, render: Any, step: int, returns: dict[str, float]) -> None:
        if self.video is not None:
            self.video.append(render())
            if self.lane is not None:
                frame = self.video[-1]
                self.lane.offer(lambda: frame, self.episode, step, {"returns": dict(returns)})
        elif self.lane is not None:
            self.lane.offer(render, self.episode, step, lambda: {"returns": dict(returns)})


def _lane(checkpoint: Path, config: EvaluationConfig) -> Any:
    from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
    from mosaic.fastlane.publisher import Publisher

    run = _run_folder(checkpoint)
    run_id = run.name if run is not None else f"eval-{time.strftime('%Y%m%d-%H%M%S')}"
    target = FastLaneTarget(run_id, str(run) if run is not None else None,
                            FastLaneConfig(enabled=True, fps=config.fastlane_fps, max_overhead=0.0))
    return Publisher(target, "eval")


def _write_gif(frames: list[np.ndarray], path: Path, fps: int = 15) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in frames if f is not None]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return path


def _record_in_manifest(run: Path, folder: Path, results: EvaluationResults) -> None:
    from mosaic.runs import RunDir

    run_dir = RunDir(run)
    manifest = run_dir.read_manifest()
    entry = {"path": str(folder.relative_to(run)), "checkpoint": results.checkpoint,
             "num_episodes": len(results.episodes), "outcomes": results.outcomes,
             "videos": [str(Path(v).relative_to(run)) for v in results.videos]}
    run_dir.update_manifest(evaluations=[*manifest.get("evaluations", []), entry])
