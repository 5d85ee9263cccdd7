"""``EnvironmentFactory``: PettingZoo env → RLlib ``MultiAgentEnv``; Gymnasium env → RLlib's single-agent path.

Builds the env by family and id through :mod:`mosaic.workerkit.envs`, applies image
preprocessing where asked, and wraps it with RLlib's own PettingZoo
wrappers (AEC or parallel). A ``gymnasium`` env is built with ``gymnasium.make`` and
handed to RLlib as it is (observations that are not a 1-D Box encoded as for PettingZoo
agents): RLlib trains it with its single-agent env runners and one module,
``default_policy``. It also describes the env (agents and spaces) for validation and
``--dry-run``; a single-agent env has one agent, ``agent_0``, as in every MOSAIC worker.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from mosaic.errors import ConfigError
from mosaic.fastlane.config import FastLaneTarget
from ray_worker.config import SINGLE_AGENT_FAMILIES, EnvironmentConfig
from ray_worker.encoding import encode_observations, encodings
from ray_worker.preprocessing import ImagePreprocess, is_image_space


def space_kind(space: gym.Space) -> str:
    if isinstance(space, gym.spaces.Discrete):
        return "discrete"
    if isinstance(space, gym.spaces.MultiDiscrete):
        return "multi_discrete"
    if isinstance(space, gym.spaces.Dict):
        return "masked_discrete" if "action_mask" in space.spaces else "dict"
    if isinstance(space, gym.spaces.Box):
        return "image" if len(space.shape) == 3 else "box"
    return type(space).__name__


def describe_space(space: gym.Space) -> Any:
    if isinstance(space, gym.spaces.Dict):
        return {k: describe_space(v) for k, v in space.spaces.items()}
    if isinstance(space, gym.spaces.Discrete):
        return f"Discrete({space.n})"
    if isinstance(space, gym.spaces.Box):
        return f"Box({space.shape}, {space.dtype})"
    return str(space)


@dataclass(frozen=True)
class EnvInfo:
    """Agents and their (post-preprocessing) spaces."""

    agents: tuple[str, ...]
    observation_spaces: dict[str, gym.Space]
    action_spaces: dict[str, gym.Space]
    preprocessed: bool
    has_state: bool
    #: agent -> how its observation was encoded (mosaic.workerkit.spaces), for agents that needed it
    encodings: dict[str, str] = field(default_factory=dict)
    #: a Gymnasium env: one agent (SINGLE_AGENT), trained by RLlib's single-agent path
    single_agent: bool = False

    def action_kinds(self) -> set[str]:
        return {space_kind(s) for s in self.action_spaces.values()}

    def has_action_masks(self) -> bool:
        return any(space_kind(s) == "masked_discrete" for s in self.observation_spaces.values())

    def to_dict(self) -> dict[str, Any]:
        return {"agents": list(self.agents), "single_agent": self.single_agent, "preprocessed": self.preprocessed,
                "observation_encodings": dict(self.encodings),
                "global_state": self.has_state,
                "observation_spaces": {a: describe_space(s) for a, s in self.observation_spaces.items()},
                "action_spaces": {a: describe_space(s) for a, s in self.action_spaces.items()}}


from mosaic.workerkit.contract import SINGLE_AGENT  # noqa: E402  (the one agent of a single-agent env)
#: Gymnasium's env modules whose envs the worker offers (vector observations; Box2D's only where installed).
GYMNASIUM_MODULES = ("gymnasium.envs.classic_control", "gymnasium.envs.toy_text", "gymnasium.envs.box2d")
#: Offered ids left out: pixel observations, which only PettingZoo envs get preprocessed for.
GYMNASIUM_LEFT_OUT = ("CarRacing-v3",)


def gymnasium_env_ids() -> list[str]:
    """The Gymnasium ids the worker offers, as installed: classic control, toy text, and Box2D's with Box2D."""
    import importlib.util

    import gymnasium

    box2d = importlib.util.find_spec("Box2D") is not None
    ids = []
    for env_id, spec in gymnasium.registry.items():
        entry = spec.entry_point if isinstance(spec.entry_point, str) else ""
        module = entry.split(":")[0]
        if not module.startswith(GYMNASIUM_MODULES) or env_id in GYMNASIUM_LEFT_OUT:
            continue
        if module.startswith("gymnasium.envs.box2d") and not box2d:
            continue
        ids.append(env_id)
    return sorted(ids)


def offered_envs() -> dict[str, list[str]]:
    """Family -> env ids the worker offers: the installed PettingZoo families, then Gymnasium's."""
    from mosaic.workerkit.envs import ENV_FAMILIES, offered_env_ids

    return {**offered_env_ids(ENV_FAMILIES), "gymnasium": gymnasium_env_ids()}


def make_gymnasium(config: EnvironmentConfig, render_mode: str | None = None) -> gym.Env:
    """``gymnasium.make(env_id, **env_kwargs)`` with errors naming the field."""
    import difflib

    ids = gymnasium_env_ids()
    if config.env_id not in ids:
        close = difflib.get_close_matches(str(config.env_id), ids, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError("environment.env_id", f"{config.env_id!r} is not a gymnasium env this worker offers"
                          f"{hint}; allowed: {', '.join(ids)}")
    kwargs = dict(config.env_kwargs)
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    try:
        return gym.make(config.env_id, **kwargs)
    except (TypeError, ValueError, AssertionError, gym.error.Error) as exc:
        raise ConfigError("environment.env_kwargs", f"rejected by {config.env_id}: {exc}") from None


class EncodedGymObservations(gym.ObservationWrapper):
    """A single-agent env's observations as flat float vectors (:mod:`mosaic.workerkit.spaces`)."""

    def __init__(self, env: gym.Env) -> None:
        from mosaic.workerkit.spaces import encoded_space

        super().__init__(env)
        self._inner = env.observation_space
        self.observation_space = encoded_space(env.observation_space)

    def observation(self, observation: Any) -> Any:
        from mosaic.workerkit.spaces import encode

        return encode(self._inner, observation)


def gym_encoding(space: gym.Space) -> str | None:
    """How a single-agent env's observations are encoded; None: used as they are (a 1-D Box)."""
    from mosaic.workerkit.spaces import encoding_name, needs_encoding

    return encoding_name(space) if needs_encoding(space) else None


class EnvironmentFactory:
    """Creates the configured env; picklable, so RLlib can call it on every env runner."""

    def __init__(self, config: EnvironmentConfig, fastlane: FastLaneTarget | None = None,
                 global_state: bool = False, critic_actions: bool = False) -> None:
        self.config = config
        self.global_state = global_state  # add {"state": ...} for a centralised critic
        self.critic_actions = critic_actions  # ... with every agent's previous action in it
        #: Where env runners publish frames; None (or disabled) = plain envs, zero cost.
        self.fastlane = fastlane if fastlane is not None and fastlane.config.enabled else None
        self.encodings: dict[str, str] = {}  # set by make_pettingzoo

    @property
    def single_agent(self) -> bool:
        return self.config.family in SINGLE_AGENT_FAMILIES

    def make_gymnasium(self, render_mode: str | None = None) -> gym.Env:
        """The single-agent env, its observations encoded to a flat vector where they are not one."""
        env = make_gymnasium(self.config, render_mode)
        encoding = gym_encoding(env.observation_space)
        self.encodings = {SINGLE_AGENT: encoding} if encoding else {}
        return EncodedGymObservations(env) if encoding else env

    def _wants_preprocessing(self, env: Any) -> bool:
        enabled = self.config.preprocessing.enabled
        if enabled is not None:
            return enabled
        return any(is_image_space(env.observation_space(a)) for a in env.possible_agents)

    def make_pettingzoo(self, render_mode: str | None = None) -> tuple[Any, bool]:
        """The PettingZoo env in the configured API (AEC or parallel), preprocessed if needed."""
        from mosaic.workerkit.envs import load_env_module, make_env, supported_api_types

        cfg = self.config
        module = load_env_module(cfg.family, cfg.env_id)
        has_parallel = "PARALLEL" in supported_api_types(module)
        probe_api = "PARALLEL" if has_parallel else cfg.api_type
        env = make_env(cfg.family, cfg.env_id, probe_api, cfg.env_kwargs, render_mode)
        preprocess = self._wants_preprocessing(env)
        if preprocess:
            if not has_parallel:
                raise ConfigError("environment.preprocessing.enabled",
                                  f"image preprocessing needs a parallel env; {cfg.env_id} is AEC only")
            bad = [a for a in env.possible_agents if not is_image_space(env.observation_space(a))]
            if bad:
                raise ConfigError("environment.preprocessing.enabled",
                                  f"{cfg.env_id} has non-image observations for {bad[:3]}; set it to false")
            p = cfg.preprocessing
            env = ImagePreprocess(env, tuple(p.resize), p.grayscale, p.frame_stack)
        # Discrete, 2-D Box, Tuple, ... observations → flat vectors; images keep the CNN path
        self.encodings = {} if preprocess else encodings(env)
        if not preprocess:
            env = encode_observations(env, parallel=has_parallel)
        if self.global_state:
            from ray_worker.global_state import GlobalStateObservations, StateImage

            # an image state() (pistonball's board) is shrunk like the observations are
            p = cfg.preprocessing
            image = StateImage(p.resize[0], p.grayscale, p.frame_stack) if preprocess else None
            try:
                env = GlobalStateObservations(env, image, with_actions=self.critic_actions)
            except ValueError as exc:
                raise ConfigError("policy_configuration", f"SHARED_VALUE_FUNCTION on {cfg.env_id}: {exc}") from None
        if cfg.api_type == "AEC" and has_parallel:
            from pettingzoo.utils.conversions import parallel_to_aec

            if preprocess:
                env = parallel_to_aec(env)
            else:
                env.close()
                env = encode_observations(make_env(cfg.family, cfg.env_id, "AEC", cfg.env_kwargs, render_mode),
                                          parallel=False)
        if cfg.api_type == "AEC" and any(space_kind(env.observation_space(a)) == "masked_discrete"
                                         for a in env.possible_agents):
            from ray_worker.illegal_moves import IllegalMoveMonitor

            env = IllegalMoveMonitor(env)
        return env, preprocess

    def describe(self) -> EnvInfo:
        if self.single_agent:
            env = self.make_gymnasium()
            try:
                return EnvInfo(agents=(SINGLE_AGENT,), observation_spaces={SINGLE_AGENT: env.observation_space},
                               action_spaces={SINGLE_AGENT: env.action_space}, preprocessed=False,
                               has_state=False, encodings=dict(self.encodings), single_agent=True)
            finally:
                env.close()
        env, preprocessed = self.make_pettingzoo()
        try:
            agents = tuple(env.possible_agents)
            info = EnvInfo(agents=agents,
                           observation_spaces={a: env.observation_space(a) for a in agents},
                           action_spaces={a: env.action_space(a) for a in agents},
                           preprocessed=preprocessed, has_state=_has_state(env),
                           encodings=dict(self.encodings))
        finally:
            env.close()
        return info

    def __call__(self, env_context: Any = None) -> Any:
        """RLlib's env creator: an RLlib ``MultiAgentEnv``, or the ``gymnasium.Env`` of a single-agent run."""
        from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv, PettingZooEnv

        from ray_worker.self_play import ORDINALS

        ORDINALS.runner = int(getattr(env_context, "worker_index", 0) or 0)  # keys the self-play draw in this runner

        if self.single_agent:
            if self.fastlane is not None:
                from ray_worker.fastlane import wrap_single

                return wrap_single(self.make_gymnasium(render_mode="rgb_array"), self.fastlane, env_context,
                                   self.config.env_id)
            return self.make_gymnasium()
        if self.fastlane is not None:
            from ray_worker.fastlane import wrap

            env, _ = self.make_pettingzoo(render_mode="rgb_array")
            return wrap(env, self.config.api_type, self.fastlane, env_context, self.config.env_id)
        env, _ = self.make_pettingzoo()
        return PettingZooEnv(env) if self.config.api_type == "AEC" else ParallelPettingZooEnv(env)


def _has_state(env: Any) -> bool:
    try:
        env.reset(seed=0)
        env.state()
        return True
    except Exception:
        return False
