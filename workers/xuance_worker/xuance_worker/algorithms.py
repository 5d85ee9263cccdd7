"""The XuanCe algorithms this worker runs, each with its traits in one place.

A trait is what a researcher asks before choosing: does it learn on-policy, which
action spaces can it act in, does a centralised critic or a mixing network see
more than one agent's view. The worker uses the same table to pick XuanCe's
policy class for the env's action space and to refuse what cannot work, naming
the reason. Nothing here imports XuanCe.
"""

from __future__ import annotations

from dataclasses import dataclass

from mosaic.errors import ConfigError, one_of


@dataclass(frozen=True)
class Algorithm:
    name: str  # MOSAIC's name, lower case (the folder of XuanCe's yaml files)
    agent: str  # XuanCe's agent registry key
    on_policy: bool
    #: XuanCe policy class by action space kind ("discrete", "box"); a missing kind is not supported.
    policies: dict[str, str]
    centralised: str  # "" (independent learners), "critic" or "mixer"
    summary: str
    #: Why the worker refuses it, when it does.
    refused: str = ""

    @property
    def action_spaces(self) -> tuple[str, ...]:
        return tuple(self.policies)


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (
    Algorithm("mappo", "MAPPO", True, {"discrete": "Categorical_MAAC_Policy", "box": "Gaussian_MAAC_Policy"},
              "critic", "PPO per agent with a centralised value function (all agents' observations)"),
    Algorithm("ippo", "IPPO", True, {"discrete": "Categorical_MAAC_Policy", "box": "Gaussian_MAAC_Policy"},
              "", "PPO per agent, each critic sees its own observation"),
    Algorithm("qmix", "QMIX", False, {"discrete": "Mixing_Q_network"},
              "mixer", "per-agent Q networks mixed monotonically, conditioned on the global state"),
    Algorithm("vdn", "VDN", False, {"discrete": "Mixing_Q_network"},
              "mixer", "per-agent Q networks whose sum is the team's Q"),
    Algorithm("iql", "IQL", False, {"discrete": "Basic_Q_network_marl"},
              "", "independent DQN per agent"),
    Algorithm("maddpg", "MADDPG", False, {"box": "MADDPG_Policy"},
              "critic", "DDPG per agent with centralised critics (all observations and actions)"),
    Algorithm("coma", "COMA", True, {"discrete": "Categorical_COMA_Policy"}, "critic",
              "counterfactual baselines from a centralised critic (learner_shims.py)"),
)}


def get(name: str, field: str = "algorithm") -> Algorithm:
    algo = ALGORITHMS.get(str(name).lower())
    if algo is None:
        raise ConfigError(field, one_of(name, list(ALGORITHMS)))
    if algo.refused:
        raise ConfigError(field, f"{algo.name} is not supported: {algo.refused}")
    return algo


def usable() -> list[str]:
    """The algorithms a config may name."""
    return [a.name for a in ALGORITHMS.values() if not a.refused]
