"""PettingZoo environments by family and versioned id, shared by all workers.

Ids are resolved against the installed packages, not a hard-coded table:
any ``<name>_v<N>`` module of a family's package is an env of that family.
PettingZoo is imported lazily, so ``import mosaic`` never needs it.
"""

from __future__ import annotations

import difflib
import importlib
import os
import pkgutil
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Mapping

from mosaic.configkit import option
from mosaic.errors import ConfigError, one_of
from mosaic.workerkit.run_fields import Environment

ENV_FAMILIES = ("sisl", "classic", "butterfly", "mpe")
API_TYPES = ("AEC", "PARALLEL")
_ENV_ID = re.compile(r"^[a-z][a-z0-9_]*_v\d+$")

#: Packages searched per family, first match wins (MPE moved to ``mpe2``).
FAMILY_PACKAGES: dict[str, tuple[str, ...]] = {
    "sisl": ("pettingzoo.sisl",),
    "classic": ("pettingzoo.classic",),
    "butterfly": ("pettingzoo.butterfly",),
    "mpe": ("mpe2", "pettingzoo.mpe"),
}


#: How each env rewards its agents. ``cooperative``: one team, a shared (or jointly
#: shaped) reward, nobody wins; ``competitive``: zero-sum games between players;
#: ``mixed``: teams with opposed goals (general-sum); ``single``: one agent. Self-play
#: needs an opponent to beat, so it is refused where no agent has one.
REWARD_STRUCTURES: dict[str, dict[str, str]] = {
    "sisl": {"multiwalker_v9": "cooperative", "pursuit_v4": "cooperative", "waterworld_v4": "cooperative"},
    "classic": {"chess_v6": "competitive", "connect_four_v3": "competitive", "gin_rummy_v4": "competitive",
                "go_v5": "competitive", "hanabi_v5": "cooperative", "leduc_holdem_v4": "competitive",
                "rps_v2": "competitive", "texas_holdem_no_limit_v6": "competitive",
                "texas_holdem_v4": "competitive", "tictactoe_v3": "competitive"},
    "butterfly": {"cooperative_pong_v5": "cooperative", "knights_archers_zombies_v10": "cooperative",
                  "pistonball_v6": "cooperative"},
    "mpe": {"collect_treasure_v1": "cooperative", "simple_adversary_v3": "mixed", "simple_crypto_v3": "mixed",
            "simple_formation_v1": "cooperative", "simple_line_v1": "cooperative", "simple_push_v3": "mixed",
            "simple_reference_v3": "cooperative", "simple_speaker_listener_v4": "cooperative",
            "simple_spread_v3": "cooperative", "simple_tag_v3": "mixed", "simple_v3": "single",
            "simple_world_comm_v3": "mixed"},
}


def reward_structure(family: str, env_id: str) -> str | None:
    """``cooperative``, ``competitive``, ``mixed`` or ``single``; None for an env MOSAIC has not classified."""
    return REWARD_STRUCTURES.get(family, {}).get(env_id)


def _headless_pygame() -> None:
    """PettingZoo envs import pygame; without a display, keep SDL quiet and off-screen."""
    if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")


def _family_packages(family: str, field: str) -> list[ModuleType]:
    _headless_pygame()
    if family not in FAMILY_PACKAGES:
        raise ConfigError(field, one_of(family, ENV_FAMILIES))
    found, errors = [], []
    for name in FAMILY_PACKAGES[family]:
        try:
            found.append(importlib.import_module(name))
            break  # the first installed package is the family's home
        except Exception as exc:  # ImportError, or a package that refuses to import
            errors.append(f"{name}: {exc}")
    if not found:
        raise ConfigError(field, f"no package for the {family!r} family is installed ({'; '.join(errors)})")
    return found


def available_env_ids(family: str, field: str = "environment.family") -> list[str]:
    """Every versioned env id the installed packages offer for ``family``."""
    ids: set[str] = set()
    for package in _family_packages(family, field):
        ids.update(name for _, name, _ in pkgutil.iter_modules(package.__path__)
                   if _ENV_ID.match(name))
    return sorted(ids)


def offered_env_ids(families: "tuple[str, ...] | list[str]" = ENV_FAMILIES) -> dict[str, list[str]]:
    """Family -> its installed env ids (empty when no package of the family is installed)."""
    offered: dict[str, list[str]] = {}
    for family in families:
        try:
            offered[family] = available_env_ids(family)
        except ConfigError:
            offered[family] = []
    return offered


def load_env_module(family: str, env_id: str, field: str = "environment") -> ModuleType:
    """The module of ``family/env_id`` or a :class:`ConfigError` listing what exists."""
    ids = available_env_ids(family, f"{field}.family")
    if env_id not in ids:
        close = difflib.get_close_matches(str(env_id), ids, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"{field}.env_id", f"{env_id!r} is not a {family} env{hint}; "
                          f"available: {', '.join(ids)}")
    missing = []
    for package in _family_packages(family, f"{field}.family"):
        try:
            return importlib.import_module(f"{package.__name__}.{env_id}")
        except ModuleNotFoundError as exc:  # the env, or a package it needs (Box2D, ...)
            missing.append(f"{exc}")
            continue
    because = f" ({'; '.join(missing)})" if missing else ""
    raise ConfigError(f"{field}.env_id", f"{env_id!r} could not be imported{because}")


def supported_api_types(module: ModuleType) -> tuple[str, ...]:
    kinds = ["AEC"] if hasattr(module, "env") else []
    if hasattr(module, "parallel_env"):
        kinds.append("PARALLEL")
    return tuple(kinds)


def make_env(family: str, env_id: str, api_type: str = "PARALLEL",
             env_kwargs: Mapping[str, Any] | None = None, render_mode: str | None = None,
             field: str = "environment") -> Any:
    """Build a PettingZoo env (AEC or parallel) with helpful errors."""
    if api_type not in API_TYPES:
        raise ConfigError(f"{field}.api_type", one_of(api_type, API_TYPES))
    module = load_env_module(family, env_id, field)
    kinds = supported_api_types(module)
    if api_type not in kinds:
        raise ConfigError(f"{field}.api_type", f"{api_type} is not available for {family}/{env_id} "
                          f"(supported: {', '.join(kinds)})")
    factory = module.parallel_env if api_type == "PARALLEL" else module.env
    kwargs = dict(env_kwargs or {})
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    try:
        return factory(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"{field}.env_kwargs", f"rejected by {env_id}: {exc}") from None
    except (ValueError, AssertionError) as exc:
        raise ConfigError(f"{field}.env_kwargs", f"rejected by {env_id}: {exc}") from None


@dataclass
class EnvironmentConfig(Environment):
    """Which PettingZoo env to build: the shared ``environment`` section with PettingZoo's API type."""

    family: str = option("classic", choices=ENV_FAMILIES, help="PettingZoo env family")
    env_id: str = option("connect_four_v3", help="versioned env id within the family, e.g. pistonball_v6")
    api_type: str = option("AEC", choices=API_TYPES, help="PettingZoo API: AEC (turn-based) or PARALLEL")
    env_kwargs: dict = option(default_factory=dict, help="keyword arguments for the env constructor")

    def make(self, render_mode: str | None = None, field: str = "environment") -> Any:
        return make_env(self.family, self.env_id, self.api_type, self.env_kwargs, render_mode, field)

    def describe(self) -> dict[str, Any]:
        return {"family": self.family, "env_id": self.env_id, "api_type": self.api_type,
                "env_kwargs": dict(self.env_kwargs)}
