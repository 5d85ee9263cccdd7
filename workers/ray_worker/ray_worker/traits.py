"""What each RLlib algorithm is, declared once.

Every place that treats algorithms differently (which action spaces they take,
whether they train on action-masked games and with which module, the replay
buffer RLlib needs for multi-agent episodes, how long an iteration lasts,
whether they can train MAPPO's central critic) reads it from here. Adding an
algorithm is one entry below plus its ``algo_params`` schema. Importing this
module is cheap (no Ray): class paths are strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

ACTION_KINDS = ("discrete", "box")


@dataclass(frozen=True)
class AlgorithmTraits:
    name: str
    #: ``module:Class`` of its RLlib ``AlgorithmConfig``
    config_class: str
    #: learns from the data of its current policy only (PPO, A2C, IMPALA, APPO) rather than a replay buffer
    on_policy: bool
    #: action space kinds it trains on ("discrete", "box")
    action_kinds: tuple[str, ...] = ACTION_KINDS
    #: the class in ``ray_worker.modules`` that respects action masks; None: refused on masked games
    masked_module: str | None = None
    #: RLlib replay buffer settings that understand multi-agent episodes (off-policy algorithms)
    replay_buffer: Mapping[str, Any] | None = None
    #: an asynchronous learner thread (IMPALA, APPO): iterations last ``min_time_s_per_iteration`` (1 s)
    learner_thread: bool = False
    #: trains SHARED_VALUE_FUNCTION's central critic (MAPPO)
    central_critic: bool = False
    #: the shortest ``rollout_fragment_length`` it trains with, and its value for 'auto'
    min_rollout_fragment: int | None = None
    auto_rollout_fragment: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def masked(self) -> bool:
        return self.masked_module is not None


TRAITS: dict[str, AlgorithmTraits] = {t.name: t for t in (
    AlgorithmTraits("PPO", "ray.rllib.algorithms.ppo:PPOConfig", on_policy=True,
                    masked_module="MaskedPPOTorchRLModule", central_critic=True),
    AlgorithmTraits("DQN", "ray.rllib.algorithms.dqn:DQNConfig", on_policy=False, action_kinds=("discrete",),
                    masked_module="MaskedDQNTorchRLModule",
                    replay_buffer={"type": "MultiAgentEpisodeReplayBuffer"}),
    AlgorithmTraits("IMPALA", "ray.rllib.algorithms.impala:IMPALAConfig", on_policy=True,
                    masked_module="MaskedPPOTorchRLModule", learner_thread=True),
    AlgorithmTraits("APPO", "ray.rllib.algorithms.appo:APPOConfig", on_policy=True,
                    masked_module="MaskedAPPOTorchRLModule", learner_thread=True),
    AlgorithmTraits("SAC", "ray.rllib.algorithms.sac:SACConfig", on_policy=False,
                    replay_buffer={"type": "MultiAgentPrioritizedEpisodeReplayBuffer", "alpha": 0.6, "beta": 0.4},
                    min_rollout_fragment=20, auto_rollout_fragment=25,
                    notes=("RLlib 2.60's SAC takes Discrete and Box actions; no masked module",)),
    AlgorithmTraits("A2C", "ray_worker.a2c:A2CConfig", on_policy=True, masked_module="MaskedPPOTorchRLModule"),
)}

_KIND_WORDS = {"discrete": "discrete", "box": "continuous (Box)"}


def traits(algorithm: str) -> AlgorithmTraits:
    from mosaic.errors import ConfigError, one_of

    found = TRAITS.get(algorithm) or TRAITS.get(str(algorithm).upper())
    if found is None:
        raise ConfigError("algorithm", one_of(algorithm, tuple(a.lower() for a in TRAITS)))
    return found


def maskable() -> tuple[str, ...]:
    """Algorithms that train on games with action masks."""
    return tuple(name for name, t in TRAITS.items() if t.masked)


def central_critic() -> tuple[str, ...]:
    """Algorithms that train MAPPO's central critic."""
    return tuple(name for name, t in TRAITS.items() if t.central_critic)


def kind_words(kinds: tuple[str, ...] | set[str]) -> str:
    return " or ".join(_KIND_WORDS.get(k, k) for k in kinds)


def load_config_class(algorithm: str) -> Any:
    import importlib

    module, name = traits(algorithm).config_class.split(":")
    return getattr(importlib.import_module(module), name)
