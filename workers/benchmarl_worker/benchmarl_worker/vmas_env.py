"""One VMAS env behind PettingZoo's parallel API, so that the kit's ``play_episodes`` plays VMAS tasks.

VMAS steps a batch of envs as tensors; ``mosaic eval`` plays one episode at a time, so this builds a batch of one
(``vmas.make_env``, with the arguments TorchRL's ``VmasEnv`` gives it for BenchMARL: the task's TaskConfig fields,
the action kind, ``clamp_actions``), hands each agent its observation as a numpy array (what TorchRL reads from the
same tensor), and steps it with each agent's action as VMAS takes it (a ``[1, size]`` tensor, or ``[1]`` for a
discrete action). An episode ends for every agent when VMAS says the env is done (its task's end, or ``max_steps``).
Frames are VMAS's own ``render(mode="rgb_array")``.
"""

from __future__ import annotations

from typing import Any, Mapping


class VmasParallelEnv:
    metadata = {"render_modes": ["rgb_array"], "name": "vmas"}

    def __init__(self, scenario: str, kwargs: Mapping[str, Any], continuous: bool,
                 render_mode: str | None = None) -> None:
        import vmas

        self.env = vmas.make_env(scenario=scenario, num_envs=1, device="cpu", continuous_actions=continuous,
                                 clamp_actions=True, seed=0, **dict(kwargs))
        self.possible_agents = [agent.name for agent in self.env.agents]
        self.agents: list[str] = []
        self.render_mode = render_mode

    def observation_space(self, agent: str) -> Any:
        return self.env.observation_space[self.possible_agents.index(agent)]

    def action_space(self, agent: str) -> Any:
        return self.env.action_space[self.possible_agents.index(agent)]

    def _observations(self, observations: Any) -> dict[str, Any]:
        return {agent: obs[0].cpu().numpy() for agent, obs in zip(self.possible_agents, observations)}

    def reset(self, seed: int | None = None, options: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
        if seed is not None:
            self.env.seed(seed)
        observations = self.env.reset()
        self.agents = list(self.possible_agents)
        return self._observations(observations), {agent: {} for agent in self.agents}

    def step(self, actions: Mapping[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        import numpy as np
        import torch

        batch = []
        for agent in self.possible_agents:
            action = torch.as_tensor(np.asarray(actions[agent]))
            batch.append(action.reshape(1) if action.ndim == 0 else action.reshape(1, -1))
        observations, rewards, dones, _ = self.env.step(batch)
        done = bool(dones[0])
        agents = self.possible_agents
        out = (self._observations(observations), {a: float(r[0]) for a, r in zip(agents, rewards)},
               dict.fromkeys(agents, done), dict.fromkeys(agents, False), {a: {} for a in agents})
        if done:
            self.agents = []
        return out

    def render(self) -> Any:
        return self.env.render(mode="rgb_array", env_index=0)

    def close(self) -> None:
        viewer = getattr(self.env, "viewer", None)
        if viewer is not None:
            viewer.close()
