"""Every algorithm on every action-space kind: it trains, or validation refuses it as the docs say.

The algorithms come from ``algo_params.algorithms()`` (registered ones included), so a new
algorithm is in the matrix the moment it is registered. Each run that trains also proves
that its checkpoint plays like the training module in a process without Ray.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import ray_worker  # noqa: F401  (registers A2C)
from mosaic.errors import ConfigError
from ray_support import TINY, TrainedRun, merge, train
from ray_worker import algo_params
from ray_worker.modules import MASKED_MODULES
from ray_worker.traits import TRAITS, load_config_class, maskable
from test_policy_actor import assert_actor_parity

DOCS = Path(__file__).resolve().parents[3] / "docs" / "ray-worker.md"
ALGORITHMS = algo_params.algorithms()
SPREAD = {"family": "mpe", "env_id": "simple_spread_v3", "env_kwargs": {"N": 2, "max_cycles": 25}}
#: One env per action-space kind; the masked game runs INDEPENDENT (one module per player).
KINDS = {
    "discrete": {"environment": SPREAD},
    "masked": {"policy_configuration": "INDEPENDENT",
               "environment": {"family": "classic", "env_id": "leduc_holdem_v4", "api_type": "AEC"}},
    "continuous": {"environment": {**SPREAD, "env_kwargs": {**SPREAD["env_kwargs"], "continuous_actions": True}}},
}
#: What validation refuses: (algorithm, kind) -> (the error's message, how docs/ray-worker.md lists it).
REFUSED = {
    ("DQN", "continuous"): ("dqn needs discrete actions", "DQN on continuous actions"),
    ("SAC", "masked"): ("uses action masks, which sac cannot respect yet", "SAC on games with action masks"),
}
#: Tiny settings; each algorithm takes those its schema has.
TINY_PARAMS = {"train_batch_size_per_learner": 100, "minibatch_size": 50, "num_epochs": 1,
               "rollout_fragment_length": 25, "num_steps_sampled_before_learning_starts": 50,
               "min_time_s_per_iteration": 0, "fcnet_hiddens": [32], "circular_buffer_iterations_per_batch": 1}
CASES = [(algo, kind) for algo in ALGORITHMS for kind in KINDS]


def override(algo: str, kind: str) -> dict:
    schema = algo_params.defaults(algo)
    params = {k: v for k, v in TINY_PARAMS.items() if k in schema}
    return merge(KINDS[kind], {"algorithm": algo, "total_timesteps": 200, "algo_params": params})


@pytest.fixture(scope="module")
def runs(ray_session, tmp_path_factory):
    """Trained runs by (algorithm, kind), trained on first use and shared by the module's tests."""
    cache: dict[tuple[str, str], TrainedRun] = {}

    def get(algo: str, kind: str) -> TrainedRun:
        if (algo, kind) not in cache:
            cache[algo, kind] = train(tmp_path_factory.mktemp(f"{algo}-{kind}"), override(algo, kind))
        return cache[algo, kind]
    return get


def _masked_batch(rng, n: int, actions: int) -> dict:
    masks = (rng.random((n, actions)) < 0.3).astype(np.int8)
    masks[0] = 0  # no legal move (not this agent's turn): left unmasked
    masks[1] = 0
    masks[1, -1] = 1  # a single legal move
    obs = rng.random((n, 3, 3, 2)).astype(np.float32)
    return {"observation": torch.as_tensor(obs), "action_mask": torch.as_tensor(masks)}


@pytest.mark.parametrize("algo", sorted(MASKED_MODULES))
def test_masked_modules_mask_every_forward_path(algo):
    """Exploration, inference, the loss's outputs and target networks never favour an illegal move."""
    import gymnasium as gym
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.apis import TARGET_NETWORK_ACTION_DIST_INPUTS, TargetNetworkAPI
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    assert set(maskable()) == set(MASKED_MODULES)
    assert MASKED_MODULES[algo].__name__ == TRAITS[algo].masked_module
    n_actions, rng = 9, np.random.default_rng(0)
    space = gym.spaces.Dict({"observation": gym.spaces.Box(0, 1, (3, 3, 2), np.float32),
                             "action_mask": gym.spaces.Box(0, 1, (n_actions,), np.int8)})
    module = RLModuleSpec(module_class=MASKED_MODULES[algo], observation_space=space,
                          action_space=gym.spaces.Discrete(n_actions),
                          model_config={**load_config_class(algo)().model_config, "fcnet_hiddens": [8]}).build()
    if isinstance(module, TargetNetworkAPI):
        module.make_target_networks()
    obs, next_obs = _masked_batch(rng, 256, n_actions), _masked_batch(rng, 256, n_actions)
    outputs = [(obs, module.forward_exploration({Columns.OBS: obs}, t=0)),
               (obs, module.forward_inference({Columns.OBS: obs}))]
    with torch.no_grad():
        train_out = module.forward_train({Columns.OBS: obs, Columns.NEXT_OBS: next_obs})
        outputs.append((obs, train_out))
        if isinstance(module, TargetNetworkAPI):
            outputs.append((obs, module.forward_target({Columns.OBS: obs})))
    paths = 0
    for batch, out in outputs:
        legal = batch["action_mask"].bool() | ~batch["action_mask"].bool().any(-1, keepdim=True)
        for key in (Columns.ACTION_DIST_INPUTS, TARGET_NETWORK_ACTION_DIST_INPUTS, "qf_preds"):
            if key in out:
                paths += 1
                scores = out[key].detach()
                assert bool((scores[~legal] < -1e30).all()), f"{algo} {key}: an illegal action is not masked"
                assert bool((scores[legal] > -1e30).all()), f"{algo} {key}: a legal action is masked"
        if Columns.ACTIONS in out:  # DQN acts itself: epsilon 1 at t=0, so every move is a random draw
            paths += 1
            actions = out[Columns.ACTIONS].long()
            assert bool(legal.gather(1, actions[:, None]).all()), f"{algo} chose an illegal action"
    if "qf_target_next_preds" in train_out:
        legal_next = next_obs["action_mask"].bool() | ~next_obs["action_mask"].bool().any(-1, keepdim=True)
        assert bool((train_out["qf_target_next_preds"][~legal_next] < -1e30).all())
        assert bool((train_out["qf_next_preds"][~legal_next] < -1e30).all())
    assert paths >= 3


def test_refusals_name_real_algorithms_and_are_documented():
    docs = DOCS.read_text()
    for (algo, kind), (_, listed) in REFUSED.items():
        assert algo in ALGORITHMS and kind in KINDS
        assert listed in docs, f"docs/ray-worker.md does not list the refusal {listed!r}"


@pytest.mark.parametrize("algo,kind", CASES, ids=[f"{a}-{k}" for a, k in CASES])
def test_trains_or_is_refused_naming_the_field(algo, kind, runs):
    from ray_worker.cli import deep_validate
    from ray_worker.config import RayWorkerConfig

    if (algo, kind) in REFUSED:
        config = RayWorkerConfig.from_dict({**merge(TINY, override(algo, kind)), "run_id": "refused"})
        with pytest.raises(ConfigError) as refused:
            deep_validate(config)
        assert refused.value.field == "algorithm"
        assert REFUSED[algo, kind][0] in str(refused.value)
        return
    run = runs(algo, kind)
    metrics = run.of_type("metrics")
    assert metrics and metrics[-1]["timesteps_total"] >= 200, f"{algo} on {kind} did not finish its budget"
    learned = [m["learner"] for m in metrics if m["learner"]]
    assert learned, f"{algo} on {kind} never updated"
    assert set(learned[-1]) == set(run.events[0]["modules"]["modules"])
    if kind == "masked":
        episodes = run.of_type("episode")
        assert episodes, f"{algo} finished no {KINDS[kind]['environment']['env_id']} hand"
        assert sum(e["illegal_actions"] for e in episodes) == 0
        assert all(m["illegal_actions"] == 0 for m in metrics)


def test_every_trained_combination_plays_full_evaluation_episodes(runs):
    """``run_evaluation`` (what ``mosaic eval`` runs) plays every agent with its own trained module."""
    from ray_worker import EvaluationConfig, RayPolicyController, run_evaluation

    for algo, kind in CASES:
        if (algo, kind) in REFUSED:
            continue
        run = runs(algo, kind)
        controller = RayPolicyController.from_checkpoint(run.of_type("checkpoint_saved")[-1]["path"])
        mapping = run.events[0]["modules"]["modules"]
        assert {a: act.module_id for a, act in controller.actors.items()} == {
            agent: module for module, agents in mapping.items() for agent in agents}, f"{algo}-{kind}"
        results = run_evaluation(EvaluationConfig(controller=controller, num_episodes=2, save=False))
        assert [e.length > 0 for e in results.episodes] == [True, True], f"{algo}-{kind}"
        assert set(results.per_agent) == set(controller.actors), f"{algo}-{kind}"
        assert all(set(e.players.values()) <= set(mapping) for e in results.episodes), f"{algo}-{kind}"


def test_every_trained_combination_evaluates_with_parity_without_ray(runs, tmp_path):
    checkpoints = {f"{algo}-{kind}": runs(algo, kind).of_type("checkpoint_saved")[-1]["path"]
                   for algo, kind in CASES if (algo, kind) not in REFUSED}
    assert_actor_parity(checkpoints, tmp_path)


def test_every_algorithm_declares_its_traits_once():
    """ray_worker.traits and the algo_params schemas name the same algorithms; traits are consistent."""
    assert set(TRAITS) == set(ALGORITHMS)
    for name, trait in TRAITS.items():
        assert trait.name == name
        assert trait.action_kinds and set(trait.action_kinds) <= {"discrete", "box"}
        assert (trait.replay_buffer is not None) == (not trait.on_policy), name  # off-policy: a replay buffer
        assert load_config_class(name).__name__ == trait.config_class.split(":")[1]
