"""SHARED_VALUE_FUNCTION is real CTDE: one central critic, shared, on the global state."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from pettingzoo.utils.env import ParallelEnv

from ray_support import TINY, merge, train
from ray_worker.config import RayWorkerConfig
from ray_worker.ctde_ids import CRITIC_ID, LOCAL, STATE

AGENTS = ("agent_0", "agent_1", "agent_2")
CTDE = {"policy_configuration": "SHARED_VALUE_FUNCTION",
        "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
                        "env_kwargs": {"N": 3, "max_cycles": 25}}}


def build(config: RayWorkerConfig, env_name: str):
    """The RLlib algorithm the worker would build for ``config`` (in this module's Ray session), and its env factory."""
    from ray.tune.registry import register_env

    from ray_worker.algorithms import build_algorithm_config
    from ray_worker.policies import prepare

    factory, info, layout = prepare(config)
    register_env(env_name, factory)
    return build_algorithm_config(config, info, layout, env_name).build_algo(), factory


@pytest.fixture(scope="module")
def built(ray_session):
    algo, factory = build(RayWorkerConfig.from_dict({**merge(TINY, CTDE), "run_id": "ctde"}), "ctde-test")
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


def test_gradients_are_clipped_across_the_one_optimizer(ray_session):
    """grad_clip reaches the one optimizer that spans the actors and the critic (RLlib's per-module clipping
    would skip it): a training step logs the global norm it clipped, and gradients come out within the clip."""
    clip = 0.5
    config = RayWorkerConfig.from_dict({**merge(TINY, CTDE), "run_id": "ctde-clip",
                                        "algo_params": {**TINY.get("algo_params", {}), "grad_clip": clip,
                                                        "grad_clip_by": "global_norm"}})
    algo, _ = build(config, "ctde-clip")
    try:
        result = algo.train()
        logged = result["learners"]["__all_modules__"]["gradients_ctde_global_norm"]
        assert logged > 0
        learner = algo.learner_group._learner
        grads = {ref: torch.full_like(param, 10.0) for ref, param in learner._params.items()}
        out = learner.postprocess_gradients(grads)
        assert set(out) == set(learner._params)
        total = torch.sqrt(sum((g ** 2).sum() for g in out.values()))
        assert total.item() == pytest.approx(clip, rel=1e-4)
    finally:
        algo.stop()


def test_mappo_run_through_the_worker(ray_session, tmp_path):
    run = train(tmp_path, CTDE)
    started = run.events[0]
    assert started["policy_configuration"] == "SHARED_VALUE_FUNCTION"
    assert started["modules"]["trainable"] == [*AGENTS, CRITIC_ID]
    last = run.of_type("metrics")[-1]
    assert set(AGENTS) <= set(last["learner"]) and "vf_loss" in last["learner"]["agent_0"]


def test_env_without_state_uses_joint_observations(ray_session, tmp_path):
    from ray_worker.policies import prepare

    override = {"policy_configuration": "SHARED_VALUE_FUNCTION",
                "environment": {"family": "sisl", "env_id": "waterworld_v4",
                                "env_kwargs": {"n_pursuers": 2, "max_cycles": 50}}}
    config = RayWorkerConfig.from_dict({**merge(TINY, override), "run_id": "ww"})
    _, info, layout = prepare(config)
    assert info.observation_spaces["pursuer_0"][STATE].shape == (2 * 242,)
    assert set(layout.modules) == {"pursuer_0", "pursuer_1", CRITIC_ID}
    run = train(tmp_path, override)
    last = run.of_type("metrics")[-1]
    assert {"pursuer_0", "pursuer_1"} <= set(last["learner"]) and "vf_loss" in last["learner"]["pursuer_0"]


def test_mappo_trains_multiwalker_with_continuous_actions(ray_session, tmp_path):
    from ray_worker.policies import prepare

    override = {"policy_configuration": "SHARED_VALUE_FUNCTION",
                "environment": {"family": "sisl", "env_id": "multiwalker_v9",
                                "env_kwargs": {"n_walkers": 2, "max_cycles": 25}}}
    _, info, _ = prepare(RayWorkerConfig.from_dict({**merge(TINY, override), "run_id": "mw"}))
    assert info.to_dict()["observation_spaces"]["walker_0"] == {
        LOCAL: "Box((31,), float32)", STATE: "Box((51,), float32)"}  # multiwalker's own state() vector
    run = train(tmp_path, override)
    assert run.events[0]["modules"]["trainable"] == ["walker_0", "walker_1", CRITIC_ID]
    last = run.of_type("metrics")[-1]
    assert {"walker_0", "walker_1"} <= set(last["learner"]) and "vf_loss" in last["learner"]["walker_0"]


# -- images: pistonball's frames for the actors, its whole board for the critic -------------
PISTONS = ("piston_0", "piston_1", "piston_2")
PISTONBALL = {"policy_configuration": "SHARED_VALUE_FUNCTION",
              "environment": {"family": "butterfly", "env_id": "pistonball_v6", "api_type": "PARALLEL",
                              "env_kwargs": {"n_pistons": 3, "max_cycles": 20},
                              "preprocessing": {"resize": [24, 24], "grayscale": True, "frame_stack": 2}},
              "total_timesteps": 160, "algo_params": {
                  "train_batch_size_per_learner": 80, "minibatch_size": 80, "num_epochs": 1,
                  "fcnet_hiddens": [32]}}
#: pistonball's state() with 3 pistons is a 560x200 RGB board: 24 rows keep its aspect in
#: 9 columns; grayscale x 2 stacked frames = 2 channels. Each piston sees 24x24x2.
BOARD, FRAME = (24, 9, 2), (24, 24, 2)


@pytest.fixture(scope="module")
def pistonball(ray_session, tmp_path_factory):
    """A MAPPO run on pistonball through the worker, and its CTDE module restored from the checkpoint."""
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModule

    from ray_worker.policy_actor import MODULES_DIR

    run = train(tmp_path_factory.mktemp("pistonball"), PISTONBALL)
    checkpoint = run.of_type("checkpoint_saved")[-1]["path"]
    module = MultiRLModule.from_checkpoint(str(Path(checkpoint) / MODULES_DIR))
    return run, checkpoint, module


def pistonball_batch(steps: int = 6) -> dict[str, dict[str, np.ndarray]]:
    from ray_worker.policies import prepare

    factory, _, _ = prepare(RayWorkerConfig.from_dict({**merge(TINY, PISTONBALL), "run_id": "pb"}))
    env, _ = factory.make_pettingzoo()
    obs, _ = env.reset(seed=1)
    rows = {a: [] for a in PISTONS}
    while len(rows["piston_0"]) < steps:
        if not env.agents:  # the ball reached the wall: a new episode
            obs, _ = env.reset(seed=len(rows["piston_0"]))
        for a in PISTONS:
            rows[a].append(obs[a])
        obs, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
    env.close()
    return {a: {LOCAL: np.stack([r[LOCAL] for r in rs]), STATE: np.stack([r[STATE] for r in rs])}
            for a, rs in rows.items()}


def test_pistonball_mappo_trains_through_the_worker(pistonball):
    run, _, _ = pistonball
    started = run.events[0]
    assert started["policy_configuration"] == "SHARED_VALUE_FUNCTION"
    assert started["modules"]["trainable"] == [*PISTONS, CRITIC_ID]
    metrics = run.of_type("metrics")
    assert metrics and metrics[-1]["iteration"] >= 1
    assert set(PISTONS) <= set(metrics[-1]["learner"]) and "vf_loss" in metrics[-1]["learner"]["piston_0"]


def test_pistonball_state_space_is_what_the_env_produces(pistonball):
    from ray_worker.policies import prepare

    _, _, module = pistonball
    _, info, _ = prepare(RayWorkerConfig.from_dict({**merge(TINY, PISTONBALL), "run_id": "pb"}))
    space = info.observation_spaces["piston_0"]
    assert space[LOCAL].shape == FRAME and space[STATE].shape == BOARD and space[STATE].dtype == np.float32
    assert module["piston_0"].observation_space == space == module[CRITIC_ID].observation_space  # checkpoint agrees
    batch = pistonball_batch()["piston_0"]
    assert all(space[STATE].contains(s) for s in batch[STATE]) and batch[STATE].dtype == np.float32


def test_pistonball_has_one_cnn_critic_on_the_shrunk_board(pistonball):
    _, _, module = pistonball
    critic = module[CRITIC_ID]
    assert set(module.keys()) == {*PISTONS, CRITIC_ID}  # exactly one critic
    assert critic.net[0].input_shape == BOARD  # a CNN on the global board, not on any piston's frame
    critic_params = {id(p) for p in critic.parameters()}
    for agent in PISTONS:
        actor = module[agent]
        assert actor.__dict__["critic_ref"] is critic
        assert actor.pi[0].input_shape == FRAME  # a CNN on the local frame
        assert not critic_params & {id(p) for p in actor.parameters()}
    batches = pistonball_batch()
    assert batches["piston_0"][STATE].shape[1:] == BOARD
    for agent in PISTONS:  # every piston's value is the critic's value of the board
        critic.zero_grad(set_to_none=True)
        batch = {"obs": {k: torch.from_numpy(v) for k, v in batches[agent].items()}}
        values = module[agent].compute_values(batch)
        assert values.shape == (len(batches[agent][STATE]),)
        values.pow(2).mean().backward()
        assert sum(float(p.grad.abs().sum()) for p in critic.parameters() if p.grad is not None) > 0


def test_pistonball_actors_act_on_local_frames_only(pistonball):
    _, _, module = pistonball
    actor = module["piston_1"]
    local = torch.from_numpy(pistonball_batch()["piston_1"][LOCAL])
    critic, actor.__dict__["critic_ref"] = actor.__dict__["critic_ref"], None  # no critic at execution
    try:
        with torch.no_grad():
            out = actor.forward_inference({"obs": local})  # no "state" key at all
    finally:
        actor.__dict__["critic_ref"] = critic
    assert out["action_dist_inputs"].shape == (local.shape[0], 2)  # mean and log-std of one piston


def test_pistonball_checkpoint_plays_without_the_learner(pistonball):
    from ray_worker import EvaluationConfig, RayPolicyController, run_evaluation

    _, checkpoint, _ = pistonball
    controller = RayPolicyController.from_checkpoint(checkpoint)
    assert {a: act.module_id for a, act in controller.actors.items()} == {a: a for a in PISTONS}
    assert controller.actors["piston_0"].module.pi[0].input_shape == FRAME
    results = run_evaluation(EvaluationConfig(controller=controller, num_episodes=1, save=False))
    assert set(results.per_agent) == set(PISTONS) and results.episodes[0].length > 0


def test_image_envs_without_state_stack_observations_on_channels():
    from ray_worker.global_state import GlobalStateObservations
    from ray_worker.preprocessing import ImagePreprocess

    class NoState(ParallelEnv):
        """Two agents seeing 10x8 RGB frames; no state(); agent b leaves after one step."""

        metadata: dict = {}
        possible_agents = ["a", "b"]

        def observation_space(self, agent: str) -> gym.Space:
            return gym.spaces.Box(0, 255, (10, 8, 3), np.uint8)

        def action_space(self, agent: str) -> gym.Space:
            return gym.spaces.Discrete(2)

        def _obs(self) -> dict:
            return {a: np.full((10, 8, 3), 255, np.uint8) for a in self.agents}

        def reset(self, seed=None, options=None):
            self.agents = list(self.possible_agents)
            return self._obs(), {a: {} for a in self.agents}

        def step(self, actions):
            self.agents = ["a"]
            return self._obs(), {"a": 0.0}, {"a": False}, {"a": False}, {"a": {}}

    env = GlobalStateObservations(ImagePreprocess(NoState(), (6, 4), grayscale=True, frame_stack=2))
    space = env.observation_space("a")[STATE]
    assert env.kind == "joined_images" and space.shape == (6, 4, 4) and space.dtype == np.float32
    obs, _ = env.reset(seed=0)
    assert space.contains(obs["a"][STATE]) and np.all(obs["a"][STATE] == 1.0)
    obs, *_ = env.step({"a": 0, "b": 0})
    assert space.contains(obs["a"][STATE])
    assert np.all(obs["a"][STATE][..., :2] == 1.0) and np.all(obs["a"][STATE][..., 2:] == 0.0)  # b absent


@pytest.mark.parametrize("override,message", [
    ({"algorithm": "DQN", "algo_params": {}}, "SHARED_VALUE_FUNCTION (MAPPO) trains with ppo only"),
    ({"environment": {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"}},
     "SHARED_VALUE_FUNCTION needs PARALLEL envs"),
])
def test_ctde_refuses_what_it_cannot_do(override, message):
    from mosaic.errors import ConfigError

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RayWorkerConfig.from_dict({**merge(TINY, {**CTDE, **override}), "run_id": "x"})


def test_global_state_can_carry_every_agents_previous_action():
    from ray_worker.environment import EnvironmentFactory

    config = RayWorkerConfig.from_dict({**merge(TINY, CTDE), "run_id": "acts"})
    env, _ = EnvironmentFactory(config.environment, global_state=True, critic_actions=True).make_pettingzoo()
    obs, _ = env.reset(seed=0)
    base = env.unwrapped.state().size
    assert env.observation_space("agent_0")[STATE].shape == (base + 3 * 5,)  # 3 agents, 5 discrete actions
    assert not obs["agent_0"][STATE][base:].any()  # nothing done yet
    obs, *_ = env.step({"agent_0": 1, "agent_1": 4, "agent_2": 0})
    tail = obs["agent_2"][STATE][base:].reshape(3, 5)
    assert tail.argmax(axis=1).tolist() == [1, 4, 0] and tail.sum() == 3.0
    assert np.array_equal(obs["agent_0"][STATE], obs["agent_1"][STATE])  # one global state for all
    env.close()


def test_mappo_with_actions_in_the_critic_trains_and_evaluates(ray_session, tmp_path):
    from ray_worker.policy_actor import RayPolicyController
    from ray_worker.policy_evaluator import EvaluationConfig, run_evaluation

    run = train(tmp_path, {**CTDE, "ctde": {"critic_actions": True}})
    assert "vf_loss" in run.of_type("metrics")[-1]["learner"]["agent_0"]
    checkpoint = run.of_type("checkpoint_saved")[-1]["path"]
    from ray.rllib.core.rl_module.rl_module import RLModule

    critic = RLModule.from_checkpoint(f"{checkpoint}/learner_group/learner/rl_module/{CRITIC_ID}")
    assert critic.net[0].in_features == 54 + 3 * 5
    results = run_evaluation(EvaluationConfig(controller=RayPolicyController.from_checkpoint(checkpoint),
                                              num_episodes=2, save=False))
    assert len(results.episodes) == 2


def test_critic_actions_need_a_vector_state():
    from mosaic.errors import ConfigError
    from ray_worker.policies import prepare

    config = RayWorkerConfig.from_dict({
        **merge(TINY, {"policy_configuration": "SHARED_VALUE_FUNCTION", "ctde": {"critic_actions": True},
                       "environment": {"family": "butterfly", "env_id": "pistonball_v6",
                                       "env_kwargs": {"n_pistons": 3, "max_cycles": 20}}}), "run_id": "x"})
    with pytest.raises(ConfigError, match="critic_actions"):
        prepare(config)


#: XuanCe's networks as RLlib can build them: a LayerNorm in every hidden layer, orthogonal weights, zero biases.
XUANCE_LIKE = {"fcnet_use_layernorm": True, "fcnet_kernel_initializer": "orthogonal_",
               "fcnet_bias_initializer": "zeros_"}


@pytest.mark.parametrize("configuration", ["INDEPENDENT", "SHARED_VALUE_FUNCTION"])
def test_layernorm_and_initialisers_reach_every_hidden_layer(ray_session, configuration):
    """RLlib's default PPO module (INDEPENDENT) and MOSAIC's MAPPO modules (the actors and the central critic) build
    the same hidden layers from the model keys: linear (orthogonal weights, zero biases), LayerNorm, activation."""
    params = {**TINY["algo_params"], **XUANCE_LIKE}
    config = RayWorkerConfig.from_dict({**merge(TINY, {**CTDE, "policy_configuration": configuration}),
                                        "algo_params": params, "run_id": f"init-{configuration.lower()}"})
    algo, _ = build(config, f"init-{configuration}")
    try:
        modules = dict(algo.learner_group._learner.module.items())
        width = TINY["algo_params"]["fcnet_hiddens"][0]
        for module_id, module in modules.items():
            hidden = 0
            for seq in (m for m in module.modules() if isinstance(m, torch.nn.Sequential)):
                layers = list(seq)
                for i, layer in enumerate(layers):
                    if not (isinstance(layer, torch.nn.Linear) and layer.out_features == width):
                        continue
                    hidden += 1
                    w = layer.weight.detach()
                    gram = w.T @ w if w.shape[0] >= w.shape[1] else w @ w.T
                    assert torch.allclose(gram, torch.eye(gram.shape[0]), atol=1e-4), f"{module_id}: not orthogonal"
                    assert torch.all(layer.bias == 0), f"{module_id}: a hidden bias is not zero"
                    assert isinstance(layers[i + 1], torch.nn.LayerNorm), f"{module_id}: no LayerNorm after {layer}"
            # two hidden layers in each network: the actor's and the critic's (INDEPENDENT), or the one network
            # of a MAPPO actor or of the central critic
            assert hidden == (4 if configuration == "INDEPENDENT" else 2), (module_id, hidden)
        assert len(modules) == (3 if configuration == "INDEPENDENT" else 4), sorted(modules)
    finally:
        algo.stop()
