"""PettingZoo classic games through Tianshou's own multi-agent pieces, unmodified.

A turn-based PettingZoo game (family ``classic``, e.g. ``tictactoe_v3``) is wrapped in
Tianshou's ``PettingZooEnv``: each step is one move of the agent whose turn it is, its
observation carries the legal-move mask, and its reward is the vector of every agent's
reward. One seat (``learner_seat``) learns with Tianshou's DQN; the other plays uniformly
random legal moves (Tianshou's ``MARLRandomDiscreteMaskedOffPolicyAlgorithm``). Both sit
in Tianshou's ``MultiAgentOffPolicyAlgorithm``, which hands each agent's transitions to
its own algorithm; the DQN policy masks illegal moves itself (``compute_q_value``) and its
exploration picks only legal ones.

What Tianshou needs from a game: the same observation and action space for every agent,
a ``Dict`` observation with ``observation`` (a box) and ``action_mask``, and a discrete
action space. Games without that are refused naming ``env_id``. Nothing here edits
Tianshou or PettingZoo.
"""

from __future__ import annotations

from typing import Any

from mosaic.errors import ConfigError

#: Classic games whose spaces fit Tianshou's PettingZooEnv and an MLP (the describe document's list).
OFFERED = ("tictactoe_v3", "connect_four_v3")
LEARNER = "policy"  # the learner's module id in telemetry and evaluation
OPPONENT = "random"


def make_game(env_id: str, render_mode: str | None = None) -> Any:
    """The PettingZoo AEC game, resolved by MOSAIC's env registry (clear errors for unknown ids)."""
    from mosaic.workerkit.envs import make_env

    return make_env("classic", env_id, "AEC", render_mode=render_mode, field="environment.env_id")


def make_env(env_id: str, render_mode: str | None = None) -> Any:
    """The game wrapped in Tianshou's ``PettingZooEnv`` (what its collectors and multi-agent algorithms take)."""
    from tianshou.env.pettingzoo_env import PettingZooEnv

    return PettingZooEnv(make_game(env_id, render_mode))


def spaces_of(env_id: str) -> tuple[Any, Any, list[str]]:
    """(observation box, action space, agents) of a game, checked for what Tianshou's wrapper assumes."""
    from gymnasium import spaces as gs

    game = make_game(env_id)
    try:
        agents = list(game.possible_agents)
        obs, act = game.observation_space(agents[0]), game.action_space(agents[0])
        same = all(game.observation_space(a) == obs and game.action_space(a) == act for a in agents)
    finally:
        game.close()
    if len(agents) != 2 or not same:
        raise ConfigError("environment.env_id", f"{env_id} has {len(agents)} agents{'' if same else ' with different spaces'}; "
                                    f"this worker trains one seat of a two-player game whose seats share their spaces")
    if not (isinstance(obs, gs.Dict) and "action_mask" in obs.spaces and isinstance(obs.spaces.get("observation"), gs.Box)
            and isinstance(act, gs.Discrete)):
        raise ConfigError("environment.env_id", f"{env_id} observes {obs!r} and acts in {act!r}; Tianshou's PettingZooEnv "
                                    f"masks moves from a Dict observation with 'observation' (a box) and "
                                    f"'action_mask', with discrete actions")
    return obs.spaces["observation"], act, agents


def seat_index(agents: list[str], seat: str | None) -> int:
    if seat is None:
        return 0
    if seat not in agents:
        raise ConfigError("learner_seat", f"{seat!r} is not a seat of this game; seats: {', '.join(agents)}")
    return agents.index(seat)


def build(learner: Any, env_id: str, seat: int) -> Any:
    """Tianshou's multi-agent algorithm: ``learner`` (a DQN) in seat ``seat``, random legal play in the other."""
    from tianshou.algorithm import MARLRandomDiscreteMaskedOffPolicyAlgorithm, MultiAgentOffPolicyAlgorithm

    env = make_env(env_id)
    try:
        opponent = MARLRandomDiscreteMaskedOffPolicyAlgorithm(action_space=env.action_space)
        seats = [opponent, opponent]
        seats[seat] = learner
        return MultiAgentOffPolicyAlgorithm(algorithms=seats, env=env)
    finally:
        env.close()


class SeatActor:
    """The learner's policy as a MOSAIC evaluation actor: the raw PettingZoo observation, masked greedy Q."""

    module_id = LEARNER

    def __init__(self, policy: Any) -> None:
        self.policy = policy

    def compute_action(self, obs: Any) -> int:
        import numpy as np
        import torch
        from tianshou.data import Batch

        batch = Batch(obs=Batch(obs=np.asarray(obs["observation"])[None],
                                mask=np.asarray(obs["action_mask"], dtype=bool)[None]), info={})
        with torch.no_grad():
            return int(self.policy(batch).act[0])

    def compute_actions(self, observations: Any) -> list[int]:
        return [self.compute_action(o) for o in observations]


class Seating:
    """Who plays each seat in ``mosaic eval``: the learner's policy, random legal moves (None) elsewhere."""

    def __init__(self, actor: SeatActor, seat: str) -> None:
        self.actor, self.seat = actor, seat

    def actor_for(self, agent: str) -> SeatActor | None:
        return self.actor if agent == self.seat else None
