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
    action_spaces: tuple[str, ...]  # of "discrete" and "box"
    default_env: str
    summary: str
    #: Keyword arguments the worker passes itself, by name, with why (not settable in algo_params).
    fixed: tuple[tuple[str, Any, str], ...] = ()
    #: Off-policy: Tianshou's prioritized replay buffer instead of the uniform one (Rainbow's).
    prioritized_replay: bool = False
    #: Learns from ``offline_data`` while it also plays online (imitation: GAIL's expert data set).
    expert_data: bool = False
    #: Its entropy coefficient ``alpha`` may be "auto" (Tianshou's AutoAlpha), as well as a number.
    auto_alpha: bool = False

    @property
    def fixed_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :attr:`fixed`, as the builder passes them."""
        return {key: value for key, value, _ in self.fixed}

    @property
    def online(self) -> bool:
        return self.kind != "offline"

    @property
    def uses_data(self) -> bool:
        """Whether the run collects ``offline_data`` before training (offline algorithms and imitation)."""
        return not self.online or self.expert_data


#: How PPO-like policies map their actions to the env's, by action space (the builder picks the pair): discrete
#: actions are neither scaled nor bounded (Tianshou refuses both); a Gaussian's box action is clipped to [-1, 1]
#: and scaled to the env's range, as in Tianshou's own continuous PPO examples.
ACTOR_ACTION_MAPPING = {"discrete": {"action_scaling": False, "action_bound_method": None},
                        "box": {"action_scaling": True, "action_bound_method": "clip"}}
_ACTOR_FIXED = (("action_scaling", ACTOR_ACTION_MAPPING,
                 "it follows the action space: discrete actions are not scaled, box actions are "
                 "scaled to the env's range"),
                ("action_bound_method", ACTOR_ACTION_MAPPING,
                 "it follows the action space: discrete actions are not bounded, box actions are "
                 "clipped to [-1, 1] before scaling"))
#: DDPG's and TD3's exploration: Tianshou's own "default" noise (GaussianNoise(sigma=0.1)); its default (None)
#: would not explore at all.
_DETERMINISTIC_FIXED = (("exploration_noise", "default", "Tianshou's 'default' Gaussian noise (sigma 0.1): "
                                                         "without it a deterministic actor does not explore"),)

#: Tianshou's collector stores a box action as the policy emits it, in [-1, 1] (the env's range mapped there,
#: also for random actions); the offline box algorithms learn actions in that range and map them to the env's.
_IN_DATA_RANGE = ("the data set's actions are in [-1, 1], as Tianshou's collector stores them; the policy maps "
                  "them to the env's range")
_DATA_ACTIONS_SCALED = (("action_scaling", True, _IN_DATA_RANGE),)
#: Tianshou 2.0.1's CQL draws the random actions of its penalty with ``uniform_(-self.min_action, self.max_action)``
#: (imitation/cql.py): min_action 1.0 makes that the data set's [-1, 1]; -1.0 would make every random action 1.0.
#: tests/test_ts_algorithms.py watches the random actions reach the critic.
_CQL_ACTION_RANGE = (("min_action", 1.0, "Tianshou 2.0.1's CQL samples its random actions from "
                                         "uniform(-min_action, max_action): 1.0 makes that the data set's [-1, 1]"),
                     ("max_action", 1.0, _IN_DATA_RANGE))

ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("dqn", "modelfree.dqn.DQN", "modelfree.dqn.DiscreteQLearningPolicy", "off_policy", ("discrete",),
              "CartPole-v1", "deep Q-learning with a target network (double Q by default)"),
    Algorithm("c51", "modelfree.c51.C51", "modelfree.c51.C51Policy", "off_policy", ("discrete",), "CartPole-v1",
              "categorical distributional Q-learning (51 atoms by default)"),
    Algorithm("rainbow", "modelfree.rainbow.RainbowDQN", "modelfree.c51.C51Policy", "off_policy", ("discrete",),
              "CartPole-v1", "C51 with noisy, dueling networks and prioritized replay",
              prioritized_replay=True),
    Algorithm("iqn", "modelfree.iqn.IQN", "modelfree.iqn.IQNPolicy", "off_policy", ("discrete",), "CartPole-v1",
              "implicit quantile networks: distributional Q-learning over sampled quantile fractions"),
    Algorithm("ppo", "modelfree.ppo.PPO", "modelfree.reinforce.ProbabilisticActorPolicy", "on_policy",
              ("discrete", "box"), "CartPole-v1", "proximal policy optimisation with a clipped objective and GAE",
              fixed=_ACTOR_FIXED),
    # A2C and TRPO build box policies the same way, but were not shown to learn Pendulum-v1 at 24-49k env steps
    Algorithm("a2c", "modelfree.a2c.A2C", "modelfree.reinforce.ProbabilisticActorPolicy", "on_policy",
              ("discrete",), "CartPole-v1", "advantage actor-critic with GAE", fixed=_ACTOR_FIXED),
    Algorithm("trpo", "modelfree.trpo.TRPO", "modelfree.reinforce.ProbabilisticActorPolicy", "on_policy",
              ("discrete",), "CartPole-v1",
              "trust region policy optimisation (natural gradient with a KL line search)", fixed=_ACTOR_FIXED),
    Algorithm("sac", "modelfree.sac.SAC", "modelfree.sac.SACPolicy", "off_policy", ("box",), "Pendulum-v1",
              "soft actor-critic with twin critics", auto_alpha=True),
    Algorithm("ddpg", "modelfree.ddpg.DDPG", "modelfree.ddpg.ContinuousDeterministicPolicy", "off_policy", ("box",),
              "Pendulum-v1", "deep deterministic policy gradient", fixed=_DETERMINISTIC_FIXED),
    Algorithm("td3", "modelfree.td3.TD3", "modelfree.ddpg.ContinuousDeterministicPolicy", "off_policy", ("box",),
              "Pendulum-v1", "twin delayed DDPG: twin critics, delayed actor updates, target smoothing",
              fixed=_DETERMINISTIC_FIXED),
    Algorithm("redq", "modelfree.redq.REDQ", "modelfree.redq.REDQPolicy", "off_policy", ("box",), "Pendulum-v1",
              "randomized ensembled double Q-learning: an ensemble of critics, a random subset per target",
              auto_alpha=True),
    Algorithm("discrete_cql", "imitation.discrete_cql.DiscreteCQL", "modelfree.qrdqn.QRDQNPolicy", "offline",
              ("discrete",), "CartPole-v1",
              "conservative Q-learning over quantile Q-values, learned from a fixed data set"),
    Algorithm("discrete_bcq", "imitation.discrete_bcq.DiscreteBCQ", "imitation.discrete_bcq.DiscreteBCQPolicy", "offline",
              ("discrete",), "CartPole-v1", "batch-constrained Q-learning: Q-learning over the actions an imitation "
                                         "network finds likely in the data set"),
    Algorithm("bcq", "imitation.bcq.BCQ", "imitation.bcq.BCQPolicy", "offline", ("box",), "Pendulum-v1",
              "batch-constrained Q-learning: a VAE proposes actions like the data set's, a perturbation network "
              "adjusts them, twin critics pick one", fixed=_DATA_ACTIONS_SCALED),
    Algorithm("cql", "imitation.cql.CQL", "modelfree.sac.SACPolicy", "offline", ("box",), "Pendulum-v1",
              "conservative Q-learning: SAC whose critics are pushed down on actions outside the data set",
              fixed=_CQL_ACTION_RANGE, auto_alpha=True),
    Algorithm("gail", "imitation.gail.GAIL", "modelfree.reinforce.ProbabilisticActorPolicy", "on_policy", ("box",),
              "Pendulum-v1", "generative adversarial imitation learning: PPO on a discriminator's reward, "
                             "imitating an expert data set", expert_data=True),
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
                   "lr_scheduler", "imitator", "disc_net", "disc_optim", "expert_buffer", "actor_perturbation",
                   "actor_perturbation_optim", "vae", "vae_optim"})


@dataclass
class Spaces:
    observation: Any
    action: Any
    agents: list[str] | None = None  # a classic game's seats; None for a Gymnasium env


def _net(spaces: Spaces, hidden: list[int], action_shape: Any = 0, concat: bool = False, **kw: Any) -> Any:
    from tianshou.utils.net.common import Net

    return Net(state_shape=spaces.observation.shape, action_shape=action_shape, hidden_sizes=hidden,
               concat=concat, **kw)


#: ``algo_params.alpha`` of sac, redq and cql: Tianshou's automatic entropy tuning instead of a fixed number.
AUTO_ALPHA = "auto"
AUTO_ALPHA_HELP = ("'auto': Tianshou's AutoAlpha tunes it towards the target entropy -dim(A) (the action's "
                   "dimensions), starting at 1 (log alpha 0), with Adam at the run's learning_rate")


def _entropy(spaces: Spaces, lr: float, algo_kw: dict) -> dict:
    """``algo_kw`` with ``alpha="auto"`` replaced by Tianshou's AutoAlpha (as its SAC examples build it)."""
    if algo_kw.get("alpha") != AUTO_ALPHA:
        return algo_kw
    import numpy as np
    from tianshou.algorithm.modelfree.sac import AutoAlpha

    return {**algo_kw, "alpha": AutoAlpha(target_entropy=-float(np.prod(spaces.action.shape)), log_alpha=0.0,
                                          optim=_adam(lr))}


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

    policy, critic = _actor_critic(spaces, hidden, policy_kw)
    return PPO(policy=policy, critic=critic, optim=_adam(lr), **algo_kw)


def _categorical(probs: Any) -> Any:
    import torch

    return torch.distributions.Categorical(probs=probs)


def _q_critics(spaces: Spaces, hidden: list[int], count: int) -> list[Any]:
    """``count`` critics Q(s, a) over box actions (observation and action concatenated)."""
    from tianshou.utils.net.continuous import ContinuousCritic

    return [ContinuousCritic(preprocess_net=_net(spaces, hidden, action_shape=spaces.action.shape, concat=True))
            for _ in range(count)]


def _sac_policy_and_critics(spaces: Spaces, hidden: list[int], policy_kw: dict) -> tuple[Any, list[Any]]:
    """SAC's tanh-squashed Gaussian policy and twin critics (SAC, CQL)."""
    from tianshou.algorithm.modelfree.sac import SACPolicy
    from tianshou.utils.net.continuous import ContinuousActorProbabilistic

    actor = ContinuousActorProbabilistic(preprocess_net=_net(spaces, hidden), action_shape=spaces.action.shape,
                                         unbounded=True, conditioned_sigma=True)
    critics = _q_critics(spaces, hidden, 2)
    return SACPolicy(actor=actor, action_space=spaces.action, observation_space=spaces.observation,
                     **policy_kw), critics


def build_sac(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import SAC

    policy, critics = _sac_policy_and_critics(spaces, hidden, policy_kw)
    return SAC(policy=policy, policy_optim=_adam(lr), critic=critics[0], critic_optim=_adam(lr),
               critic2=critics[1], critic2_optim=_adam(lr), **algo_kw)


def build_discrete_cql(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import DiscreteCQL
    from tianshou.algorithm.modelfree.qrdqn import QRDQNPolicy

    quantiles = algo_kw.get("num_quantiles", 200)
    model = _net(spaces, hidden, action_shape=spaces.action.n, num_atoms=quantiles)
    policy = QRDQNPolicy(model=model, action_space=spaces.action, observation_space=spaces.observation, **policy_kw)
    return DiscreteCQL(policy=policy, optim=_adam(lr), **algo_kw)


def build_c51(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import C51
    from tianshou.algorithm.modelfree.c51 import C51Policy

    atoms = policy_kw.get("num_atoms", 51)
    model = _net(spaces, hidden, action_shape=spaces.action.n, num_atoms=atoms, softmax=True)
    policy = C51Policy(model=model, action_space=spaces.action, observation_space=spaces.observation, **policy_kw)
    return C51(policy=policy, optim=_adam(lr), **algo_kw)


#: Rainbow's noisy layers: the initial standard deviation Tianshou's own Rainbow examples use.
RAINBOW_NOISY_STD = 0.1
#: Rainbow's prioritized replay (Tianshou's PrioritizedVectorReplayBuffer): alpha and beta of its examples.
PRIORITY_ALPHA, PRIORITY_BETA = 0.6, 0.4


def build_rainbow(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import RainbowDQN
    from tianshou.algorithm.modelfree.c51 import C51Policy
    from tianshou.utils.net.discrete import NoisyLinear

    def noisy(x: int, y: int) -> Any:
        return NoisyLinear(x, y, RAINBOW_NOISY_STD)

    atoms = policy_kw.get("num_atoms", 51)
    dueling = ({"linear_layer": noisy}, {"linear_layer": noisy})  # the Q and V heads, each one noisy layer
    model = _net(spaces, hidden, action_shape=spaces.action.n, num_atoms=atoms, softmax=True, dueling_param=dueling)
    policy = C51Policy(model=model, action_space=spaces.action, observation_space=spaces.observation, **policy_kw)
    return RainbowDQN(policy=policy, optim=_adam(lr), **algo_kw)


def build_iqn(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import IQN
    from tianshou.algorithm.modelfree.iqn import IQNPolicy
    from tianshou.utils.net.discrete import ImplicitQuantileNetwork

    model = ImplicitQuantileNetwork(preprocess_net=_net(spaces, hidden), action_shape=spaces.action.n)
    policy = IQNPolicy(model=model, action_space=spaces.action, observation_space=spaces.observation, **policy_kw)
    return IQN(policy=policy, optim=_adam(lr), **algo_kw)


def _actor_critic(spaces: Spaces, hidden: list[int], policy_kw: dict) -> tuple[Any, Any]:
    """A stochastic policy and a state-value critic (PPO, A2C, TRPO): categorical over discrete actions; over box
    actions a Gaussian whose standard deviation is a learned parameter, as in Tianshou's continuous examples."""
    from tianshou.algorithm.modelfree.reinforce import ProbabilisticActorPolicy
    from tianshou.utils.net import continuous, discrete

    from mosaic.workerkit.spaces import action_kind

    kind = action_kind(spaces.action)
    if kind == "box":
        actor = continuous.ContinuousActorProbabilistic(preprocess_net=_net(spaces, hidden),
                                                        action_shape=spaces.action.shape, unbounded=True)
        critic, dist = continuous.ContinuousCritic(preprocess_net=_net(spaces, hidden)), _normal
    else:
        actor = discrete.DiscreteActor(preprocess_net=_net(spaces, hidden), action_shape=spaces.action.n)
        critic, dist = discrete.DiscreteCritic(preprocess_net=_net(spaces, hidden)), _categorical
    policy = ProbabilisticActorPolicy(actor=actor, dist_fn=dist, action_space=spaces.action,
                                      observation_space=spaces.observation, **ACTOR_ACTION_MAPPING[kind], **policy_kw)
    return policy, critic


def build_a2c(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import A2C

    policy, critic = _actor_critic(spaces, hidden, policy_kw)
    return A2C(policy=policy, critic=critic, optim=_adam(lr), **algo_kw)


def build_trpo(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import TRPO

    policy, critic = _actor_critic(spaces, hidden, policy_kw)
    return TRPO(policy=policy, critic=critic, optim=_adam(lr), **algo_kw)  # optim: the critic's (the actor's step is TRPO's)


def _deterministic_actor_critics(name: str, spaces: Spaces, hidden: list[int], policy_kw: dict,
                                 critics: int) -> tuple[Any, list[Any]]:
    from tianshou.algorithm.modelfree.ddpg import ContinuousDeterministicPolicy
    from tianshou.utils.net.continuous import ContinuousActorDeterministic

    actor = ContinuousActorDeterministic(preprocess_net=_net(spaces, hidden), action_shape=spaces.action.shape)
    policy = ContinuousDeterministicPolicy(actor=actor, action_space=spaces.action,
                                           observation_space=spaces.observation, **ALGORITHMS[name].fixed_kwargs,
                                           **policy_kw)
    return policy, _q_critics(spaces, hidden, critics)


def build_ddpg(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import DDPG

    policy, (critic,) = _deterministic_actor_critics("ddpg", spaces, hidden, policy_kw, 1)
    return DDPG(policy=policy, policy_optim=_adam(lr), critic=critic, critic_optim=_adam(lr), **algo_kw)


def build_td3(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import TD3

    policy, (critic, critic2) = _deterministic_actor_critics("td3", spaces, hidden, policy_kw, 2)
    return TD3(policy=policy, policy_optim=_adam(lr), critic=critic, critic_optim=_adam(lr), critic2=critic2,
               critic2_optim=_adam(lr), **algo_kw)


def build_redq(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import REDQ
    from tianshou.algorithm.modelfree.redq import REDQPolicy
    from tianshou.utils.net.common import EnsembleLinear
    from tianshou.utils.net.continuous import ContinuousActorProbabilistic, ContinuousCritic

    size = algo_kw.get("ensemble_size", 10)  # the critic ensemble's layers hold that many critics

    def ensemble(x: int, y: int) -> Any:
        return EnsembleLinear(size, x, y)

    shape = spaces.action.shape
    actor = ContinuousActorProbabilistic(preprocess_net=_net(spaces, hidden), action_shape=shape,
                                         unbounded=True, conditioned_sigma=True)
    critic = ContinuousCritic(preprocess_net=_net(spaces, hidden, action_shape=shape, concat=True,
                                                  linear_layer=ensemble),
                              linear_layer=ensemble, flatten_input=False)
    policy = REDQPolicy(actor=actor, action_space=spaces.action, observation_space=spaces.observation, **policy_kw)
    return REDQ(policy=policy, policy_optim=_adam(lr), critic=critic, critic_optim=_adam(lr), **algo_kw)


def build_discrete_bcq(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    from tianshou.algorithm import DiscreteBCQ
    from tianshou.algorithm.imitation.discrete_bcq import DiscreteBCQPolicy
    from tianshou.utils.net.discrete import DiscreteActor

    # Q-values and imitation logits: two linear heads on one shared body, as in Tianshou's discrete BCQ examples
    body = _net(spaces, hidden)
    model = DiscreteActor(preprocess_net=body, action_shape=spaces.action.n, softmax_output=False)
    imitator = DiscreteActor(preprocess_net=body, action_shape=spaces.action.n, softmax_output=False)
    # one number, two classes: DiscreteBCQ's target_update_freq (the algorithm's) is also its policy's
    lagged = {"target_update_freq": algo_kw["target_update_freq"]} if "target_update_freq" in algo_kw else {}
    policy = DiscreteBCQPolicy(model=model, imitator=imitator, action_space=spaces.action,
                               observation_space=spaces.observation, **lagged, **policy_kw)
    return DiscreteBCQ(policy=policy, optim=_adam(lr), **algo_kw)


def _flat(space: Any) -> int:
    import numpy as np

    return int(np.prod(space.shape))


#: BCQ's latent size per action dimension, and its perturbation's reach (a share of the action range): the
#: values of Tianshou's own offline BCQ example.
BCQ_LATENT_PER_ACTION, BCQ_PHI = 2, 0.05


def build_bcq(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    """Continuous BCQ: a VAE of the data set's actions, a perturbation network and twin critics, all over
    actions in [-1, 1] (the data set's range; the policy maps them to the env's)."""
    from tianshou.algorithm import BCQ
    from tianshou.algorithm.imitation.bcq import BCQPolicy
    from tianshou.utils.net.common import MLP, Net
    from tianshou.utils.net.continuous import VAE, Perturbation

    obs, act = _flat(spaces.observation), _flat(spaces.action)
    latent = BCQ_LATENT_PER_ACTION * act
    # the perturbation reads (observation, action) and returns a Net's (output, state) pair, as Perturbation expects
    perturbation = Perturbation(preprocess_net=Net(state_shape=obs + act, action_shape=act, hidden_sizes=hidden),
                                max_action=1.0, phi=BCQ_PHI)
    vae = VAE(encoder=MLP(input_dim=obs + act, hidden_sizes=hidden),
              decoder=MLP(input_dim=obs + latent, output_dim=act, hidden_sizes=hidden),
              hidden_dim=hidden[-1], latent_dim=latent, max_action=1.0)
    critics = _q_critics(spaces, hidden, 2)
    policy = BCQPolicy(actor_perturbation=perturbation, critic=critics[0], vae=vae, action_space=spaces.action,
                       observation_space=spaces.observation, **ALGORITHMS["bcq"].fixed_kwargs, **policy_kw)
    return BCQ(policy=policy, actor_perturbation_optim=_adam(lr), critic_optim=_adam(lr), vae_optim=_adam(lr),
               critic2=critics[1], critic2_optim=_adam(lr), **algo_kw)


def build_cql(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict) -> Any:
    """Continuous CQL: SAC's actor and twin critics (as :func:`build_sac`), learned from the data set."""
    from tianshou.algorithm import CQL

    policy, critics = _sac_policy_and_critics(spaces, hidden, policy_kw)
    return CQL(policy=policy, policy_optim=_adam(lr), critic=critics[0], critic_optim=_adam(lr),
               critic2=critics[1], critic2_optim=_adam(lr), **ALGORITHMS["cql"].fixed_kwargs, **algo_kw)


def _normal(loc_scale: Any) -> Any:
    from torch.distributions import Independent, Normal

    loc, scale = loc_scale
    return Independent(Normal(loc, scale), 1)


def build_gail(spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict,
               expert_buffer: Any = None) -> Any:
    """GAIL over box actions (Tianshou's discriminator concatenates observations and actions as vectors)."""
    from tianshou.algorithm import GAIL
    from tianshou.algorithm.modelfree.reinforce import ProbabilisticActorPolicy
    from tianshou.data import ReplayBuffer
    from tianshou.utils.net.continuous import ContinuousActorProbabilistic, ContinuousCritic

    shape = spaces.action.shape
    actor = ContinuousActorProbabilistic(preprocess_net=_net(spaces, hidden), action_shape=shape, unbounded=True)
    critic = ContinuousCritic(preprocess_net=_net(spaces, hidden))
    # the discriminator reads one vector, observation and action concatenated (GAIL.disc does the concatenation)
    disc = ContinuousCritic(preprocess_net=_net(spaces, hidden, action_shape=shape, concat=True))
    policy = ProbabilisticActorPolicy(actor=actor, dist_fn=_normal, action_space=spaces.action,
                                      observation_space=spaces.observation, **policy_kw)
    return GAIL(policy=policy, critic=critic, optim=_adam(lr), disc_net=disc, disc_optim=_adam(lr),
                expert_buffer=expert_buffer if expert_buffer is not None else ReplayBuffer(1), **algo_kw)


BUILDERS: dict[str, Callable[..., Any]] = {
    "dqn": build_dqn, "c51": build_c51, "rainbow": build_rainbow, "iqn": build_iqn, "ppo": build_ppo,
    "a2c": build_a2c, "trpo": build_trpo, "sac": build_sac, "ddpg": build_ddpg, "td3": build_td3,
    "redq": build_redq, "discrete_cql": build_discrete_cql, "discrete_bcq": build_discrete_bcq,
    "bcq": build_bcq, "cql": build_cql, "gail": build_gail}


def build(name: str, spaces: Spaces, hidden: list[int], lr: float, policy_kw: dict, algo_kw: dict,
          **extra: Any) -> Any:
    """Algorithm ``name`` built by its builder (``extra``: what it takes besides, e.g. gail's expert buffer);
    where it takes ``alpha="auto"`` (:attr:`Algorithm.auto_alpha`), that becomes Tianshou's AutoAlpha first."""
    if ALGORITHMS[name].auto_alpha:
        algo_kw = _entropy(spaces, lr, algo_kw)
    return BUILDERS[name](spaces, hidden, lr, policy_kw, algo_kw, **extra)
