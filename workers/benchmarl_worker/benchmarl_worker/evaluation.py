"""``mosaic eval`` of a BenchMARL checkpoint: its experiment rebuilt, its policy loaded, greedy play by the kit.

The trained policy (``policy.py``: BenchMARL's group policies, deterministic actions) plays episodes through
:func:`mosaic.workerkit.evaluation.play_episodes`: the same loop, seeds, results (confidence intervals, CSV, GIFs)
and FastLane frames as every worker's evaluation. Each agent group is one actor (its agents batched into one forward
pass, as BenchMARL batches them). The env is the task's own: a pettingzoo run's PettingZoo env built by MOSAIC's env
layer with the arguments BenchMARL built it with (``policy.pettingzoo_environment``); a vmas run's VMAS scenario,
one env behind PettingZoo's parallel API (``vmas_env.py``).
"""

from __future__ import annotations

from typing import Any, Sequence

from mosaic.errors import UserError
from mosaic.workerkit.evaluation import EvaluationResults, play_requested, print_results, save_results


class GroupActor:
    """One BenchMARL agent group's policy: the env hands it the group's agents in ``group_map`` order."""

    def __init__(self, policy: Any, group: str) -> None:
        self.policy, self.module_id = policy, group

    def compute_actions(self, observations: Sequence[Any]) -> list[Any]:
        agents = self.policy.group_map[self.module_id]
        if len(observations) != len(agents):
            raise RuntimeError(f"group {self.module_id!r} acts for its {len(agents)} agents at once; the env gave "
                               f"{len(observations)} of them")
        actions = self.policy.act(self.module_id, dict(enumerate(observations)))
        return [actions[i] for i in range(len(agents))]


class Seating:
    def __init__(self, policy: Any) -> None:
        self.actors = {group: GroupActor(policy, group) for group in policy.group_map}
        self.groups = {agent: group for agent, (group, _) in policy.seat.items()}

    def actor_for(self, agent: str) -> GroupActor:
        return self.actors[self.groups[agent]]


def make_env(config: Any, continuous: bool, render_mode: str | None) -> Any:
    """The task's env for the kit: PettingZoo's (MOSAIC's env layer) or one VMAS env."""
    if config.environment.family == "vmas":
        from benchmarl_worker.vmas_env import VmasParallelEnv

        return VmasParallelEnv(config.environment.env_id, config.task_values(), continuous, render_mode)
    from mosaic.workerkit.envs import make_env as make_pettingzoo
    from benchmarl_worker.policy import pettingzoo_environment
    from benchmarl_worker.runtime import build_task

    env = pettingzoo_environment(config, continuous, build_task(config))
    return make_pettingzoo(env["family"], env["env_id"], "PARALLEL", env["env_kwargs"], render_mode)


def evaluate(request: Any) -> int:
    from benchmarl_worker import policy as trained

    if request.opponent:
        raise UserError("--opponent: the benchmarl worker's --evaluate plays the run's own groups in every seat; "
                        "`mosaic eval RUN --opponent X --seats ...` plays it against X as a match of players")
    folder, state, config, policy = trained.load(request.target, "--evaluate")
    try:
        env = make_env(config, policy.continuous, "rgb_array" if request.video or request.fastlane else None)
        episodes, videos = play_requested(env, [Seating(policy)], request, folder)
    finally:
        policy.experiment.close()
    results = EvaluationResults(episodes, {**config.environment.describe(), "algorithm": state.algorithm,
                                           "groups": policy.group_map}, str(folder))
    save_results(results, folder, None, videos)
    print_results(results, request.json)
    return 0
