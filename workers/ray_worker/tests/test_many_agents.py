"""Fifty agents: MPE simple_spread with N=50, one module shared by every agent (parameter sharing).

simple_spread steps in O(N^2) (every agent observes and collides with every other): with 50 agents it
managed about 6 env steps/s alone on a loaded 2-core machine, so the run is one iteration of two short
episodes (10 env steps each, 1000 agent steps). The worker's description claims ``max_agents`` 50 on the
strength of this test.
"""

from __future__ import annotations

import pytest

from ray_support import train

N = 50
AGENTS = {f"agent_{i}" for i in range(N)}
SPREAD_50 = {
    "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
                    "env_kwargs": {"N": N, "max_cycles": 10}},
    "total_timesteps": 20,
    "algo_params": {"train_batch_size_per_learner": 20, "minibatch_size": 20, "num_epochs": 1,
                    "fcnet_hiddens": [32, 32]},
    "tensorboard": False,
}


@pytest.fixture(scope="module")
def spread(ray_session, tmp_path_factory):
    return train(tmp_path_factory.mktemp("home"), SPREAD_50)


def test_fifty_agents_train_one_shared_module(spread):
    from ray_worker import get_worker_metadata

    started = spread.events[0]
    assert set(started["agents"]) == AGENTS
    assert started["modules"] == {"modules": {"shared": sorted(AGENTS, key=lambda a: int(a.split("_")[1]))},
                                  "trainable": ["shared"]}
    (metrics,) = spread.of_type("metrics")
    assert metrics["timesteps_total"] >= 20 and {"policy_loss", "vf_loss"} <= set(metrics["learner"]["shared"])
    episodes = spread.of_type("episode")
    assert len(episodes) >= 2 and all(e["length"] == 10 for e in episodes)
    for episode in episodes:  # every agent played every episode, all with the shared module
        assert set(episode["returns"]) == AGENTS and set(episode["modules"].values()) == {"shared"}
    assert set(metrics["agent_episode_returns_mean"]) == AGENTS
    assert spread.of_type("checkpoint_saved")
    assert get_worker_metadata()[1].max_agents >= N


def test_the_fifty_agent_checkpoint_plays_without_ray(spread):
    from ray_worker.policy_actor import RayPolicyController
    from ray_worker.policy_evaluator import EvaluationConfig, run_evaluation

    controller = RayPolicyController.from_checkpoint(spread.summary["final_checkpoint"])
    assert set(controller.actors) == AGENTS and len({id(a) for a in controller.actors.values()}) == 1
    results = run_evaluation(EvaluationConfig(controller=controller, num_episodes=1, save=False))
    (episode,) = results.episodes
    assert set(episode.returns) == AGENTS and episode.length == 10
    assert set(episode.players.values()) == {"shared"}
