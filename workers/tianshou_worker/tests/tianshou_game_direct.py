"""Tianshou's multi-agent algorithm used directly on tic-tac-toe, as its users write it (no MOSAIC).

    python tianshou_game_direct.py '{"seed": ..., ...}' OUT.pt

One seat learns with DQN, the other plays random legal moves
(``MARLRandomDiscreteMaskedOffPolicyAlgorithm``), both in
``MultiAgentOffPolicyAlgorithm`` over ``PettingZooEnv``; a warm-up collected by the
policies within a training step, then ``run_training`` with a test collector and
the learner's return as the score. Saves the learner's ``state_dict`` to OUT.pt and
prints every training episode's (returns, length), sorted, as JSON: a MOSAIC run with
the same settings should end with the same weights and the same episodes.
"""

import json
import sys

import numpy as np
import torch
from pettingzoo.classic import tictactoe_v3
from tianshou.algorithm import DQN, MARLRandomDiscreteMaskedOffPolicyAlgorithm, MultiAgentOffPolicyAlgorithm
from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy
from tianshou.algorithm.optim import AdamOptimizerFactory
from tianshou.data import Collector, VectorReplayBuffer
from tianshou.env import DummyVectorEnv
from tianshou.env.pettingzoo_env import PettingZooEnv
from tianshou.trainer import OffPolicyTrainerParams
from tianshou.utils.net.common import Net
from tianshou.utils.torch_utils import policy_within_training_step

o = json.loads(sys.argv[1])
torch.set_num_threads(1)
np.random.seed(o["seed"])
torch.manual_seed(o["seed"])


def game():
    return PettingZooEnv(tictactoe_v3.env())


probe = game()
seat = probe.agents.index(o["learner_seat"])
net = Net(state_shape=probe.observation_space["observation"].shape, action_shape=probe.action_space.n,
          hidden_sizes=o["hidden_sizes"])
policy = DiscreteQLearningPolicy(model=net, action_space=probe.action_space,
                                 observation_space=probe.observation_space["observation"],
                                 eps_training=o["eps_training"])
learner = DQN(policy=policy, optim=AdamOptimizerFactory(lr=o["learning_rate"]), gamma=o["gamma"],
              n_step_return_horizon=o["n_step"], target_update_freq=o["target_update_freq"])
seats = [MARLRandomDiscreteMaskedOffPolicyAlgorithm(action_space=probe.action_space)] * 2
seats[seat] = learner
algorithm = MultiAgentOffPolicyAlgorithm(algorithms=seats, env=probe)
envs = DummyVectorEnv([game for _ in range(o["num_envs"])])
envs.seed(o["seed"])
test_envs = DummyVectorEnv([game for _ in range(o["test_episodes"])])
test_envs.seed(o["seed"] + o["num_envs"])
buffer = VectorReplayBuffer(o["buffer_size"], o["num_envs"])
collector = Collector(algorithm, envs, buffer, exploration_noise=True)
collector.reset()
with policy_within_training_step(algorithm.policy):
    collector.collect(n_step=o["learning_starts"])
remaining = o["total_timesteps"] - o["learning_starts"]
epochs = -(-remaining // o["test_every"])
algorithm.run_training(OffPolicyTrainerParams(
    training_collector=collector, test_collector=Collector(algorithm, test_envs, exploration_noise=True),
    max_epochs=epochs, epoch_num_steps=-(-remaining // epochs), collection_step_num_env_steps=o["collect_steps"],
    test_step_num_episodes=o["test_episodes"], batch_size=o["batch_size"],
    update_step_num_gradient_steps_per_sample=o["update_per_step"],
    multi_agent_return_reduction=lambda returns: returns[:, seat], verbose=False, show_progress=False))
torch.save(learner.state_dict(), sys.argv[2])
episodes = []
for sub in buffer.buffers:  # each env's transitions in order: an episode ends at a done flag
    total, length = np.zeros(2), 0
    for rew, done in zip(sub.rew[: len(sub)], sub.done[: len(sub)]):
        total, length = total + rew, length + 1
        if done:
            episodes.append([[float(r) for r in total], length])
            total, length = np.zeros(2), 0
print(json.dumps(sorted(episodes)))
