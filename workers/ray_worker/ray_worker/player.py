"""A Ray run's trained policy as a player (``--player``, :mod:`mosaic.workerkit.player`), played without Ray.

The match sends each agent's raw PettingZoo observation; the player encodes it exactly as training's env
did (:mod:`ray_worker.encoding`, the same :mod:`mosaic.workerkit.spaces` code) and asks the module that
played that agent in training. Each seat's module comes from the run's agent-to-module map (or
``module_id`` for every seat). SHARED_VALUE_FUNCTION (MAPPO) runs are served too: their actors read only
the local part of training's ``{obs, state}`` observation (the global state is the central critic's, which
never acts), so the player hands them the encoded local observation beside a zero state of the trained
shape. Not served yet, and refused naming why: image-preprocessed runs (frame stacks are state the match
would have to replay).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from mosaic.errors import UserError


@dataclass
class RayPlayer:
    label: str
    environment: dict[str, Any]
    agents: list[str]
    checkpoint: str
    module_id: str | None = None
    deterministic: bool = True
    _encoders: dict[str, Any] = field(default_factory=dict)
    _actors: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, target: str, options: Mapping[str, Any] | None = None) -> "RayPlayer":
        from ray_worker.policy_actor import read_checkpoint

        options = dict(options or {})
        info = read_checkpoint(target)
        env = dict(info.environment or {})
        if env.get("family") == "gymnasium":
            raise UserError(f"--player: {info.path} was trained on a single-agent Gymnasium env ({env.get('env_id')}): "
                            "a match seats players in a PettingZoo env; evaluate it with `mosaic eval RUN`")
        if (env.get("preprocessing") or {}).get("enabled"):
            raise UserError(f"--player: {info.path} trained on preprocessed images (frame stacks); not served yet")
        agents = sorted(info.state.agent_to_module)
        module_id = options.get("module_id")
        if module_id is not None and module_id not in info.modules:
            raise UserError(f"module_id: {module_id!r} is not in {info.path}; modules: {', '.join(info.modules)}")
        player = cls(label=f"{info.path.parent.parent.name}/{info.path.name}", checkpoint=str(info.path),
                     environment={k: env.get(k) for k in ("family", "env_id", "env_kwargs")}, agents=agents,
                     module_id=module_id, deterministic=bool(options.get("deterministic", True)))
        player._encoders = player._encoder_for(env)
        if info.state.policy_configuration == "SHARED_VALUE_FUNCTION":
            player._encoders = player._with_zero_state(info, player._encoders)
        return player

    @staticmethod
    def _with_zero_state(info: Any, encoders: dict[str, Any]) -> dict[str, Any]:
        """MAPPO: ``{obs: encoded local, state: zeros}`` per agent; the actors read only ``obs``
        (:class:`ray_worker.ctde.CTDEActor`), the state's shape is training's."""
        import numpy as np

        from ray_worker.ctde_ids import LOCAL, STATE
        from ray_worker.environment import EnvironmentFactory
        from ray_worker.policy_actor import environment_config

        trained, _ = EnvironmentFactory(environment_config(info), global_state=True, critic_actions=bool(
            (info.state.ctde or {}).get("critic_actions"))).make_pettingzoo()
        try:
            zeros = {a: np.zeros(trained.observation_space(a)[STATE].shape, np.float32) for a in encoders}
        finally:
            trained.close()
        return {a: (lambda value, e=encode, z=zeros[a]: {LOCAL: e(value), STATE: z}) for a, encode in encoders.items()}

    @staticmethod
    def _encoder_for(env: Mapping[str, Any]) -> dict[str, Any]:
        """Agent -> encode function of the raw observation, as training's env wrapper applied it."""
        from mosaic.workerkit.envs import load_env_module, make_env, supported_api_types
        from ray_worker.encoding import _encode, _wants

        family, env_id, kwargs = env["family"], env["env_id"], dict(env.get("env_kwargs") or {})
        api = "PARALLEL" if "PARALLEL" in supported_api_types(load_env_module(family, env_id)) else "AEC"
        raw = make_env(family, env_id, api, kwargs, None)
        try:
            spaces = {a: raw.observation_space(a) for a in raw.possible_agents}
        finally:
            raw.close()
        return {a: (lambda value, s=s: _encode(s, value)) if _wants(s) else (lambda value: value)
                for a, s in spaces.items()}

    def _actor(self, agent: str) -> Any:
        if agent not in self._actors:
            from ray_worker.policy_actor import RayPolicyConfig, create_ray_actor

            self._actors[agent] = create_ray_actor(RayPolicyConfig(self.checkpoint, module_id=self.module_id,
                                                                   agent_id=agent,
                                                                   deterministic=self.deterministic))
        return self._actors[agent]

    def reset(self, seed: int) -> None:
        import torch

        torch.manual_seed(seed)  # sampled (non-deterministic) play repeats with the game's seed

    def act(self, agent: str, observation: Any) -> Any:
        if agent not in self._encoders:
            raise UserError(f"agent {agent!r} is not in the env this run trained on ({', '.join(self._encoders)})")
        return self._actor(agent).compute_action(self._encoders[agent](observation))
