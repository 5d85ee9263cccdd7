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


@functools.lru_cache(maxsize=8)
def _spaces(family: str, env_id: str, api_type: str, kwargs: str) -> dict[str, Any]:
    from mosaic.workerkit.envs import make_env

    env = make_env(family, env_id, api_type, json.loads(kwargs))
    try:
        agents = list(env.possible_agents)
        return {"agents": agents, "observation_spaces": {a: env.observation_space(a) for a in agents},
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
        def __init__(self, config: Any) -> None:
            super().__init__()
            spec = config.mosaic_env
            # Env 0 (seeded with the run's own seed) streams its frames when FastLane is on.
            lane = getattr(config, "mosaic_fastlane", None) if config.env_seed == config.seed else None
            self.env = make_env(spec["family"], spec["env_id"], "PARALLEL", spec["env_kwargs"],
                                "rgb_array" if lane else None)
            self.lane = publisher(lane) if lane else None
            self.env_id = spec["env_id"]
            self._episode, self._returns = 0, {}
            self.env.reset(seed=config.env_seed)
            self.agents = list(self.env.possible_agents)
            seed_action_spaces(self.env, self.agents, config.env_seed)
            self.num_agents = len(self.agents)
            self.codec = ObservationCodec({a: self.env.observation_space(a) for a in self.agents})
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
            if self.lane is not None:
                for agent, reward in rewards.items():
                    self._returns[agent] = self._returns.get(agent, 0.0) + float(reward)
                if self.lane.due():
                    self.lane.offer(self.env.render, self._episode, self._steps, lambda: {
                        "rewards": {a: float(r) for a, r in rewards.items()}, "returns": dict(self._returns)})
            done = any(truncated.values()) or self._steps >= self.max_episode_steps
            return observations, rewards, terminated, done, {"infos": infos}

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


def publisher(lane: dict[str, Any]) -> Any:
    from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
    from mosaic.fastlane.publisher import Publisher

    target = FastLaneTarget(lane["run_id"], lane["run_dir"], FastLaneConfig(**lane["config"]))
    return Publisher(target, "main")


def register() -> None:
    """Put the adapter into XuanCe's multi-agent env registry (idempotent)."""
    from xuance.environment.multi_agent_env import REGISTRY_MULTI_AGENT_ENV

    if not isinstance(REGISTRY_MULTI_AGENT_ENV.get(ENV_NAME), type):
        REGISTRY_MULTI_AGENT_ENV[ENV_NAME] = make_raw_env_class()
