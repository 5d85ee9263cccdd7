"""SHARED_VALUE_FUNCTION is real CTDE: one central critic, shared, on the global state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ray_support import TINY, merge, train
from ray_worker.config import RayWorkerConfig
from ray_worker.ctde_ids import CRITIC_ID, LOCAL, STATE

AGENTS = ("agent_0", "agent_1", "agent_2")
CTDE = {"policy_configuration": "SHARED_VALUE_FUNCTION",
        "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
                        "env_kwargs": {"N": 3, "max_cycles": 25}}}


@pytest.fixture(scope="module")
def built(ray_session):
    from ray.tune.registry import register_env

    from ray_worker.algorithms import build_algorithm_config
    from ray_worker.policies import prepare

    config = RayWorkerConfig.from_dict({**merge(TINY, CTDE), "run_id": "ctde"})
    factory, info, layout = prepare(config)
    register_env("ctde-test", factory)
    algo = build_algorithm_config(config, info, layout, "ctde-test").build_algo()
    yield algo, factory
    algo.stop()


def real_batch(factory, steps: int = 8) -> dict[str, dict[str, np.ndarray]]:
    """Observations of every agent over a few random steps of the wrapped env."""
    env, _ = factory.make_pettingzoo()
    obs, _ = env.reset(seed=1)
    rows = {a: [] for a in AGENTS}
    for _ in range(steps):
        for a in AGENTS:
            rows[a].append(obs[a])
        obs, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
    env.close()
    return {a: {LOCAL: np.stack([r[LOCAL] for r in rs]), STATE: np.stack([r[STATE] for r in rs])}
            for a, rs in rows.items()}


def test_one_critic_is_shared_by_every_actor(built):
    algo, _ = built
    learner = algo.learner_group._learner
    critic = learner.module[CRITIC_ID]
    critic_params = {id(p) for p in critic.parameters()}
    for agent in AGENTS:
        actor = learner.module[agent]
        assert actor.__dict__["critic_ref"] is critic
        assert not critic_params & {id(p) for p in actor.parameters()}, "actor holds its own critic copy"
    optimizer_params = [p for opt in learner._named_optimizers.values()
                        for group in opt.param_groups for p in group["params"]]
    assert len(optimizer_params) == len({id(p) for p in optimizer_params})  # each parameter once
    assert critic_params <= {id(p) for p in optimizer_params}


def test_critic_input_is_the_global_state_and_actors_see_local_obs(built):
    algo, factory = built
    module = algo.learner_group._learner.module
    env, _ = factory.make_pettingzoo()
    env.reset(seed=0)
    state_dim = env.unwrapped.state().size
    local_dim = env.observation_space("agent_0")[LOCAL].shape[0]
    env.close()
    assert state_dim == 54 and local_dim == 18  # 3 agents x 18 = MPE's global state
    assert module[CRITIC_ID].net[0].in_features == state_dim
    assert all(module[a].pi[0].in_features == local_dim for a in AGENTS)


def test_every_agents_value_loss_reaches_the_central_critic(built):
    algo, factory = built
    module = algo.learner_group._learner.module
    critic = module[CRITIC_ID]
    batches = real_batch(factory)
    for agent in AGENTS:
        for m in (critic, *(module[a] for a in AGENTS)):
            m.zero_grad(set_to_none=True)
        batch = {"obs": {k: torch.from_numpy(v) for k, v in batches[agent].items()}}
        loss = module[agent].compute_values(batch).pow(2).mean()
        loss.backward()
        grad = sum(float(p.grad.abs().sum()) for p in critic.parameters() if p.grad is not None)
        assert grad > 0, f"{agent}'s value loss does not reach the critic"
        others = [p for a in AGENTS if a != agent for p in module[a].parameters()]
        assert all(p.grad is None for p in others)  # and nowhere else


def test_policy_acts_on_local_observations_only(built):
    algo, factory = built
    actor = algo.learner_group._learner.module["agent_1"]
    local = torch.from_numpy(real_batch(factory)["agent_1"][LOCAL])
    critic, actor.__dict__["critic_ref"] = actor.__dict__["critic_ref"], None  # no critic at execution
    try:
        with torch.no_grad():
            out = actor.forward_inference({"obs": local})
    finally:
        actor.__dict__["critic_ref"] = critic
    assert out["action_dist_inputs"].shape == (local.shape[0], 5)


def test_training_updates_the_shared_critic(built):
    algo, _ = built
    critic = algo.learner_group._learner.module[CRITIC_ID]
    before = [p.detach().clone() for p in critic.parameters()]
    result = algo.train()
    assert set(AGENTS) <= set(result["learners"])
    assert any(not torch.equal(b, p) for b, p in zip(before, critic.parameters()))


def test_mappo_run_through_the_worker(ray_session, tmp_path):
    run = train(tmp_path, CTDE)
    started = run.events[0]
    assert started["policy_configuration"] == "SHARED_VALUE_FUNCTION"
    assert started["modules"]["trainable"] == [*AGENTS, CRITIC_ID]
    last = run.of_type("metrics")[-1]
    assert set(AGENTS) <= set(last["learner"]) and "vf_loss" in last["learner"]["agent_0"]


def test_env_without_state_uses_joint_observations(tmp_path):
    from ray_worker.policies import prepare

    config = RayWorkerConfig.from_dict({**merge(TINY, {
        "policy_configuration": "SHARED_VALUE_FUNCTION",
        "environment": {"family": "sisl", "env_id": "waterworld_v4", "env_kwargs": {"n_pursuers": 2}}}),
        "run_id": "ww"})
    _, info, layout = prepare(config)
    assert info.observation_spaces["pursuer_0"][STATE].shape == (2 * 242,)
    assert set(layout.modules) == {"pursuer_0", "pursuer_1", CRITIC_ID}


@pytest.mark.parametrize("override,message", [
    ({"training": {"algorithm": "DQN", "algo_params": {}}}, "SHARED_VALUE_FUNCTION (MAPPO) trains with PPO only"),
    ({"environment": {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"}},
     "SHARED_VALUE_FUNCTION needs PARALLEL envs"),
])
def test_ctde_refuses_what_it_cannot_do(override, message):
    from mosaic.errors import ConfigError

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RayWorkerConfig.from_dict({**merge(TINY, {**CTDE, **override}), "run_id": "x"})
