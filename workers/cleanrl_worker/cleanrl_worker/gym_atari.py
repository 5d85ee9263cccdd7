"""ALE's Atari games as gym 0.23 envs (gym's old API), for ppo_atari.py and c51_atari.py.

CleanRL 1.2.0's ppo_atari.py and c51_atari.py call ``gym.make("PongNoFrameskip-v4")`` with gym 0.23.1 and
wrap the env with SB3 1.2.0's Atari wrappers (old API: ``seed()``, a 4-tuple ``step``). gym 0.23.1 found
its Atari ids through ale-py's gym plugin, which ale-py 0.12.1 (whose wheel holds the ROMs) no longer has:
it registers its ids with gymnasium only. :class:`GymAtariEnv` gives ale-py's ``AtariEnv`` that old API
with ``NoFrameskip-v4`` semantics as ale-py registers them (0.7.4's gym plugin and 0.12.1's gymnasium ids
alike): every frame, no sticky actions, the game's minimal action set, and the ALE ending an episode at
108,000 frames (30 minutes of play); :func:`register` puts :data:`GAMES` into gym's registry.

Registration names this module as the entry point, so ale-py is imported only when an env is made. The
import hook (``site/sitecustomize.py`` through ``child``) calls :func:`register` right after the script
imports gym.
"""

from __future__ import annotations

from typing import Any

import gym
import numpy as np

#: The ids registered, and ale-py's name of each game (``algorithms.ENVS["atari"]`` lists the same ids).
GAMES = {"BreakoutNoFrameskip-v4": "breakout", "PongNoFrameskip-v4": "pong", "BeamRiderNoFrameskip-v4": "beam_rider",
         "QbertNoFrameskip-v4": "qbert", "SeaquestNoFrameskip-v4": "seaquest",
         "SpaceInvadersNoFrameskip-v4": "space_invaders"}
#: ale-py's NoFrameskip-v4 ids end an episode after this many emulator frames (the ALE's own cap).
MAX_FRAMES = 108_000


class GymAtariEnv(gym.Env):
    """One ALE game (ale-py's ``AtariEnv``, frame skip 1, no sticky actions) behind gym 0.23's API.

    The ALE's end of a game and its 108,000-frame cap both end gym's episode (``done``)."""

    # both fps keys: gym 0.23's VideoRecorder reads the old one (30 fps without it)
    metadata = {"render_modes": ["rgb_array"], "render_fps": 60, "video.frames_per_second": 60}

    def __init__(self, game: str, obs_type: str = "rgb") -> None:
        from ale_py.env import AtariEnv

        self._env = AtariEnv(game=game, obs_type=obs_type, frameskip=1, repeat_action_probability=0.0,
                             full_action_space=False, max_num_frames_per_episode=MAX_FRAMES)
        self.action_space = gym.spaces.Discrete(int(self._env.action_space.n))
        self.observation_space = gym.spaces.Box(0, 255, self._env.observation_space.shape, np.uint8)
        self._seed_at_reset: int | None = None

    @property
    def ale(self) -> Any:  # SB3's EpisodicLifeEnv reads env.unwrapped.ale.lives()
        return self._env.ale

    def get_action_meanings(self) -> list[str]:  # SB3's FireResetEnv and NoopResetEnv read them
        return self._env.get_action_meanings()

    def seed(self, seed: int | None = None) -> list[int]:
        """gym's old ``seed``: this env's ``np_random`` (SB3's NoopResetEnv draws its no-ops from it) now,
        the emulator at the next ``reset`` (ale-py seeds the ALE when it resets)."""
        from gym.utils import seeding

        self._np_random, seed = seeding.np_random(seed)
        self._seed_at_reset = seed
        return [seed]

    def reset(self, *, seed: int | None = None, return_info: bool = False, options: Any = None) -> Any:
        if seed is not None:
            self.seed(seed)
        obs, info = self._env.reset(seed=self._seed_at_reset)
        self._seed_at_reset = None
        return (obs, info) if return_info else obs

    def step(self, action: Any) -> tuple[Any, float, bool, dict]:
        obs, reward, terminated, truncated, info = self._env.step(int(action))
        return obs, float(reward), bool(terminated or truncated), info

    def render(self, mode: str = "rgb_array") -> Any:
        """The ALE screen, 210x160 RGB (reads the emulator's state; draws nothing random)."""
        if mode != "rgb_array":
            raise NotImplementedError(f"render mode {mode!r}: only 'rgb_array'")
        return self._env.ale.getScreenRGB()

    def close(self) -> None:
        self._env.close()


def register() -> None:
    """Put :data:`GAMES` into gym's registry (ids already there are left as they are)."""
    from gym.envs.registration import registry

    for env_id, game in GAMES.items():
        if env_id not in registry.env_specs:
            gym.register(id=env_id, entry_point="cleanrl_worker.gym_atari:GymAtariEnv", kwargs={"game": game})
