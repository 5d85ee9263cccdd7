"""CleanRL's MuJoCo scripts learn: ppo_continuous_action and ddpg on InvertedPendulum-v4 beyond random play.

Each unmodified script trains once through ``mosaic run`` (seed 1) at a budget where it learned by hand
(docs/cleanrl-worker.md, "Learning, tested on MuJoCo"), and its checkpoint is played by ``mosaic eval`` (10 episodes,
seeds 100-109). The played mean return must beat a uniform random policy's, measured here in the worker's
environment, by ``MARGIN``. InvertedPendulum-v4 pays +1 for each step the pole stays up (random play: about 7).
"""

from __future__ import annotations

import json

import pytest

from crl_support import Home, events
from mosaic.testing.learning import check, claim, learning, seed

ENV_ID = "InvertedPendulum-v4"
#: Budgets (env steps) at which each learned, also with seed 2 (the doc's table).
RUNS = {
    # four rollouts of the script's 2,048 steps: 69.6 and 111.0 played (seeds 1 and 2)
    "ppo_continuous_action": {"total_timesteps": 8192},
    # 2,000 gradient steps after 1,000 random ones: 68.3 and 70.0 played (seeds 1 and 2)
    "ddpg": {"total_timesteps": 3000, "algo_params": {"learning_starts": 1000}},
}
MARGIN = 25.0
EPISODES = 10
WHAT = "the played mean return (10 episodes) over random play's (30 episodes)"
#: The margins over random play measured per seed at RUNS's budgets (docs/learning-tests.md).
MEASURED = {
    "ppo_continuous_action": {0: 67.73, 1: 62.63, 2: 104.03, 3: 72.73},
    "ddpg": {0: 45.43, 1: 61.33, 2: 63.03, 3: 53.03},
}



@pytest.fixture(scope="module")
def lhome(cleanrl_env, tmp_path_factory) -> Home:
    return Home.create(tmp_path_factory.mktemp("crl-mujoco-learns") / "home", "cleanrl", cleanrl_env)


@pytest.fixture(scope="module")
def random_return(lhome) -> float:
    """A uniform random policy's mean return over 30 episodes (seeds 100-129), in the worker's environment."""
    return lhome.random_returns(ENV_ID)[ENV_ID]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", [
    pytest.param(name, marks=learning(seed=1, beats_random=claim(bar=MARGIN, measured=MEASURED[name], what=WHAT)))
    for name in sorted(RUNS)])
def test_mujoco_script_learns_beyond_random_play_and_its_checkpoint_evaluates(request, lhome, random_return,
                                                                              algorithm):
    config = {"algorithm": algorithm, "environment": {"family": "mujoco", "env_id": ENV_ID}, "seed": seed(1),
              "resources": {"threads": 1}, **RUNS[algorithm]}
    proc = lhome.cli("run", str(lhome.config(algorithm, **config)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = lhome.runs()[-1]
    (started,) = events(run, "run_started")
    assert started["algorithm"] == algorithm and started["env"]["env_id"] == ENV_ID
    assert started["env"]["family"] == "mujoco"
    total = RUNS[algorithm]["total_timesteps"]
    assert events(run, "run_completed")[0]["summary"]["timesteps_total"] == total
    (saved,) = events(run, "checkpoint_saved")

    played = lhome.cli("eval", run.name, "--episodes", str(EPISODES), "--seed", "100", "--json")
    assert played.returncode == 0, played.stderr[-3000:]
    result = json.loads(played.stdout[played.stdout.index("{"):])
    assert result["checkpoint"] == saved["path"] and result["env"]["env_id"] == ENV_ID
    returns = [e["returns"]["agent_0"] for e in result["episodes"]]
    assert len(returns) == EPISODES
    mean = sum(returns) / len(returns)
    check(request, "beats_random", mean, baseline=random_return)
