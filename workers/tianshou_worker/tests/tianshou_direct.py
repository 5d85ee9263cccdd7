"""Tianshou used directly, as its users write it, for the transparency test and the bench.

    python tianshou_direct.py '{"env_id": ..., "seed": ..., ...}' [--timing]

A DQN run with Tianshou's algorithm API: ``gymnasium.make`` behind
``DummyVectorEnv`` seeded with ``envs.seed``, ``Net`` + ``DiscreteQLearningPolicy``
+ ``DQN``, a ``Collector`` over a ``VectorReplayBuffer``, a random warm-up
``collect``, then ``run_training(OffPolicyTrainerParams(...))``. MOSAIC is not
imported. Prints every finished episode's return as one JSON list on the last
line, read back from the replay buffer's rewards and done flags (one env, a
buffer larger than the run): nothing observes the run while it trains.
``--timing`` also prints, on the line before, the env steps and the seconds the
warm-up and training took.

Optional settings, as Tianshou's own DQN examples write them: ``eps_schedule``
(``set_eps_training`` in a ``training_fn``, linear between two env steps),
``test_every`` with ``test_episodes`` (a test collector on its own envs, the
budget in epochs of at most ``test_every`` steps) and ``stop_at_return``
(``stop_fn``).
"""

import json
import sys
import time

import gymnasium as gym
import numpy as np
import torch
from tianshou.algorithm import DQN
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, VectorReplayBuffer
from tianshou.env import DummyVectorEnv
from tianshou.trainer import OffPolicyTrainerParams
from tianshou.utils.net.common import Net

o = json.loads(sys.argv[1])
torch.set_num_threads(1)
np.random.seed(o["seed"])
torch.manual_seed(o["seed"])
envs = DummyVectorEnv([lambda: gym.make(o["env_id"]) for _ in range(o["num_envs"])])
envs.seed(o["seed"])
space = envs.get_env_attr("action_space")[0]
obs_space = envs.get_env_attr("observation_space")[0]
model = Net(state_shape=obs_space.shape, action_shape=space.n, hidden_sizes=o["hidden_sizes"])
policy = DiscreteQLearningPolicy(model=model, action_space=space, observation_space=obs_space,
                                 eps_training=o.get("eps_training", 0.0))
algorithm = DQN(policy=policy, optim=AdamOptimizerFactory(lr=o["learning_rate"]))
buffer = VectorReplayBuffer(o["buffer_size"], o["num_envs"])
collector = Collector(algorithm, envs, buffer, exploration_noise=True)
collector.reset()
started = time.perf_counter()
collector.collect(n_step=o["learning_starts"], random=True)


def training_fn(epoch, env_step):
    s = o.get("eps_schedule")
    if s:
        step = env_step + o["learning_starts"]
        frac = min(max((step - s["begin_at"]) / (s["end_at"] - s["begin_at"]), 0.0), 1.0)
        policy.set_eps_training(s["start"] + (s["end"] - s["start"]) * frac)


remaining = o["total_timesteps"] - o["learning_starts"]
epochs, test_collector, stop_fn = 1, None, None
if o.get("test_every"):
    epochs = -(-remaining // o["test_every"])
    test_envs = DummyVectorEnv([lambda: gym.make(o["env_id"]) for _ in range(o["test_episodes"])])
    test_envs.seed(o["seed"] + o["num_envs"])
    test_collector = Collector(algorithm, test_envs, exploration_noise=True)
    if o.get("stop_at_return") is not None:
        stop_fn = lambda score: score >= o["stop_at_return"]  # noqa: E731
algorithm.run_training(OffPolicyTrainerParams(
    training_collector=collector, max_epochs=epochs, epoch_num_steps=-(-remaining // epochs),
    collection_step_num_env_steps=o["collect_steps"], batch_size=o["batch_size"],
    update_step_num_gradient_steps_per_sample=o["update_per_step"], test_collector=test_collector,
    test_step_num_episodes=o.get("test_episodes", 1), stop_fn=stop_fn, training_fn=training_fn, verbose=False,
    show_progress=False))
train_seconds = time.perf_counter() - started
envs.close()
if "--timing" in sys.argv:  # for bench/tianshou_throughput.py
    print(json.dumps({"timesteps": len(buffer), "train_seconds": train_seconds}))
episodes, total = [], 0.0
if o["num_envs"] == 1:
    data = buffer.buffers[0] if hasattr(buffer, "buffers") else buffer
    for rew, done in zip(data.rew[: len(data)], data.done[: len(data)]):
        total += float(rew)
        if done:
            episodes.append(total)
            total = 0.0
print(json.dumps(episodes))
