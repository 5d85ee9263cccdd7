"""A Tianshou run's trained seat as a player (``--player``, :mod:`mosaic.workerkit.player`).

A classic-game run (``environment.family: classic``) trained DQN in one seat through Tianshou's
``PettingZooEnv``, which hands the policy the observation of the agent whose turn it is, as PettingZoo's
classic games build it: from that agent's own perspective (tic-tac-toe's and connect four's first plane is
the mover's pieces, the second the opponent's), with ``action_mask`` as the legal moves. A match sends the
same raw observation for whichever seat the player is given, so the trained policy acts for ANY agent of its
game with no other preprocessing: the observation's ``observation`` is the network's input and
``action_mask == 1`` the legal moves, which is what ``PettingZooEnv`` gives the policy in training.

The checkpoint is loaded with the worker's own evaluation code (``runtime.load_checkpoint``, the algorithm
rebuilt from the run's config, the learner's weights loaded, ``eval()``) and acts through the same
``classic.SeatActor`` that ``mosaic eval`` plays: Tianshou's greedy masked Q-values (``compute_q_value``
pushes every illegal move below every legal one). Options:

* ``deterministic`` (default true): greedy, epsilon 0, as ``mosaic eval`` plays;
* ``epsilon`` (0 to 1; given alone it means ``deterministic: false``): with that probability a uniformly
  random legal move instead, drawn by Tianshou's own ``add_exploration_noise`` at ``eps_inference``, which
  draws from numpy's global generator; ``deterministic: false`` without ``epsilon`` plays the run's final
  training epsilon (``eps_schedule.end``, else ``algo_params.eps_training``). ``reset(seed)`` seeds numpy and
  torch, so a match repeats.

Single-agent Gymnasium runs are refused: a match seats players in a PettingZoo env, and such a policy was
trained on one agent's Gymnasium observations with no other seat.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from mosaic.errors import ConfigError, UserError

FIELD = "--player"
OPTIONS = ("deterministic", "epsilon")


def check_options(options: Mapping[str, Any] | None) -> tuple[bool, float | None]:
    """(deterministic, epsilon) from the player options; unknown or ill-typed ones refused naming the allowed."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        raise ConfigError("--player-options", f"unknown option {', '.join(map(repr, unknown))}; allowed: "
                                              f"{', '.join(OPTIONS)}")
    deterministic = options.get("deterministic")
    if deterministic is not None and not isinstance(deterministic, bool):
        raise ConfigError("--player-options", f"deterministic: expected true or false, got {deterministic!r}; "
                                              "allowed: true (greedy), false (epsilon-greedy over legal moves)")
    epsilon = options.get("epsilon")
    if epsilon is not None:
        if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)) or not 0.0 <= epsilon <= 1.0:
            raise ConfigError("--player-options", f"epsilon: expected a number from 0 to 1, got {epsilon!r}")
        if deterministic is True and epsilon > 0:
            raise ConfigError("--player-options", f"epsilon: {epsilon} makes random moves, which deterministic: "
                                                  "true rules out; allowed: epsilon 0, or deterministic: false")
        return epsilon == 0 if deterministic is None else deterministic, float(epsilon)
    return (True if deterministic is None else deterministic), None


@dataclass
class TianshouPlayer:
    label: str
    environment: dict[str, Any]
    agents: list[str]
    actor: Any  # tianshou_worker.classic.SeatActor: mosaic eval's actor of the learner's policy
    observation_shape: tuple[int, ...]
    epsilon: float = 0.0

    @classmethod
    def load(cls, target: str, options: Mapping[str, Any] | None = None) -> "TianshouPlayer":
        from mosaic.workerkit.checkpoints import resolve
        from mosaic.workerkit.threads import limit_torch_threads

        from tianshou_worker.runtime import TianshouCheckpointState, learner_of, load_checkpoint, quiet

        deterministic, epsilon = check_options(options)
        folder = resolve(target, FIELD, "the tianshou worker")
        state = TianshouCheckpointState.read(folder, FIELD, "the tianshou worker")
        environment = dict(state.config.get("environment") or {})
        family = environment.get("family") or "gymnasium"
        if family != "classic":
            raise ConfigError(FIELD, f"{folder} was trained on a single-agent Gymnasium env ({state.env_id}, "
                                     f"{state.algorithm}): a match seats players in a PettingZoo env, and this "
                                     "policy has no seat there; only classic-game runs (environment.family: "
                                     "classic) are served as players")
        quiet()
        limit_torch_threads(1)
        folder, state, config, algo = load_checkpoint(folder, FIELD)
        algo.eval()  # Tianshou's evaluation mode, as mosaic eval plays
        policy = learner_of(config, algo).policy
        if not deterministic:
            if epsilon is None:
                epsilon = config.eps_schedule.end if config.eps_schedule is not None else float(policy.eps_training)
            policy.set_eps_inference(epsilon)
        from tianshou_worker import classic

        box, _action, agents = classic.spaces_of(config.resolved_env_id)
        return cls(label=f"{folder.parent.parent.name}/{folder.name}",
                   environment={"family": "classic", "env_id": config.resolved_env_id,
                                "env_kwargs": dict(config.environment.env_kwargs)},
                   agents=agents, actor=classic.SeatActor(policy), observation_shape=tuple(box.shape),
                   epsilon=0.0 if deterministic else float(epsilon or 0.0))

    def reset(self, seed: int) -> None:
        import numpy as np
        import torch

        # Tianshou's exploration noise draws from numpy's global generator: seeded by the game, a match repeats.
        np.random.seed(seed % 2**32)
        torch.manual_seed(seed)

    def act(self, agent: str, observation: Any) -> int:
        import numpy as np

        if agent not in self.agents:
            raise UserError(f"agent {agent!r} is not in {self.environment['env_id']} ({', '.join(self.agents)})")
        if not isinstance(observation, Mapping) or not {"observation", "action_mask"} <= set(observation):
            raise UserError("expected the raw classic-game observation {observation, action_mask}, got "
                            f"{type(observation).__name__}")
        shape = np.shape(observation["observation"])
        if tuple(shape) != self.observation_shape:
            raise UserError(f"observation of shape {tuple(shape)}; {self.environment['env_id']} observes "
                            f"{self.observation_shape}")
        action = self.actor.compute_action(observation)
        if self.epsilon > 0:
            from tianshou.data import Batch

            # Tianshou's own epsilon-greedy over legal moves, as its collector adds it outside training steps
            batch = Batch(obs=Batch(obs=np.asarray(observation["observation"])[None],
                                    mask=(np.asarray(observation["action_mask"]) == 1)[None]), info={})
            action = int(self.actor.policy.add_exploration_noise(np.array([action]), batch)[0])
        return action
