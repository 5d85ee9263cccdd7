"""PettingZoo envs from MOSAIC's env layer, in the shape XuanCe's runners expect.

XuanCe's own MPE class builds ``pettingzoo.mpe.<id>`` with nothing but
``continuous_actions``: no ``N``, no ``max_cycles``, no other family. This
adapter builds any parallel env :func:`mosaic.workerkit.envs.make_env` offers, with the
config's ``env_kwargs``, and is registered in XuanCe's env registry under
:data:`ENV_NAME` when a run starts (a registry entry, not an edit of XuanCe).

What XuanCe's multi-agent loop assumes, and the adapter guarantees or refuses:
every agent acts at every step (envs whose agents leave mid-episode are refused
at validation), one observation and action space per agent, a global state
(the env's own ``state()`` when it has one, else the agents' observations
concatenated), and a step bound (``max_cycles``) after which the episode is
truncated. Env 0 also streams its frames to FastLane when the run asks for it.

Turn-based games (PettingZoo's classic board games, AEC only) are played by
:class:`MosaicTurnBasedEnv`'s rules (see :func:`make_turn_env_class`): XuanCe steps every agent at
once, the agent whose turn it is moves, and action masks (XuanCe's ``use_actions_mask``) give it the
game's legal moves and every waiting agent one action, a pass that is not played.

Observations reach XuanCe as the env gives them when they are flat vectors (its
MLP representations) or HxWxC uint8 images (its ``Basic_CNN``); anything else
(knights_archers_zombies' entity table, pursuit's 7x7x3 float grid, a Discrete
move) is flattened by :mod:`mosaic.workerkit.spaces`, here and in ``mosaic eval`` alike
(:class:`ObservationCodec`).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import numpy as np

from mosaic.workerkit.spaces import action_kind

ENV_NAME = "mosaic_pettingzoo"  # the key in XuanCe's REGISTRY_MULTI_AGENT_ENV
TURNS_ENV_NAME = "mosaic_pettingzoo_turns"  # the turn adapter's key there
DEFAULT_MAX_STEPS = 500  # for envs that state no bound of their own

#: Envs whose agents can leave mid-episode, and the env_kwargs (all default True) that keep them in.
AGENTS_LEAVE: dict[str, tuple[str, ...]] = {
    "knights_archers_zombies_v10": ("killable_knights", "killable_archers"),
}

VECTOR, IMAGE, FLATTENED = "vector", "image", "flattened"  # how an agent's observation reaches XuanCe


def observation_kind(space: Any) -> str:
    """``vector`` (a 1-D Box: XuanCe's MLPs), ``image`` (HxWxC uint8: its CNN) or ``flattened`` (by mosaic.workerkit.spaces).

    Raises ``ValueError`` naming the space when mosaic.workerkit.spaces has no encoding for it.
    """
    from mosaic.workerkit.spaces import encoded_space, is_image_space, needs_encoding

    if not needs_encoding(space):
        return VECTOR
    if is_image_space(space):
        return IMAGE
    encoded_space(space)  # raises for a space without a standard encoding
    return FLATTENED


class ObservationCodec:
    """Each agent's observation as XuanCe is given it: unchanged, or flattened by :mod:`mosaic.workerkit.spaces`."""

    def __init__(self, spaces: dict[str, Any]) -> None:
        from mosaic.workerkit.spaces import encode, encoded_space

        self.raw = dict(spaces)
        self.kinds = {a: observation_kind(s) for a, s in spaces.items()}
        self.spaces = {a: encoded_space(s) if self.kinds[a] == FLATTENED else s for a, s in spaces.items()}
        #: The agents whose observations are flattened; when none are, observations pass through untouched
        #: (this runs at every env step: the common case costs one truth test, as in XuanCe's own MPE class).
        self.flattened = frozenset(a for a, kind in self.kinds.items() if kind == FLATTENED)
        self._encode = encode

    def encodings(self) -> dict[str, str]:
        """Agent → how its observations are flattened (``flatten(27x5)``, ``one-hot(4)``), for flattened agents."""
        from mosaic.workerkit.spaces import encoding_name

        return {a: encoding_name(s) for a, s in self.raw.items() if self.kinds[a] == FLATTENED}

    def observation(self, agent: str, value: Any) -> Any:
        return self._encode(self.raw[agent], value) if agent in self.flattened else value

    def __call__(self, observations: dict[str, Any]) -> dict[str, Any]:
        if not self.flattened:
            return observations
        return {a: self.observation(a, o) for a, o in observations.items()}


def state_space_of(env: Any, codec: ObservationCodec) -> Any:
    """The env's own state space (flattened unless a vector or an image), else the observations', concatenated."""
    from gymnasium import spaces

    state_space = getattr(env, "state_space", None)
    if state_space is not None:
        return ObservationCodec({"state": state_space}).spaces["state"]
    size = sum(int(np.prod(codec.spaces[a].shape)) for a in codec.spaces)
    return spaces.Box(-np.inf, np.inf, (size,), np.float32)


def turn_based(family: str, env_id: str) -> bool:
    """A game PettingZoo offers as an AEC env only (the agents take turns): played by the turn adapter."""
    from mosaic.workerkit.envs import load_env_module, supported_api_types

    return "PARALLEL" not in supported_api_types(load_env_module(family, env_id))


def has_action_mask(space: Any) -> bool:
    """An observation of PettingZoo's classic games: a Dict of the board (``observation``) and the legal moves."""
    parts = getattr(space, "spaces", None)
    return isinstance(parts, dict) and "observation" in parts and "action_mask" in parts


def observation_part(space_or_value: Any, masked: bool) -> Any:
    """What an agent observes, without the action mask (which reaches XuanCe as ``avail_actions``)."""
    return space_or_value["observation"] if masked else space_or_value


@functools.lru_cache(maxsize=8)
def _spaces(family: str, env_id: str, api_type: str, kwargs: str) -> dict[str, Any]:
    from mosaic.workerkit.envs import make_env

    env = make_env(family, env_id, api_type, json.loads(kwargs))
    try:
        agents = list(env.possible_agents)
        observed = {a: env.observation_space(a) for a in agents}
        return {"agents": agents,
                "observation_spaces": {a: observation_part(s, has_action_mask(s)) for a, s in observed.items()},
                "action_spaces": {a: env.action_space(a) for a in agents},
                "state_space": getattr(env, "state_space", None)}
    finally:
        env.close()


def env_spaces(environment: Any) -> dict[str, Any]:
    """The env's agents, observation and action spaces and state space (built once per process and config)."""
    return _spaces(environment.family, environment.env_id, environment.api_type,
                   json.dumps(environment.env_kwargs, sort_keys=True, default=str))


def observes_images(environment: Any) -> bool:
    """Whether any agent of the env observes an image (XuanCe's CNN settings apply)."""
    from mosaic.workerkit.spaces import is_image_space

    return any(is_image_space(s) for s in env_spaces(environment)["observation_spaces"].values())


def max_cycles_of(env: Any) -> int | None:
    """The env's step bound: ``max_cycles`` on its raw env (MPE, Butterfly), or on the game object the raw env
    holds as ``env`` (SISL's pursuit, waterworld and multiwalker keep it there); None when it states none."""
    raw = env.unwrapped
    for holder in (raw, getattr(raw, "env", None)):
        value = getattr(holder, "max_cycles", None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def seed_action_spaces(env: Any, agents: list[str], env_seed: int) -> None:
    """Seed each agent's action space (``env_seed`` × 1000 + its index).

    XuanCe's epsilon-greedy and random warm-up draw from ``action_space.sample()``,
    and PettingZoo seeds its envs, not their spaces: without this a XuanCe run is
    not repeatable even with a fixed seed (run directly, it is not).
    """
    for index, agent in enumerate(agents):
        env.action_space(agent).seed(env_seed * 1000 + index)


def make_raw_env_class() -> type:
    """The adapter class; built on first use, as it subclasses XuanCe's base."""
    from xuance.environment import RawMultiAgentEnv

    from mosaic.workerkit.envs import make_env

    class MosaicPettingZooEnv(RawMultiAgentEnv):
        API = "PARALLEL"

        def __init__(self, config: Any) -> None:
            super().__init__()
            spec = config.mosaic_env
            # Env 0 (seeded with the run's own seed) streams its frames when FastLane is on.
            lane = getattr(config, "mosaic_fastlane", None) if config.env_seed == config.seed else None
            self.env = make_env(spec["family"], spec["env_id"], self.API, spec["env_kwargs"],
                                "rgb_array" if lane else None)
            self.lane = publisher(lane) if lane else None
            self.env_id = spec["env_id"]
            self._episode, self._returns = 0, {}
            self.env.reset(seed=config.env_seed)
            self.agents = list(self.env.possible_agents)
            seed_action_spaces(self.env, self.agents, config.env_seed)
            self.num_agents = len(self.agents)
            self.masked = {a: has_action_mask(self.env.observation_space(a)) for a in self.agents}
            self.codec = ObservationCodec({a: observation_part(self.env.observation_space(a), self.masked[a])
                                           for a in self.agents})
            self.observation_space = dict(self.codec.spaces)
            self.action_space = {a: self.env.action_space(a) for a in self.agents}
            self.state_space = state_space_of(self.env, self.codec)
            env_state = getattr(self.env, "state_space", None)
            self._has_state = env_state is not None
            self._state_codec = ObservationCodec({"state": env_state}) if self._has_state else None
            self.max_episode_steps = max_cycles_of(self.env) or DEFAULT_MAX_STEPS
            self.metadata = getattr(self.env, "metadata", {})
            self._box = {a: action_kind(s) == "box" for a, s in self.action_space.items()}
            self._last_obs: dict[str, Any] = {}
            self._steps = 0

        def reset(self) -> tuple[dict, dict]:
            observations, infos = self.env.reset()
            observations = self.codec(observations)
            if self._steps:
                self._episode += 1
            self._last_obs, self._steps = observations, 0
            self._returns = {a: 0.0 for a in self.agents}
            return observations, {"infos": infos}

        def step(self, actions: dict) -> tuple[dict, dict, dict, bool, dict]:
            for agent, action in actions.items():
                if self._box[agent]:
                    space = self.action_space[agent]
                    actions[agent] = np.clip(action, space.low, space.high)
            observations, rewards, terminated, truncated, infos = self.env.step(actions)
            left = [a for a in self.agents if a not in observations]
            if left:
                raise RuntimeError(f"{self.env_id}: {', '.join(left)} left the episode at step {self._steps + 1}; "
                                   "XuanCe's multi-agent loop needs every agent at every step")
            observations = self.codec(observations)
            self._steps += 1
            self._last_obs = observations
            self._stream(rewards)
            done = any(truncated.values()) or self._steps >= self.max_episode_steps
            return observations, rewards, terminated, done, {"infos": infos}

        def _stream(self, rewards: dict[str, float]) -> None:
            """Env 0's frame of this step to FastLane, when the run streams and a frame is due."""
            if self.lane is not None:
                for agent, reward in rewards.items():
                    self._returns[agent] = self._returns.get(agent, 0.0) + float(reward)
                if self.lane.due():
                    self.lane.offer(self.env.render, self._episode, self._steps, lambda: {
                        "rewards": {a: float(r) for a, r in rewards.items()}, "returns": dict(self._returns)})

        def state(self) -> np.ndarray:
            if self._has_state:
                state = self.env.state()
                return self._state_codec.observation("state", state) if self._state_codec.flattened else state
            return np.concatenate([np.asarray(self._last_obs[a], np.float32).ravel() for a in self.agents])

        def avail_actions(self) -> dict | None:
            if any(self._box.values()):
                return None
            return {a: np.ones(self.action_space[a].n, np.bool_) for a in self.agents}

        def render(self, *args: Any) -> Any:
            return self.env.render()

        def close(self) -> None:
            if self.lane is not None:
                self.lane.close()
            self.env.close()

    return MosaicPettingZooEnv


PASS = 0  # the one action a waiting agent is offered in a turn-based game; it is not played


def turn_masks(mover: str | None, legal: Any, sizes: dict[str, int]) -> dict[str, np.ndarray]:
    """Each agent's open actions at one step of a turn-based game: the mover's legal moves, a pass for the rest.

    ``legal`` is the mover's ``action_mask`` (PettingZoo's 0/1 vector); a game that is over (no mover, or a
    mover without a legal move) offers everyone the pass, so XuanCe always has an action to sample."""
    out = {}
    for agent, size in sizes.items():
        mask = np.zeros(size, np.bool_)
        if agent == mover and legal is not None and np.any(legal):
            mask[:] = np.asarray(legal, np.bool_)
        else:
            mask[PASS] = True
        out[agent] = mask
    return out


def one_agent_inputs(codec: ObservationCodec, agent: str, observation: Any, masked: bool,
                     sizes: dict[str, int] | None) -> tuple[dict[str, Any], list[dict] | None, Any]:
    """XuanCe's joint inputs when one agent acts (``mosaic eval`` of a turn-based game, an arena player):
    ``(observations, masks, legal)``. The agent's observation (the board part, when it comes with its legal
    moves) encoded by ``codec``, zeros for every other agent; with ``sizes`` (a turn-based game), the masks
    of :func:`turn_masks` with this agent moving, as in training; ``legal`` its legal moves, or None."""
    mine = codec.observation(agent, observation_part(observation, masked))
    joint = {a: mine if a == agent else np.zeros(space.shape, space.dtype) for a, space in codec.spaces.items()}
    legal = np.asarray(observation["action_mask"], np.bool_) if masked else None
    masks = [turn_masks(agent, legal, sizes)] if sizes is not None else None
    return joint, masks, legal


def check_legal(agent: str, action: int, legal: Any, where: str = "") -> None:
    """Stop at an action outside the agent's legal moves: with the masks in place it is a bug, not a move."""
    if legal is not None and not legal[action]:
        raise RuntimeError(f"{where}{agent} chose action {action}, not a legal move "
                           f"(legal: {np.flatnonzero(legal).tolist()})")


def make_turn_env_class() -> type:
    """The turn adapter: a PettingZoo AEC game stepped the way XuanCe steps every env, all agents at once.

    At each step the agent whose turn it is (``agent_selection``) moves; its mask (``avail_actions``) is
    the game's legal moves, and every other agent's mask opens one action, a pass that the adapter does not
    play. XuanCe's learners thus see, for a waiting agent, an action its policy takes with probability one
    (no policy gradient, no entropy), while its value estimate and rewards are learned at every step: a
    loser's -1 arrives at the step where the winner moved. Each agent observes the board from its side
    (``observe(agent)["observation"]``); the global state is the agents' observations, concatenated. An
    action outside the mover's legal moves stops the run naming it (the masks make it a bug, not a move).
    """
    base = make_raw_env_class()

    class MosaicTurnBasedEnv(base):
        API = "AEC"

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self._sizes = {a: int(space.n) for a, space in self.action_space.items()}
            self._over = False

        def _observe(self) -> dict[str, Any]:
            return {a: self.codec.observation(a, observation_part(self.env.observe(a), self.masked[a]))
                    for a in self.agents}

        def reset(self) -> tuple[dict, dict]:
            self.env.reset()
            if self._steps:
                self._episode += 1
            self._steps, self._over = 0, False
            self._returns = {a: 0.0 for a in self.agents}
            self._last_obs = self._observe()
            return self._last_obs, {"infos": {}}

        def step(self, actions: dict) -> tuple[dict, dict, dict, bool, dict]:
            mover = self.env.agent_selection
            action = int(actions[mover])
            check_legal(mover, action, self._legal(mover), f"{self.env_id}, step {self._steps + 1}: ")
            self.env.step(action)
            rewards = {a: float(self.env.rewards.get(a, 0.0)) for a in self.agents}
            self._over = all(self.env.terminations.get(a, True) or self.env.truncations.get(a, True)
                             for a in self.agents)
            ended = all(self.env.terminations.get(a, True) for a in self.agents)
            self._steps += 1
            self._last_obs = self._observe()
            self._stream(rewards)
            terminated = {a: ended for a in self.agents}
            done = (self._over and not ended) or self._steps >= self.max_episode_steps
            return self._last_obs, rewards, terminated, done, {"infos": dict(self.env.infos)}

        def _legal(self, agent: str) -> Any:
            if not self.masked[agent]:
                return None
            return np.asarray(self.env.observe(agent)["action_mask"], np.bool_)

        def avail_actions(self) -> dict:
            mover = None if self._over else self.env.agent_selection
            return turn_masks(mover, self._legal(mover) if mover is not None else None, self._sizes)

    return MosaicTurnBasedEnv


def publisher(lane: dict[str, Any]) -> Any:
    from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
    from mosaic.fastlane.publisher import Publisher

    target = FastLaneTarget(lane["run_id"], lane["run_dir"], FastLaneConfig(**lane["config"]))
    return Publisher(target, "main")


def register() -> None:
    """Put the adapters into XuanCe's multi-agent env registry (idempotent)."""
    from xuance.environment.multi_agent_env import REGISTRY_MULTI_AGENT_ENV

    if not isinstance(REGISTRY_MULTI_AGENT_ENV.get(ENV_NAME), type):
        REGISTRY_MULTI_AGENT_ENV[ENV_NAME] = make_raw_env_class()
    if not isinstance(REGISTRY_MULTI_AGENT_ENV.get(TURNS_ENV_NAME), type):
        REGISTRY_MULTI_AGENT_ENV[TURNS_ENV_NAME] = make_turn_env_class()
