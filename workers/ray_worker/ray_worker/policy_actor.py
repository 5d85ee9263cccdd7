"""Play trained policies from a checkpoint without Ray: load only the RLModule(s).

``create_ray_actor(RayPolicyConfig(checkpoint_path=...))`` reads the run's
``mosaic_state.json`` (algorithm, env, policy configuration), loads the
module's weights with ``RLModule.from_checkpoint`` (no ``ray.init``, no
``Algorithm``), and acts exactly as training did:

* observations come from the same :class:`~ray_worker.environment.EnvironmentFactory`
  (image preprocessing, global state for CTDE), so there is nothing to re-apply;
  RLlib's default env-to-module connectors only batch and convert to tensors;
* masks are honoured by the masked modules themselves;
* continuous actions are unsquashed to the action space's bounds like RLlib's
  module-to-env connector (``normalize_actions``), discrete ones are argmax
  (deterministic) or sampled; DQN acts greedily on its Q values and SAC
  deterministically with its mean through the tanh squash (:func:`module_actions`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np

from mosaic.errors import UserError
from ray_worker.checkpoint import RayCheckpointState

MODULES_DIR = Path("learner_group") / "learner" / "rl_module"


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder, or a run folder (its latest checkpoint)."""
    from mosaic.workerkit import checkpoints

    return checkpoints.resolve(path, "checkpoint_path", "the ray worker")


def checkpoint_modules(checkpoint: Path) -> list[str]:
    folder = checkpoint / MODULES_DIR
    return sorted(d.name for d in folder.iterdir() if d.is_dir()) if folder.is_dir() else []


@dataclass
class RayPolicyConfig:
    """Which policy to load; env settings default to what the run recorded."""

    checkpoint_path: str
    module_id: str | None = None  # default: the module that plays `agent_id`, or the only/first trained one
    agent_id: str | None = None
    algorithm: str | None = None  # informational; checked against the checkpoint when given
    env_family: str | None = None
    env_id: str | None = None
    env_kwargs: dict[str, Any] | None = None
    device: str = "cpu"
    deterministic: bool = True


@dataclass
class CheckpointInfo:
    path: Path
    state: RayCheckpointState
    modules: list[str]

    @property
    def environment(self) -> dict[str, Any]:
        return self.state.environment


def read_checkpoint(path: str | Path) -> CheckpointInfo:
    checkpoint = resolve_checkpoint(path)
    state = RayCheckpointState.read(checkpoint, "checkpoint_path", "the ray worker")
    return CheckpointInfo(checkpoint, state, checkpoint_modules(checkpoint))


def environment_config(info: CheckpointInfo, family: str | None = None, env_id: str | None = None,
                       env_kwargs: Mapping[str, Any] | None = None) -> Any:
    """The run's EnvironmentConfig, with optional overrides."""
    from mosaic import configkit
    from ray_worker.config import EnvironmentConfig

    data = dict(info.environment)
    if family is not None:
        data["family"] = family
    if env_id is not None:
        data["env_id"] = env_id
    if env_kwargs is not None:
        data["env_kwargs"] = dict(env_kwargs)
    return configkit.from_dict(EnvironmentConfig, data, "environment")


class RayPolicyActor:
    """One loaded module that acts for one agent, or for a batch of observations."""

    def __init__(self, module: Any, module_id: str, info: CheckpointInfo, deterministic: bool,
                 device: str = "cpu") -> None:
        import torch

        self.module = module.to(device)
        self.module.eval()
        self.module_id = module_id
        self.info = info
        self.deterministic = deterministic
        self.device = torch.device(device)
        self.observation_space = module.observation_space
        self.action_space = module.action_space

    def check_space(self, agent: str, observation_space: gym.Space, action_space: gym.Space) -> None:
        """A clear error when an env's agent does not fit this module."""
        if observation_space != self.observation_space or action_space != self.action_space:
            raise UserError(f"module {self.module_id!r} expects observations {self.observation_space} and "
                            f"actions {self.action_space}; agent {agent!r} has {observation_space} and "
                            f"{action_space}")

    def _batch(self, observations: Sequence[Any]) -> Any:
        import torch

        first = observations[0]
        if isinstance(first, dict):
            return {k: self._batch([o[k] for o in observations]) for k in first}
        return torch.as_tensor(np.stack([np.asarray(o) for o in observations]), device=self.device)

    def compute_actions(self, observations: Sequence[Any], deterministic: bool | None = None) -> list[Any]:
        """Actions for a batch of observations of agents this module plays."""
        import torch
        from ray.rllib.core.columns import Columns

        greedy = self.deterministic if deterministic is None else deterministic
        with torch.no_grad():
            out = self.module.forward_inference({Columns.OBS: self._batch(observations)})
            actions = module_actions(self.module, out, greedy).cpu().numpy()
        return [self._to_env(a) for a in actions]

    def compute_action(self, observation: Any, deterministic: bool | None = None) -> Any:
        return self.compute_actions([observation], deterministic)[0]

    def _to_env(self, action: np.ndarray) -> Any:
        space = self.action_space
        if isinstance(space, gym.spaces.Discrete):
            return int(action)
        if isinstance(space, gym.spaces.Box) and np.all(space.bounded_below) and np.all(space.bounded_above):
            scaled = space.low + (np.asarray(action, np.float64) + 1.0) * (space.high - space.low) / 2.0
            return np.clip(scaled, space.low, space.high).astype(space.dtype)
        return action


def module_actions(module: Any, out: Mapping[str, Any], greedy: bool) -> Any:
    """Actions (as the module's distribution gives them, before unsquashing) from a forward_inference output.

    * Q modules (DQN) return their greedy actions themselves; Q-learning has no
      stochastic policy to sample, so they are greedy either way;
    * a squashed Gaussian (SAC) acts deterministically with its mean through
      the tanh squash, the mode of its sampled actions in [-1, 1];
    * other distributions use RLlib's deterministic version (argmax, mean) or a sample.
    """
    import torch
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.distribution.torch.torch_distribution import TorchSquashedGaussian

    if Columns.ACTION_DIST_INPUTS not in out:
        if Columns.ACTIONS not in out:
            raise UserError(f"module {type(module).__name__} returned neither actions nor action "
                            f"distribution inputs (got {', '.join(out)})")
        return out[Columns.ACTIONS]
    dist = module.get_inference_action_dist_cls().from_logits(out[Columns.ACTION_DIST_INPUTS])
    if not greedy:
        return dist.sample()
    if isinstance(dist, TorchSquashedGaussian):
        return torch.tanh(dist.loc)
    return dist.to_deterministic().sample()


def _module_for_agent(info: CheckpointInfo, agent_id: str) -> str | None:
    mapping = info.state.agent_to_module
    return mapping.get(agent_id)


def create_ray_actor(config: RayPolicyConfig) -> RayPolicyActor:
    """Load one module from a checkpoint (no Ray cluster, no Algorithm)."""
    from ray.rllib.core.rl_module.rl_module import RLModule

    info = read_checkpoint(config.checkpoint_path)
    if config.algorithm and info.state.algorithm and config.algorithm.upper() != info.state.algorithm:
        raise UserError(f"algorithm: the checkpoint was trained with {info.state.algorithm}, "
                        f"not {config.algorithm}")
    from ray_worker.ctde_ids import CRITIC_ID

    # The central critic never acts; fixed baselines (e.g. the random opponent) are not policies.
    playable = [m for m in info.modules if m != CRITIC_ID and m not in info.state.baselines]
    module_id = config.module_id
    if module_id is None and config.agent_id is not None:
        module_id = _module_for_agent(info, config.agent_id)
    if module_id is None:
        module_id = "main" if "main" in playable else playable[0] if playable else None
    if module_id not in playable:
        raise UserError(f"module_id: {module_id!r} is not in {info.path}; available: {', '.join(playable)}")
    _quiet_rllibs_own_module_config()
    module = RLModule.from_checkpoint(str((info.path / MODULES_DIR / module_id).resolve()))
    return RayPolicyActor(module, module_id, info, config.deterministic, config.device)


#: What RLlib's own ``RLModule.__init__`` logs, for every module, however it is built: it makes the deprecated
#: ``RLModuleConfig`` itself (RLlib 2.60, rl_module.py). MOSAIC builds modules the current way (observation_space=,
#: action_space=, model_config=, here through ``RLModule.from_checkpoint``): the message is about RLlib's internals.
RLLIB_OWN_DEPRECATION = "`RLModule(config=[RLModuleConfig object])` has been deprecated"


def _quiet_rllibs_own_module_config() -> None:
    """Drop that one message from RLlib's deprecation logger; every other warning it logs stays."""
    import logging

    logger = logging.getLogger("ray._common.deprecation")
    if not any(getattr(f, "mosaic_rllib_own", False) for f in logger.filters):
        class _Own(logging.Filter):
            mosaic_rllib_own = True

            def filter(self, record: logging.LogRecord) -> bool:
                return RLLIB_OWN_DEPRECATION not in record.getMessage()

        logger.addFilter(_Own())


@dataclass
class RayPolicyController:
    """Who plays which agent: actors per agent id; the rest play randomly (mask-respecting)."""

    actors: dict[str, RayPolicyActor] = field(default_factory=dict)
    default: str = "random"
    seed: int = 0

    @classmethod
    def from_checkpoint(cls, path: str, deterministic: bool = True, agents: Sequence[str] | None = None
                        ) -> "RayPolicyController":
        """Every agent the run trained, each with its own module (as in training)."""
        info = read_checkpoint(path)
        mapping = info.state.agent_to_module
        cache: dict[str, RayPolicyActor] = {}
        actors = {}
        for agent in (agents or list(mapping)):
            module_id = mapping.get(agent)
            if module_id is None:
                continue
            if module_id not in cache:
                cache[module_id] = create_ray_actor(RayPolicyConfig(path, module_id=module_id,
                                                                    deterministic=deterministic))
            actors[agent] = cache[module_id]
        return cls(actors)

    def actor_for(self, agent: str) -> RayPolicyActor | None:
        return self.actors.get(agent)
