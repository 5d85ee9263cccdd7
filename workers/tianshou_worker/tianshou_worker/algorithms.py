"""The Tianshou algorithms this worker runs: their traits, and how each is built.

A trait is what a researcher asks before choosing: on-policy, off-policy or
offline, which action spaces it acts in. The builders do what a Tianshou user's
script does with the algorithm API: networks from ``tianshou.utils.net``, the
policy class, the algorithm class with its optimiser factories. Everything a
user may tune beyond MOSAIC's own fields is a keyword argument of Tianshou's
policy or algorithm class, read from their signatures (``config.py``), not
copied. Tianshou is imported only inside the builders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from mosaic.errors import ConfigError, one_of


@dataclass(frozen=True)
class Algorithm:
    name: str  # MOSAIC's name, lower case
    tianshou_class: str  # dotted path from tianshou.algorithm: module.Class
    policy_class: str  # the same, of its policy class
    kind: str  # "on_policy", "off_policy" or "offline"
    action_space: str  # "discrete" or "box"
    default_env: str
    summary: str
    #: Keyword arguments the worker passes itself, by name, with why (not settable in algo_params).
    fixed: tuple[tuple[str, Any, str], ...] = ()

    @property
    def online(self) -> bool:
        return self.kind != "offline"


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("dqn", "modelfree.dqn.DQN", "modelfree.dqn.DiscreteQLearningPolicy", "off_policy", "discrete", "CartPole-v1",
              "deep Q-learning with a target network (double Q by default)"),
    Algorithm("ppo", "modelfree.ppo.PPO", "modelfree.reinforce.ProbabilisticActorPolicy", "on_policy", "discrete", "CartPole-v1",
              "proximal policy optimisation with a clipped objective and GAE",
              fixed=(("action_scaling", False, "discrete actions are not scaled"),
                     ("action_bound_method", None, "discrete actions are not bounded"))),
    Algorithm("sac", "modelfree.sac.SAC", "modelfree.sac.SACPolicy", "off_policy", "box", "Pendulum-v1",
              "soft actor-critic with twin critics"),
    Algorithm("discrete_cql", "imitation.discrete_cql.DiscreteCQL", "modelfree.qrdqn.QRDQNPolicy", "offline", "discrete", "CartPole-v1",
              "conservative Q-learning over quantile Q-values, learned from a fixed data set"),
)}


def get(name: str, field: str = "algorithm") -> Algorithm:
    algo = ALGORITHMS.get(str(name).lower())
    if algo is None:
        raise ConfigError(field, one_of(name, list(ALGORITHMS)))
    return algo


def class_name(path: str) -> str:
    return path.rpartition(".")[2]


#: Arguments the builders pass themselves (networks, spaces, optimisers): not settable in algo_params.
BUILT = frozenset({"model", "actor", "critic", "critic2", "policy", "optim", "policy_optim", "critic_optim",
                   "critic2_optim", "action_space", "observation_space", "dist_fn", "exploration_noise",
                   "lr_scheduler"})


@dataclass
class Spaces:
    observation: Any
    action: Any
    agents: list[str] | None = None  # a classic game's seats; None for a Gymnasium env


def _net(spaces: Spaces, hidden: list[int], action_shape: Any = 0, concat: bool = False, **kw: Any) -> Any:
    from tianshou.utils.net.common import Net

    return Net(state_shape=spaces.observation.shape, action_shape=action_shape, hidden_sizes=hidden,
               concat=concat, **kw)


def _adam(lr: float) -> Any:
    from tianshou.algorithm.optim import AdamOptimizerFactory

    return AdamOptimizerFactory(lr=lr)


def build_dqn(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import DQN
    from tianshou.algorithm.modelfree.dqn import DiscreteQLearningPolicy

    model = _net(spaces, hidden, action_shape=spaces.action.n)
    policy = DiscreteQLearningPolicy(model=model, action_space=spaces.action,
                                     observation_space=spaces.observation, **policy_kw)
    return DQN(policy=policy, optim=_adam(lr), **algo_kw)


def build_ppo(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import PPO
    from tianshou.algorithm.modelfree.reinforce import ProbabilisticActorPolicy
    from tianshou.utils.net.discrete import DiscreteActor, DiscreteCritic

    actor = DiscreteActor(preprocess_net=_net(spaces, hidden), action_shape=spaces.action.n)
    critic = DiscreteCritic(preprocess_net=_net(spaces, hidden))
    fixed = {name: value for name, value, _ in ALGORITHMS["ppo"].fixed}
    policy = ProbabilisticActorPolicy(actor=actor, dist_fn=_categorical, action_space=spaces.action,
                                      observation_space=spaces.observation, **fixed, **policy_kw)
    return PPO(policy=policy, critic=critic, optim=_adam(lr), **algo_kw)


def _categorical(probs: Any) -> Any:
    import torch

    return torch.distributions.Categorical(probs=probs)


def build_sac(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import SAC
    from tianshou.algorithm.modelfree.sac import SACPolicy
    from tianshou.utils.net.continuous import ContinuousActorProbabilistic, ContinuousCritic

    shape = spaces.action.shape
    actor = ContinuousActorProbabilistic(preprocess_net=_net(spaces, hidden), action_shape=shape,
                                         unbounded=True, conditioned_sigma=True)
    critics = [ContinuousCritic(preprocess_net=_net(spaces, hidden, action_shape=shape, concat=True))
               for _ in range(2)]
    policy = SACPolicy(actor=actor, action_space=spaces.action, observation_space=spaces.observation, **policy_kw)
    return SAC(policy=policy, policy_optim=_adam(lr), critic=critics[0], critic_optim=_adam(lr),
               critic2=critics[1], critic2_optim=_adam(lr), **algo_kw)


def build_discrete_cql(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import DiscreteCQL
    from tianshou.algorithm.modelfree.qrdqn import QRDQNPolicy

    quantiles = algo_kw.get("num_quantiles", 200)
    model = _net(spaces, hidden, action_shape=spaces.action.n, num_atoms=quantiles)
    policy = QRDQNPolicy(model=model, action_space=spaces.action, observation_space=spaces.observation, **policy_kw)
    return DiscreteCQL(policy=policy, optim=_adam(lr), **algo_kw)


BUILDERS: dict[str, Callable[..., Any]] = {"dqn": build_dqn, "ppo": build_ppo, "sac": build_sac,
                                           "discrete_cql": build_discrete_cql}
