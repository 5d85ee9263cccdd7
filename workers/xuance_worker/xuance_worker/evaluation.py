"""``mosaic eval`` of a XuanCe checkpoint: its agent rebuilt, its weights loaded, greedy play.

The agent is rebuilt the way training built it (the run's config, XuanCe's
arguments, one env) and loaded with XuanCe's own ``load_model``. It plays the
env from MOSAIC's env layer through :func:`mosaic.workerkit.evaluation.play_episodes`, the
same loop, seeds and results format (confidence intervals, CSV, GIF videos) as
every other worker's evaluation. Actions are XuanCe's test-mode actions:
deterministic for MAPPO and IPPO, no exploration for the Q-learners, no noise
for MADDPG. XuanCe acts for all agents of an env at once, so one joint actor
plays every seat. Observations reach it as in training: images and vectors as
the env gives them, anything else flattened by the same codec (``envs.py``).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Any, Sequence

from mosaic.workerkit.checkpoints import resolve
from mosaic.errors import UserError
from mosaic.workerkit.evaluation import print_results, EvaluationResults, play_requested, save_results
from xuance_worker.envs import ObservationCodec, has_action_mask, observation_part


class JointActor:
    """A XuanCe agent answering for every agent of one env, in ``agents`` order."""

    def __init__(self, agent: Any, agents: Sequence[str], module_id: str, codec: Any) -> None:
        self.agent, self.agents, self.module_id, self.codec = agent, list(agents), module_id, codec

    def compute_actions(self, observations: Sequence[Any]) -> list[Any]:
        if len(observations) != len(self.agents):
            raise RuntimeError("XuanCe acts for all agents at once; this env dropped some mid-episode")
        import torch

        obs = self.codec(dict(zip(self.agents, observations)))
        with torch.no_grad():
            out = self.agent.get_actions(obs_dict=[obs], test_mode=True, deterministic=True)
        actions = out["actions"][0]
        return [actions[a] for a in self.agents]

    def compute_action(self, obs: Any) -> Any:
        return self.compute_actions([obs])[0]


class TurnActor:
    """One agent's moves in a turn-based game, asked of XuanCe's joint actor: the mover's observation and legal
    moves, the waiting agents' pass (as in training: ``envs.one_agent_inputs``); only the mover's action is used."""

    def __init__(self, joint: JointActor, agent: str, sizes: dict[str, int], masked: dict[str, bool]) -> None:
        self.joint, self.agent, self.sizes, self.masked = joint, agent, sizes, masked
        self.module_id = joint.module_id

    def compute_action(self, obs: Any) -> Any:
        import torch

        from xuance_worker.envs import check_legal, one_agent_inputs

        joint_obs, masks, legal = one_agent_inputs(self.joint.codec, self.agent, obs, self.masked[self.agent],
                                                   self.sizes)
        with torch.no_grad():
            out = self.joint.agent.get_actions(obs_dict=[joint_obs], avail_actions_dict=masks, test_mode=True,
                                               deterministic=True)
        action = int(out["actions"][0][self.agent])
        check_legal(self.agent, action, legal)
        return action


class Seating:
    def __init__(self, actor: JointActor, turns: dict[str, TurnActor] | None = None) -> None:
        self.actor, self.turns = actor, turns or {}

    def actor_for(self, agent: str) -> JointActor | TurnActor:
        return self.turns.get(agent, self.actor)


#: Fields of configs saved before the shared run vocabulary (mosaic.workerkit.run_fields) -> where they went.
_OLD_FIELDS = {"report_every_timesteps": ("reporting", "every_timesteps"),
               "heartbeat_interval_s": ("reporting", "heartbeat_interval_s"),
               "checkpoint_every_timesteps": ("checkpoint", "every_timesteps"),
               "checkpoint_at_end": ("checkpoint", "at_end"), "restore_from": ("checkpoint", "restore_from"),
               "torch_num_threads": ("resources", "threads")}


def saved_config(config: dict[str, Any]) -> dict[str, Any]:
    """The config a checkpoint saved, in today's shape: checkpoints saved before the shared fields still play.

    Only the fields that moved are translated; an old on-policy ``batch_size`` (XuanCe's buffer_size) goes to
    algo_params.buffer_size, which is what it set (and which playing does not use)."""
    data = {k: v for k, v in config.items() if k != "run_id"}
    if "checkpoint" in data or not any(k in data for k in _OLD_FIELDS):
        return data
    for old, (section, name) in _OLD_FIELDS.items():
        if old in data:
            data.setdefault(section, {})[name] = data.pop(old)
    from xuance_worker import algorithms

    algo = algorithms.ALGORITHMS.get(str(data.get("algorithm", "")).lower())
    if algo is not None and algo.on_policy and data.get("batch_size") is not None:
        data["algo_params"] = {**data.get("algo_params", {}), "buffer_size": data.pop("batch_size")}
    return data


def load_agent(folder: Path, state: Any, scratch: Path) -> tuple[Any, Any, Any]:
    """(XuanCe agent with the checkpoint's weights, its envs, the run's config)."""
    from xuance_worker import envs as env_adapter
    from xuance_worker import learner_shims
    from xuance_worker.config import XuanCeConfig
    from xuance_worker.runtime import probe_env, quiet_xuance, xuance_arguments

    quiet_xuance()
    data = saved_config(state.config)
    data.update(run_id=state.run_id or "eval", num_envs=1, fastlane={"enabled": False})
    data["checkpoint"] = {**data.get("checkpoint", {}), "restore_from": None}
    data["resources"] = {**data.get("resources", {}), "gpus": 0.0}  # played on the CPU wherever it trained
    config = XuanCeConfig.from_dict(data)
    from xuance.environment import make_envs
    from xuance.torch.agents import REGISTRY_Agents

    env_adapter.register()
    learner_shims.register()
    args = xuance_arguments(config, scratch, probe_env(config))
    envs = make_envs(args)
    agent = REGISTRY_Agents[args.agent](args, envs)
    agent.load_model(str(folder / state.model_file))
    return agent, envs, config


def evaluate(request: Any) -> int:
    from xuance_worker.runtime import XuanCeCheckpointState

    if request.opponent:
        raise UserError("--opponent: the xuance worker evaluates its own agents in every seat")
    state = XuanCeCheckpointState.read(request.target, "--evaluate", "the xuance worker")
    folder = resolve(request.target, "--evaluate", "the xuance worker")
    from mosaic.workerkit.threads import limit_torch_threads

    limit_torch_threads(1)
    # XuanCe prints as it loads; stdout is for the results (--json)
    with tempfile.TemporaryDirectory(prefix="mosaic-xuance-eval-") as scratch, \
            contextlib.redirect_stdout(sys.stderr):
        agent, envs, config = load_agent(folder, state, Path(scratch))
        try:
            shared = bool(agent.use_parameter_sharing)
            env = config.environment.make(render_mode="rgb_array" if request.video or request.fastlane else None)
            masked = {a: has_action_mask(env.observation_space(a)) for a in env.possible_agents}
            codec = ObservationCodec({a: observation_part(env.observation_space(a), masked[a])
                                      for a in env.possible_agents})
            actor = JointActor(agent, list(envs.agents), "shared" if shared else "per_agent", codec)
            turns = None
            if config.environment.api_type == "AEC":  # a turn-based game: each mover asks the joint actor
                sizes = {a: int(env.action_space(a).n) for a in env.possible_agents}
                turns = {a: TurnActor(actor, a, sizes, masked) for a in env.possible_agents}
            episodes, videos = play_requested(env, [Seating(actor, turns)], request, folder)
        finally:
            agent.finish()
            envs.close()
    results = EvaluationResults(episodes, {**config.environment.describe(), "algorithm": state.algorithm},
                                str(folder))
    save_results(results, folder, None, videos)
    print_results(results, request.json)
    return 0
