"""``run_evaluation``: play a Ray checkpoint's policies for N episodes, without Ray.

A single-agent (Gymnasium) run's module plays its env alone (``play_single_agent``).

Loading the checkpoint and building its env is Ray-worker glue; playing,
scoring and saving are MOSAIC's (``mosaic.workerkit.evaluation``).
"""

from __future__ import annotations

from dataclasses import dataclass


from mosaic.errors import UserError
from mosaic.workerkit.evaluation import EvaluationResults, eval_lane, play_episodes, save_results
from ray_worker.policy_actor import RayPolicyActor, RayPolicyController, environment_config


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


def run_evaluation(config: EvaluationConfig) -> EvaluationResults:
    from mosaic import configkit
    from ray_worker.config import PolicyConfiguration
    from ray_worker.environment import EnvironmentFactory

    controller = _controller(config)
    ref = _reference_actor(controller)
    info = ref.info
    env_cfg = environment_config(info)
    if env_cfg.single_agent:
        return _run_single_agent(config, controller, env_cfg)
    ctde = info.state.policy_configuration == PolicyConfiguration.SHARED_VALUE_FUNCTION.name
    factory = EnvironmentFactory(env_cfg, global_state=ctde,
                                 critic_actions=bool((info.state.ctde or {}).get("critic_actions")))
    rendering = bool(config.video_episodes or config.fastlane)
    env, _ = factory.make_pettingzoo(render_mode="rgb_array" if rendering else None)
    lane = eval_lane(info.path, config.fastlane_fps) if config.fastlane else None
    for agent, actor in controller.actors.items():
        if agent not in env.possible_agents:
            raise UserError(f"agent {agent!r} is not in {env_cfg.env_id}; agents: {', '.join(env.possible_agents)}")
        actor.check_space(agent, env.observation_space(agent), env.action_space(agent))
    seatings = [controller]
    if config.alternate_seats and len(env.possible_agents) == 2:
        first, second = env.possible_agents
        swapped = {second if a == first else first if a == second else a: actor
                   for a, actor in controller.actors.items()}
        seatings.append(RayPolicyController(swapped, controller.default, controller.seed))
    try:
        episodes, videos = play_episodes(env, seatings, config.num_episodes, config.seed, config.max_steps,
                                         config.video_episodes, lane)
    finally:
        env.close()
        if lane is not None:
            lane.close()
    results = EvaluationResults(episodes, configkit.to_dict(env_cfg), str(info.path))
    if config.save:
        save_results(results, info.path, config.output_dir, videos)
    return results


def _run_single_agent(config: EvaluationConfig, controller: RayPolicyController, env_cfg) -> EvaluationResults:
    """A single-agent (Gymnasium) run: its one agent's module plays the env, MOSAIC scores the episodes."""
    from mosaic import configkit
    from mosaic.workerkit.evaluation import play_single_agent
    from ray_worker.environment import SINGLE_AGENT, EnvironmentFactory

    actor = controller.actor_for(SINGLE_AGENT)
    if actor is None:
        raise UserError(f"the controller has no policy for {SINGLE_AGENT!r}, the one agent of {env_cfg.env_id}")
    rendering = bool(config.video_episodes or config.fastlane)
    env = EnvironmentFactory(env_cfg).make_gymnasium(render_mode="rgb_array" if rendering else None)
    actor.check_space(SINGLE_AGENT, env.observation_space, env.action_space)
    lane = eval_lane(actor.info.path, config.fastlane_fps) if config.fastlane else None

    def play(seed: int, frames) -> tuple[float, int]:
        obs, _ = env.reset(seed=seed)
        total, length = 0.0, 0
        while True:
            if frames is not None:
                frames.append(env.render, length, {SINGLE_AGENT: total})
            obs, reward, terminated, truncated, _ = env.step(actor.compute_action(obs))
            total += float(reward)
            length += 1
            if terminated or truncated or (config.max_steps is not None and length >= config.max_steps):
                return total, length

    try:
        episodes, videos = play_single_agent(play, config.num_episodes, config.seed, SINGLE_AGENT,
                                             actor.module_id, config.video_episodes, lane)
    finally:
        env.close()
        if lane is not None:
            lane.close()
    results = EvaluationResults(episodes, configkit.to_dict(env_cfg), str(actor.info.path))
    if config.save:
        save_results(results, actor.info.path, config.output_dir, videos)
    return results
