"""A XuanCe run's trained agents as a player (``--player``, :mod:`mosaic.workerkit.player`): a team.

A XuanCe run holds a policy for every agent of its env, so its player can act for all of them (the hello's
``agents``); a match seats it at any subset (the good agents of ``simple_adversary_v3``, say) and asks for
one agent at a time. The agent is rebuilt and loaded exactly as ``mosaic eval`` does it
(:func:`xuance_worker.evaluation.load_agent`: the run's config, XuanCe's arguments, XuanCe's
``load_model``), each raw observation is encoded by the run's :class:`xuance_worker.envs.ObservationCodec`
(unchanged vectors and images, anything else flattened by :mod:`mosaic.workerkit.spaces`), and the action
comes from XuanCe's own ``get_actions`` in test mode, so one-hot agent ids under parameter sharing are
appended by XuanCe, as in training.

One agent per call: XuanCe computes every agent's action in one forward pass, so the other agents' rows
are filled with zeros and only the asked agent's action is returned. That is the action the joint pass
gives that agent, because every algorithm served here acts from the agent's own observation alone at
execution (MAPPO's and MADDPG's centralised critics and QMIX's and VDN's mixers are used in training only);
an algorithm not known to do so is refused, naming why. Recurrent policies (``use_rnn``) are refused:
their hidden state runs across steps and agents of one joint batch, which a per-agent player does not keep.

Options: ``deterministic`` (default true: XuanCe's greedy test-mode actions, as ``mosaic eval`` plays;
false samples MAPPO's and IPPO's action distributions, seeded by each ``reset``; the Q-learners and
MADDPG have no distribution to sample in test mode, so false is refused for them).
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from mosaic.errors import UserError

OPTIONS = ("deterministic",)
SAMPLED = ("mappo", "ippo")  # test mode samples their action distributions when not deterministic

#: Algorithms whose actors read only their own agent's observation when acting (test mode): what is
#: centralised in them (critic, mixer) serves training only.
LOCAL_ACTORS = {
    "mappo": "its centralised critic is used in training only",
    "ippo": "independent actors",
    "qmix": "its mixer (and the global state it reads) is used in training only",
    "vdn": "its sum of Q values is used in training only",
    "iql": "independent Q networks",
    "maddpg": "its centralised critics are used in training only",
    "coma": "its centralised critic (the counterfactual baseline) is used in training only",
}


@dataclass
class XuanCePlayer:
    label: str
    environment: dict[str, Any]
    agents: list[str]
    checkpoint: str
    algorithm: str
    deterministic: bool = True
    _agent: Any = None
    _envs: Any = None
    _codec: Any = None
    _masked: dict[str, bool] = field(default_factory=dict)  # agent -> its observation carries its legal moves
    _sizes: dict[str, int] | None = None  # a turn-based game: agent -> its number of actions
    _scratch: str = ""

    @classmethod
    def load(cls, target: str, options: Mapping[str, Any] | None = None) -> "XuanCePlayer":
        from mosaic.workerkit.checkpoints import resolve
        from mosaic.workerkit.player import deterministic_option, player_options
        from xuance_worker.runtime import XuanCeCheckpointState

        deterministic = deterministic_option(player_options(options, OPTIONS, "xuance"))
        state = XuanCeCheckpointState.read(target, "--player", "the xuance worker")
        folder = resolve(target, "--player", "the xuance worker")
        algorithm = str(state.algorithm).lower()
        if algorithm not in LOCAL_ACTORS:
            raise UserError(f"--player: {folder} trained {algorithm!r}, whose actors are not known to act from "
                            "their own agent's observation alone, and a player is given one agent's observation "
                            f"at a time; served: {', '.join(LOCAL_ACTORS)}")
        if not deterministic and algorithm not in SAMPLED:
            raise UserError(f"--player-options: deterministic: false: {algorithm} acts greedily in XuanCe's test "
                            f"mode (no distribution to sample); allowed: true ({' and '.join(SAMPLED)} runs: "
                            "also false)")
        player = cls(label=f"{folder.parent.parent.name}/{folder.name}", checkpoint=str(folder),
                     algorithm=algorithm, deterministic=deterministic,
                     environment={**{k: state.environment.get(k) for k in ("family", "env_id")},
                                  "env_kwargs": dict(state.environment.get("env_kwargs") or {}),
                                  # XuanCe steps every agent at once; a turn-based game is played in turns
                                  "api_type": state.environment.get("api_type") or "PARALLEL"},
                     agents=list(state.agents))
        player._build(folder, state)
        return player

    def _build(self, folder: Path, state: Any) -> None:
        from mosaic.workerkit.threads import limit_torch_threads
        from xuance_worker.envs import ObservationCodec, has_action_mask, observation_part
        from xuance_worker.evaluation import load_agent

        limit_torch_threads(1)
        self._scratch = tempfile.mkdtemp(prefix="mosaic-xuance-player-")
        atexit.register(self.close)
        # stdout carries the protocol: XuanCe's banners go to stderr while it loads
        with contextlib.redirect_stdout(sys.stderr):
            self._agent, self._envs, config = load_agent(folder, state, Path(self._scratch))
        if getattr(self._agent, "use_rnn", False):
            raise UserError(f"--player: {folder} trained a recurrent policy (use_rnn); its hidden state runs "
                            "across the steps of all agents at once, which a per-agent player does not keep yet")
        self.agents = list(self._envs.agents)
        env = config.environment.make()
        try:
            self._masked = {a: has_action_mask(env.observation_space(a)) for a in env.possible_agents}
            self._codec = ObservationCodec({a: observation_part(env.observation_space(a), self._masked[a])
                                            for a in env.possible_agents})
            if config.environment.api_type == "AEC":  # a turn-based game: the masks of training (envs.py)
                self._sizes = {a: int(env.action_space(a).n) for a in env.possible_agents}
        finally:
            env.close()

    def reset(self, seed: int) -> None:
        import numpy as np
        import torch

        torch.manual_seed(seed)  # sampled (deterministic: false) play repeats with the game's seed
        np.random.seed(seed % 2**32)

    def act(self, agent: str, observation: Any) -> Any:
        if agent not in self._masked:
            raise UserError(f"agent {agent!r} is not in the env this run trained on ({', '.join(self.agents)})")
        import torch

        from xuance_worker.envs import check_legal, one_agent_inputs

        joint, masks, legal = one_agent_inputs(self._codec, agent, observation, self._masked[agent], self._sizes)
        with torch.no_grad():
            out = self._agent.get_actions(obs_dict=[joint], avail_actions_dict=masks, test_mode=True,
                                          deterministic=self.deterministic)
        action = out["actions"][0][agent]
        if self._sizes is not None:  # a board game's move: a plain integer, as the env's Discrete space takes it
            action = int(action)
            check_legal(agent, action, legal)
        return action

    def close(self) -> None:
        agent, envs, self._agent, self._envs = self._agent, self._envs, None, None
        with contextlib.suppress(Exception):
            if agent is not None:
                agent.finish()
        with contextlib.suppress(Exception):
            if envs is not None:
                envs.close()
        if self._scratch:
            shutil.rmtree(self._scratch, ignore_errors=True)
