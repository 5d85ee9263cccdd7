"""A BenchMARL run's trained groups as a player (``--player``, :mod:`mosaic.workerkit.player`): a team.

A BenchMARL run holds a policy for every agent group of its task (simple_tag's ``adversary`` and ``agent``), so its
player can act for all their agents (the hello's ``agents``); a match seats it at any subset (the adversaries of
``simple_tag_v3``, say) and asks for one agent at a time. The policy is loaded exactly as ``mosaic eval`` loads it
(``policy.load``: the run's config, BenchMARL's Experiment, the checkpoint's networks), the raw observation is
encoded by the agent's slot of TorchRL's observation spec, as TorchRL's PettingZoo wrapper encodes it in training,
and the action is the agent's row of its group's policy.

The hello's ``environment`` is the PettingZoo env the run trained on, in MOSAIC's words (``mpe/simple_tag_v3`` with
the TaskConfig's fields and the action kind as ``env_kwargs``), so that a match builds that same env. VMAS runs are
refused: a match builds its env in MOSAIC's process from PettingZoo's families, and VMAS is not one.

Options: ``deterministic`` (default true: greedy actions, as ``mosaic eval`` plays; false: TorchRL's
``ExplorationType.RANDOM``, what BenchMARL collects with, sampled distributions and exploration noise, seeded by each
``reset``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mosaic.errors import UserError

OPTIONS = ("deterministic",)


def _pettingzoo_only(folder: Path, state: Any) -> None:
    """A match builds its env in MOSAIC's process from PettingZoo's families: a VMAS run cannot be seated."""
    family = (state.environment or {}).get("family")
    if family != "pettingzoo":
        raise UserError(f"--player: {folder} trained on {family}/{state.environment.get('env_id')}: a match "
                        "builds its env in MOSAIC's process from PettingZoo's families, and VMAS is not one; "
                        "allowed: a run of a pettingzoo task (`mosaic eval RUN` plays a vmas run)")


@dataclass
class BenchMARLPlayer:
    label: str
    environment: dict[str, Any]
    agents: list[str]
    policy: Any = field(default=None, repr=False)

    @classmethod
    def load(cls, target: str, options: Mapping[str, Any] | None = None) -> "BenchMARLPlayer":
        from mosaic.workerkit.player import deterministic_option, player_options

        from benchmarl_worker import policy as trained
        from benchmarl_worker.runtime import build_task

        deterministic = deterministic_option(player_options(options, OPTIONS, "benchmarl"))
        folder, state, config, policy = trained.load(target, "--player", deterministic, check=_pettingzoo_only)
        environment = trained.pettingzoo_environment(config, policy.continuous, build_task(config))
        return cls(label=f"{folder.parent.parent.name}/{folder.name}", environment=environment,
                   agents=policy.agents, policy=policy)

    def reset(self, seed: int) -> None:
        import numpy as np
        import torch

        torch.manual_seed(seed)  # sampled (deterministic: false) play repeats with the game's seed
        np.random.seed(seed % 2**32)

    def act(self, agent: str, observation: Any) -> Any:
        if agent not in self.policy.seat:
            raise UserError(f"agent {agent!r} is not in the env this run trained on ({', '.join(self.agents)})")
        group, index = self.policy.seat[agent]
        return self.policy.act(group, {index: observation})[index]
