"""BenchMARL's MAPPO learns through MOSAIC: it beats random play on VMAS balance within a budget the suite affords."""

from __future__ import annotations

import json

import pytest

from mosaic.testing.learning import check, claim, learning, seed

#: VMAS balance, 4 agents carrying a package to a goal, 50-step episodes (BenchMARL's yaml says 100).
BALANCE = {"family": "vmas", "env_id": "balance", "env_kwargs": {"max_steps": 50}}
#: 20 collections of 3000 frames (30 envs of 100 steps: 2 episodes each), 120 gradient steps of 500 frames each.
SETTINGS = {"total_timesteps": 60_000, "num_envs": 30, "learning_rate": 3e-4, "batch_size": 500,
            "algo_params": {"on_policy_collected_frames_per_batch": 3000, "on_policy_n_minibatch_iters": 20}}

#: Played in the worker's environment: uniform random actions in BenchMARL's own balance task (its TaskConfig,
#: 60 envs, seeded), each env's episode summed over agents up to its first done.
RANDOM_BALANCE = """
import json, torch
from benchmarl_worker.config import BenchMARLConfig
from benchmarl_worker.runtime import build_task, quiet

quiet()
config = BenchMARLConfig.from_dict({"run_id": "random", "environment": %r})
task = build_task(config)
torch.manual_seed(0)
env = task.get_env_fun(num_envs=60, continuous_actions=True, seed=100, device="cpu")()
data = env.rollout(max_steps=task.max_steps(env), break_when_any_done=False)
done = data.get(("next", "done")).squeeze(-1).long()
alive = (done.cumsum(-1) - done) == 0
team = sum(data.get(("next", group, "reward")).squeeze(-1).sum(-1) for group in task.group_map(env))
print(json.dumps(float((team * alive).sum(-1).mean())))
"""


@pytest.mark.slow
@learning(seed=0, beats_random=claim(bar=30, measured={0: 70.09, 1: 65.08, 2: 71.83, 3: 67.59, 4: 56.04},
                                     what="the team's return (summed over agents) of the last iteration's 60 "
                                          "training episodes over random play's (60 episodes)"))
def test_mappo_learns_to_beat_random_play_on_vmas_balance(request, home):
    """MAPPO, BenchMARL's defaults but a higher learning rate and smaller collections: 60,000 frames (at 30,000
    seeds 0-3 beat random play by 12.8 to 45.2, a spread of 15 that leaves no bar above 0). Its
    last iteration's training episodes (the policy sampling its actions, as BenchMARL collects) must beat uniform
    random play's return on the same task (docs/learning-tests.md: the bar is set from measured seeds)."""
    config = home.config("learn", algorithm="mappo", environment=BALANCE, seed=seed(0), **SETTINGS)
    proc = home.cli("run", str(config))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = home.runs()
    last = home.events(run, "metrics")[-1]
    assert last["timesteps_total"] == 60_000 and last["num_episodes"] == 60
    random_play = json.loads(home.probe(RANDOM_BALANCE % (BALANCE,))[-1])
    check(request, "beats_random", last["episode_return_mean"], baseline=random_play)
