"""The worker keeps sampled episodes as lists (``episodes_to_numpy=False``): RLlib's numbers, less of its time.

RLlib 2.60's multi-agent env runner converts every episode that has finished in the current ``sample()``
to numpy again at every env step (its ``to_numpy`` loop sits inside the step loop), so a sample's cost
grows with the square of the episodes it holds: MOSAIC's main job spent a third of its sampling there
(``bench/rllib_episode_lists.py`` measures it). The setting only changes the container the learner's
connectors read; these runs check that the numbers stay RLlib's own, bit for bit, for each algorithm whose
run is deterministic (IMPALA and APPO learn on a thread of their own, so two runs of theirs differ anyway:
they train with the setting in test_training.py).
"""

from __future__ import annotations

import pytest

from ray_support import OFF_POLICY, TINY, merge

CARTPOLE = {"family": "gymnasium", "env_id": "CartPole-v1"}
WATERWORLD = {"family": "sisl", "env_id": "waterworld_v4", "env_kwargs": {"n_pursuers": 2, "max_cycles": 50}}


def _iterations(config, to_numpy: bool, iterations: int) -> list[tuple]:
    from ray_worker.algorithms import seed_replay_buffer

    algo = config.copy(copy_frozen=False).env_runners(episodes_to_numpy=to_numpy).build_algo()
    seed_replay_buffer(algo, 0)  # as the worker's runs do: both draw the same rows from the replay buffer
    try:
        out = []
        for _ in range(iterations):
            result = algo.train()
            learners = {module: {k: v for k, v in sorted(stats.items()) if isinstance(v, float)}
                        for module, stats in sorted(result.get("learners", {}).items()) if module != "__all_modules__"}
            out.append((result["env_runners"].get("episode_return_mean"),
                        result["env_runners"]["num_env_steps_sampled"], learners))
        return out
    finally:
        algo.stop()


@pytest.mark.parametrize("algorithm,override", [
    ("PPO", {}),
    ("A2C", {"algo_params": {"train_batch_size_per_learner": 200, "fcnet_hiddens": [32]}}),
    ("DQN", {"algo_params": OFF_POLICY}),
    ("SAC", {"environment": WATERWORLD, "algo_params": {**OFF_POLICY, "train_batch_size_per_learner": 64}}),
    ("PPO", {"environment": CARTPOLE}),
    ("DQN", {"environment": CARTPOLE, "algo_params": OFF_POLICY}),
], ids=["ppo", "a2c", "dqn", "sac", "ppo-single-agent", "dqn-single-agent"])
def test_episodes_kept_as_lists_train_to_the_numbers_numpy_episodes_give(ray_session, algorithm, override):
    from ray.tune.registry import register_env

    from ray_worker.algorithms import build_algorithm_config, resolve
    from ray_worker.config import RayWorkerConfig
    from ray_worker.environment import EnvironmentFactory
    from ray_worker.policies import prepare

    cfg = RayWorkerConfig.from_dict({**merge(TINY, {"algorithm": algorithm, "seed": 3, **override}),
                                     "run_id": "episode-lists"})
    _, env_info, layout = prepare(cfg)
    assert resolve(cfg, env_info, layout)["env_runners"]["episodes_to_numpy"] is False  # what --dry-run shows
    name = f"episode-lists-{algorithm}-{cfg.environment.env_id}"
    register_env(name, EnvironmentFactory(cfg.environment))
    config = build_algorithm_config(cfg, env_info, layout, name)
    assert config.episodes_to_numpy is False
    iterations = 4 if algorithm in ("DQN", "SAC") else 2  # past the first 50 steps, where replay starts learning
    as_lists, as_numpy = _iterations(config, False, iterations), _iterations(config, True, iterations)
    assert any(learners for _, _, learners in as_lists), f"{algorithm} never updated: nothing compared"
    assert as_lists == as_numpy, "episodes kept as lists must give the numbers numpy episodes give"
