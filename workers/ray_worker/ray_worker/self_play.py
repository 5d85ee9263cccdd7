"""Self-play with a pool of frozen snapshots, driven from the training loop.

``main`` is the only trained module. Each episode, :class:`SelfPlayMapping`
seats ``main`` at a random seat and an opponent drawn from the pool at the
others. :class:`SelfPlayManager` scores every game from ``main``'s point of
view, and when main's win rate over a window of games passes the threshold
(after a minimum number of iterations) it adds a frozen copy of ``main`` to
the pool, evicting the oldest or weakest snapshot when the pool is full.
Frozen modules are never in ``policies_to_train``, so they never change.

This module imports no Ray; :func:`add_snapshot` and friends take the
algorithm and call RLlib's public ``add_module``/``remove_module``.
"""

from __future__ import annotations

import random
import zlib
from collections import deque
from typing import Any, Iterable

MAIN = "main"
SNAPSHOT_PREFIX = "main_v"


class SelfPlayMapping:
    """``policy_mapping_fn``: per episode, main at one random seat, pool opponents elsewhere.

    The draw depends only on the episode id, so all agents of one episode agree.
    """

    def __init__(self, agents: Iterable[str], pool: list[str], weights: list[float], seed: int) -> None:
        self.agents = list(agents)
        self.pool = list(pool)
        self.weights = list(weights)
        self.seed = seed

    def draw(self, episode_id: str) -> tuple[int, str]:
        rng = random.Random(zlib.crc32(f"{self.seed}:{episode_id}".encode()))
        return rng.randrange(len(self.agents)), rng.choices(self.pool, weights=self.weights)[0]

    def __call__(self, agent_id: str, episode: Any = None, **kwargs: Any) -> str:
        seat, opponent = self.draw(str(getattr(episode, "id_", episode)))
        return MAIN if self.agents.index(agent_id) == seat else opponent


def outcome(returns: dict[str, float], modules: dict[str, str]) -> tuple[str, str] | None:
    """(opponent module, "win"|"draw"|"loss") of one game, seen from main; None without main."""
    main_agents = [a for a, m in modules.items() if m == MAIN]
    others = [a for a, m in modules.items() if m != MAIN]
    if not main_agents or not others:
        return None
    mine = sum(returns.get(a, 0.0) for a in main_agents) / len(main_agents)
    theirs = sum(returns.get(a, 0.0) for a in others) / len(others)
    result = "win" if mine > theirs else "loss" if mine < theirs else "draw"
    return modules[others[0]], result


class SelfPlayManager:
    """The pool, the game record and the snapshot rule."""

    def __init__(self, config: Any, agents: Iterable[str], seed: int) -> None:
        self.config = config
        self.agents = list(agents)
        self.seed = seed
        self.pool: list[str] = [f"{SNAPSHOT_PREFIX}0"]
        self.next_version = 1
        self.window: deque[str] = deque(maxlen=config.window_episodes)
        self.per_opponent: dict[str, deque[str]] = {}
        self.last_snapshot_iteration = 0

    # -- opponents -----------------------------------------------------------
    def win_rate_against(self, module_id: str) -> float | None:
        games = self.per_opponent.get(module_id)
        return None if not games else sum(g == "win" for g in games) / len(games)

    def sampling_weights(self) -> list[float]:
        mode, n = self.config.opponent_sampling, len(self.pool)
        if mode == "latest" and n > 1:
            p = self.config.latest_probability
            return [(1 - p) / (n - 1)] * (n - 1) + [p]
        if mode == "prioritized":
            # Harder opponents (lower win rate of main against them) are drawn more often.
            return [1.0 - (self.win_rate_against(m) if self.win_rate_against(m) is not None else 0.5) + 0.05
                    for m in self.pool]
        return [1.0] * n

    def mapping(self) -> SelfPlayMapping:
        return SelfPlayMapping(self.agents, self.pool, self.sampling_weights(), self.seed)

    # -- scoring -------------------------------------------------------------
    def record(self, episodes: Iterable[dict[str, Any]]) -> dict[str, Any]:
        """Score one iteration's games; returns its telemetry summary."""
        counts = {"win": 0, "draw": 0, "loss": 0}
        for episode in episodes:
            scored = outcome(episode.get("returns", {}), episode.get("modules", {}))
            if scored is None:
                continue
            opponent, result = scored
            counts[result] += 1
            self.window.append(result)
            self.per_opponent.setdefault(opponent, deque(maxlen=self.config.window_episodes)).append(result)
        games = sum(counts.values())
        summary: dict[str, Any] = {"games": games, "pool": list(self.pool), "pool_size": len(self.pool),
                                   "window_games": len(self.window),
                                   "window_win_rate": self.window_win_rate()}
        for key, value in counts.items():
            summary[f"{key}_rate"] = value / games if games else None
        summary["win_rate_vs"] = {m: self.win_rate_against(m) for m in self.pool}
        return summary

    def window_win_rate(self) -> float | None:
        return sum(r == "win" for r in self.window) / len(self.window) if self.window else None

    def should_snapshot(self, iteration: int) -> bool:
        rate = self.window_win_rate()
        return (rate is not None and len(self.window) >= self.window.maxlen
                and rate >= self.config.snapshot_win_rate
                and iteration - self.last_snapshot_iteration >= self.config.min_iterations_between_snapshots)

    def admit(self, iteration: int) -> tuple[str, str | None]:
        """Name the new snapshot and the one it evicts (if the pool is full); update the pool."""
        new = f"{SNAPSHOT_PREFIX}{self.next_version}"
        self.next_version += 1
        evicted = None
        if len(self.pool) >= self.config.max_pool_size:
            if self.config.eviction == "weakest":
                evicted = max(self.pool, key=lambda m: self.win_rate_against(m) or 0.0)
            else:
                evicted = self.pool[0]
            self.pool.remove(evicted)
            self.per_opponent.pop(evicted, None)
        self.pool.append(new)
        self.window.clear()
        self.last_snapshot_iteration = iteration
        return new, evicted

    # -- checkpoints ---------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"pool": list(self.pool), "next_version": self.next_version,
                "window": list(self.window), "last_snapshot_iteration": self.last_snapshot_iteration,
                "per_opponent": {m: list(g) for m, g in self.per_opponent.items()}}

    def load(self, state: dict[str, Any]) -> None:
        self.pool = list(state["pool"])
        self.next_version = int(state["next_version"])
        self.window.extend(state.get("window", []))
        self.last_snapshot_iteration = int(state.get("last_snapshot_iteration", 0))
        for module_id, games in state.get("per_opponent", {}).items():
            self.per_opponent[module_id] = deque(games, maxlen=self.config.window_episodes)


# -- RLlib side (public Algorithm API only) --------------------------------------
def _learner_weights(algo: Any, module_id: str) -> Any:
    state = algo.learner_group.get_state(components=f"learner/rl_module/{module_id}")
    return state["learner"]["rl_module"][module_id]


def set_mapping(algo: Any, mapping: SelfPlayMapping) -> None:
    """Install a new mapping on the driver's config and every env runner."""
    algo.config._is_frozen = False
    algo.config.multi_agent(policy_mapping_fn=mapping)
    algo.config.freeze()

    def _set(runner: Any) -> bool:
        runner.config.multi_agent(policy_mapping_fn=mapping)
        return True

    algo.env_runner_group.foreach_env_runner(_set, local_env_runner=True)


def copy_main_into(algo: Any, module_id: str) -> None:
    """Give ``module_id`` main's current weights, in the learner and in every env runner."""
    weights = _learner_weights(algo, MAIN)
    algo.set_state({"learner_group": {"learner": {"rl_module": {module_id: weights}}}})

    def _copy(runner: Any, target: str = module_id) -> bool:
        runner.module[target].set_state(runner.module[MAIN].get_state())
        return True

    algo.env_runner_group.foreach_env_runner(_copy, local_env_runner=True)


def add_snapshot(algo: Any, module_id: str, mapping: SelfPlayMapping) -> None:
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    spec = RLModuleSpec.from_module(algo.learner_group._learner.module[MAIN]) \
        if getattr(algo.learner_group, "_learner", None) is not None \
        else RLModuleSpec.from_module(algo.get_module(MAIN))
    spec.inference_only = False
    algo.add_module(module_id=module_id, module_spec=spec, new_agent_to_module_mapping_fn=mapping,
                    new_should_module_be_updated=[MAIN])
    copy_main_into(algo, module_id)


def remove_snapshot(algo: Any, module_id: str, mapping: SelfPlayMapping) -> None:
    algo.remove_module(module_id, new_agent_to_module_mapping_fn=mapping, new_should_module_be_updated=[MAIN])


def snapshot_weights(algo: Any, module_id: str) -> dict[str, Any]:
    """The learner's weights of one module (for tests and checks)."""
    return _learner_weights(algo, module_id)
