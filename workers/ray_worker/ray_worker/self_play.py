"""Self-play and league training with pools of frozen snapshots, driven from the training loop.

Agents are split into **sides**. In a symmetric game (connect_four, chess) there
is one side holding every seat: the learner ``main`` sits at one random seat and
an opponent takes the others. In an asymmetric game (simple_tag: adversaries
against good agents) every side has its own learner ``main_<side>``, and the
other sides are played by frozen snapshots of *their* learners: team-wise
self-play.

**Learners** are the trained modules: one ``main`` per side and, for league
training, ``main_exploiters`` exploiters per side. Each episode has one focus
learner. A main's opponents are drawn from the frozen pool (its own past
snapshots, or the other sides' in asymmetric games, plus exploiter snapshots
and fixed baselines such as ``random``); an exploiter's opponent is always the
current main, whose weaknesses it is there to find.

:class:`League` scores every game from the focus learner's point of view. When a
main's win rate against the pool over a window passes the threshold (after a
minimum number of iterations), a frozen copy joins its side's pool, evicting the
oldest or weakest snapshot when the pool is full. When an exploiter's win rate
against main passes its threshold, a frozen copy of the exploiter joins the pool
(main must now learn to beat it) and the exploiter restarts from main's weights.
Frozen modules are never in ``policies_to_train``, so they never change.

This module imports no Ray; the functions at the bottom take the algorithm and
call RLlib's public ``add_module``/``remove_module``/``set_state``.
"""

from __future__ import annotations

import random
import zlib
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

MAIN = "main"
EXPLOITER = "exploiter"
SNAPSHOT_SUFFIX = "_v"
#: The one side of a symmetric game.
ALL_SEATS = "all"
#: Fixed (never trained) opponents a pool can hold besides snapshots.
BASELINES = ("random",)
#: Bootstrap resamples behind the ratings reported each iteration (a few hundred milliseconds).
RATING_REPS = 100


@dataclass(frozen=True)
class Learner:
    module_id: str
    side: str
    role: str  # MAIN or EXPLOITER


def learner_ids(sides: Mapping[str, tuple[str, ...]], exploiters: int) -> list[Learner]:
    """The trained modules of a league: a main per side, then its exploiters."""
    symmetric = list(sides) == [ALL_SEATS]
    out = []
    for side in sides:
        main = MAIN if symmetric else f"{MAIN}_{side}"
        out.append(Learner(main, side, MAIN))
        for i in range(exploiters):
            out.append(Learner(f"{EXPLOITER}_{i}" if symmetric else f"{EXPLOITER}_{side}_{i}", side, EXPLOITER))
    return out


def baseline_id(name: str, side: str) -> str:
    return name if side == ALL_SEATS else f"{name}_{side}"


def snapshot_id(learner: str, version: int) -> str:
    return f"{learner}{SNAPSHOT_SUFFIX}{version}"


def snapshot_owner(module_id: str) -> str | None:
    """The learner a snapshot was frozen from (``main_agent_v3`` → ``main_agent``); None if not a snapshot."""
    owner, sep, version = module_id.rpartition(SNAPSHOT_SUFFIX)
    return owner if sep and owner and version.isdigit() else None


class EpisodeOrdinals:
    """This process's episodes numbered in the order they start, with the env runner's index: a key for the
    draw that the same seed repeats. RLlib's own episode ids are random (uuid4), so a draw keyed by them gave
    every run of a league another schedule of games. One per process: it outlives the mapping (a new one is
    installed whenever the pool changes) and is reset when a run builds its league."""

    KEEP = 4096  # ids remembered: an episode resumed in a later sample() keeps its number

    def __init__(self) -> None:
        self.runner = 0
        self.reset()

    def reset(self) -> None:
        self.ids: dict[str, int] = {}
        self.next = 0

    def key(self, episode_id: str) -> str:
        ordinal = self.ids.get(episode_id)
        if ordinal is None:
            ordinal = self.ids[episode_id] = self.next
            self.next += 1
            if len(self.ids) > self.KEEP:
                del self.ids[next(iter(self.ids))]  # the oldest
        return f"{self.runner}:{ordinal}"


#: Set by the env creator in each env runner (its worker_index); reset by the runtime when it builds a league.
ORDINALS = EpisodeOrdinals()


class SelfPlayMapping:
    """``policy_mapping_fn``: per episode, a focus learner and its opponents, seat by seat.

    The draw depends only on the seed and the episode's key (its env runner and its number there,
    :class:`EpisodeOrdinals`), so all agents of one episode agree, and the same seed draws the same games.
    """

    def __init__(self, sides: Mapping[str, Iterable[str]], learners: list[Learner],
                 pools: Mapping[str, list[str]], weights: Mapping[str, list[float]], seed: int,
                 exploiter_share: float = 0.0) -> None:
        self.sides = {s: list(a) for s, a in sides.items()}
        self.learners = list(learners)
        self.pools = {s: list(p) for s, p in pools.items()}
        self.weights = {s: list(w) for s, w in weights.items()}
        self.seed = seed
        self.exploiter_share = exploiter_share
        self._cache: tuple[str, dict[str, str]] | None = None

    def main_of(self, side: str) -> str:
        return next(l.module_id for l in self.learners if l.side == side and l.role == MAIN)

    def draw(self, episode_id: str) -> dict[str, str]:
        """agent → module for one episode."""
        rng = random.Random(zlib.crc32(f"{self.seed}:{episode_id}".encode()))
        side = rng.choice(sorted(self.sides))
        exploiters = [l for l in self.learners if l.side == side and l.role == EXPLOITER]
        focus = rng.choice(exploiters) if exploiters and rng.random() < self.exploiter_share \
            else next(l for l in self.learners if l.side == side and l.role == MAIN)

        def opponent(of_side: str) -> str:
            if focus.role == EXPLOITER:
                return self.main_of(of_side)
            return rng.choices(self.pools[of_side], weights=self.weights[of_side])[0]

        if list(self.sides) == [ALL_SEATS]:
            agents = self.sides[ALL_SEATS]
            seat = rng.randrange(len(agents))
            other = opponent(ALL_SEATS)
            return {a: focus.module_id if i == seat else other for i, a in enumerate(agents)}
        mapping = {a: focus.module_id for a in self.sides[side]}
        for other_side, agents in self.sides.items():
            if other_side != side:
                module = opponent(other_side)
                mapping.update({a: module for a in agents})
        return mapping

    def __call__(self, agent_id: str, episode: Any = None, **kwargs: Any) -> str:
        episode_id = str(getattr(episode, "id_", episode))
        if self._cache is None or self._cache[0] != episode_id:
            self._cache = (episode_id, self.draw(ORDINALS.key(episode_id)))
        return self._cache[1][agent_id]


def outcome(returns: Mapping[str, float], modules: Mapping[str, str], learner: str,
            win_return: float | None = None) -> tuple[str, str] | None:
    """(opponent module, "win"|"draw"|"loss") of one game seen from ``learner``; None if it did not play.

    A side wins when its agents' mean return beats the mean return of everyone
    else, or, given ``win_return`` (for general-sum games, where the sides'
    returns are not comparable), when it reaches that return; then there are no draws.
    """
    mine_agents = [a for a, m in modules.items() if m == learner]
    others = [a for a, m in modules.items() if m != learner]
    if not mine_agents or not others:
        return None
    mine = sum(returns.get(a, 0.0) for a in mine_agents) / len(mine_agents)
    if win_return is not None:
        return modules[others[0]], "win" if mine >= win_return else "loss"
    theirs = sum(returns.get(a, 0.0) for a in others) / len(others)
    result = "win" if mine > theirs else "loss" if mine < theirs else "draw"
    return modules[others[0]], result


class League:
    """Sides, learners, pools, the game record and the snapshot rules."""

    def __init__(self, config: Any, sides: Mapping[str, Iterable[str]], seed: int) -> None:
        self.config = config
        self.sides = {s: tuple(a) for s, a in sides.items()}
        self.seed = seed
        self.learners = learner_ids(self.sides, getattr(config, "main_exploiters", 0))
        self.win_returns = {str(s): float(v) for s, v in (getattr(config, "win_returns", None) or {}).items()}
        self.baselines = {s: [baseline_id(b, s) for b in getattr(config, "baselines", [])] for s in self.sides}
        #: Frozen snapshots per side, oldest first (baselines are kept apart: never evicted).
        self.snapshots: dict[str, list[str]] = {s: [snapshot_id(self.main_of(s), 0)] for s in self.sides}
        self.next_version: dict[str, int] = {l.module_id: 1 for l in self.learners}
        window = config.window_episodes
        self.windows: dict[str, deque[str]] = {l.module_id: deque(maxlen=window) for l in self.learners}
        self.per_opponent: dict[str, dict[str, deque[str]]] = {l.module_id: {} for l in self.learners}
        self.last_event_iteration: dict[str, int] = {l.module_id: 0 for l in self.learners}
        #: every scored game once, for the ratings: (version, opponent version) -> {score: count}
        self.rated: dict[tuple[str, str], dict[float, int]] = {}

    # -- who is who ------------------------------------------------------------
    @property
    def symmetric(self) -> bool:
        return list(self.sides) == [ALL_SEATS]

    def main_of(self, side: str) -> str:
        return next(l.module_id for l in self.learners if l.side == side and l.role == MAIN)

    def learner(self, module_id: str) -> Learner | None:
        return next((l for l in self.learners if l.module_id == module_id), None)

    @property
    def trainable(self) -> list[str]:
        return [l.module_id for l in self.learners]

    def pool_of(self, side: str) -> list[str]:
        return [*self.baselines[side], *self.snapshots[side]]

    @property
    def pool(self) -> list[str]:
        """Every frozen module, side by side."""
        return [m for s in self.sides for m in self.pool_of(s)]

    # -- opponents -------------------------------------------------------------
    def win_rate(self, learner: str, opponent: str) -> float | None:
        games = self.per_opponent.get(learner, {}).get(opponent)
        return None if not games else sum(g == "win" for g in games) / len(games)

    def _sides_main_rate(self, opponent: str, side: str) -> float | None:
        """How often the mains that face ``side``'s pool beat ``opponent``."""
        rates = [self.win_rate(l.module_id, opponent) for l in self.learners
                 if l.role == MAIN and (self.symmetric or l.side != side)]
        rates = [r for r in rates if r is not None]
        return sum(rates) / len(rates) if rates else None

    def sampling_weights(self, side: str) -> list[float]:
        pool, mode = self.pool_of(side), self.config.opponent_sampling
        n = len(pool)
        if mode == "latest" and n > 1:
            p = self.config.latest_probability
            return [(1 - p) / (n - 1)] * (n - 1) + [p]
        if mode == "prioritized":
            # Harder opponents (main beats them less often) are drawn more often.
            out = []
            for m in pool:
                rate = self._sides_main_rate(m, side)
                out.append(1.0 - (0.5 if rate is None else rate) + 0.05)
            return out
        return [1.0] * n

    def mapping(self) -> SelfPlayMapping:
        return SelfPlayMapping(self.sides, self.learners, {s: self.pool_of(s) for s in self.sides},
                               {s: self.sampling_weights(s) for s in self.sides}, self.seed,
                               getattr(self.config, "exploiter_episode_share", 0.0))

    # -- scoring -----------------------------------------------------------------
    def record(self, episodes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
        """Score one iteration's games; returns its telemetry summary."""
        counts = {l.module_id: {"win": 0, "draw": 0, "loss": 0} for l in self.learners}
        frozen = set(self.pool)
        mains = {self.main_of(s) for s in self.sides}
        for episode in episodes:
            returns, modules = episode.get("returns", {}), episode.get("modules", {})
            present = set(modules.values())
            for learner in self.learners:
                scored = outcome(returns, modules, learner.module_id, self.win_returns.get(learner.side))
                if scored is None:
                    continue
                opponent, result = scored
                opponents = present - {learner.module_id}
                # A main's window counts games against the frozen pool; an exploiter's, games against main.
                counts_for_window = opponents <= frozen if learner.role == MAIN else bool(opponents & mains)
                if not counts_for_window:
                    if learner.role == MAIN and opponents & set(self.trainable):
                        self._remember(learner.module_id, opponent, result)  # main vs an exploiter: info only
                    continue
                counts[learner.module_id][result] += 1
                self.windows[learner.module_id].append(result)
                self._remember(learner.module_id, opponent, result)
                self._rate(learner.module_id, opponent, result)
        return self.summary(counts)

    # -- ratings over training ------------------------------------------------------
    def version(self, module_id: str) -> str:
        """The name a module's games are rated under: a learner's, the snapshot it trains towards (``main_v3``
        after ``main_v2`` was frozen: the games it plays until then are that version's); a frozen module's,
        its own."""
        version = self.next_version.get(module_id)
        return module_id if version is None else snapshot_id(module_id, version)

    def _rate(self, learner: str, opponent: str, result: str) -> None:
        key = (self.version(learner), self.version(opponent))
        tally = self.rated.setdefault(key, {})
        score = {"win": 1.0, "draw": 0.5, "loss": 0.0}[result]
        tally[score] = tally.get(score, 0) + 1

    def ratings(self, reps: int = RATING_REPS, seed: int = 0) -> dict[str, Any] | None:
        """Bradley-Terry ratings (Elo scale) of every version that played: the snapshots, the baselines and
        each learner's current version, anchored at the first main's initial weights (``main_v0`` = 1000),
        with percentile intervals from ``reps`` bootstrap resamples within pairings (:mod:`mosaic.scoring.ratings`).
        A learner's version is rated from the games it played while training towards that snapshot, so its
        rating is an average over that stretch of training, not of its final weights. None before any game."""
        from mosaic.scoring.ratings import Game, rating_bootstrap

        games = [Game(a, b, score, None) for (a, b), tally in sorted(self.rated.items())
                 for score, n in sorted(tally.items()) for _ in range(n)]
        if not games:
            return None
        players = {g.a for g in games} | {g.b for g in games}
        first = snapshot_id(self.main_of(next(iter(self.sides))), 0)
        anchor = first if first in players else None
        try:
            boot = rating_bootstrap(games, reps=reps, seed=seed, first_move_advantage=False, anchor=anchor)
        except ValueError as exc:  # versions that never met anyone the anchor's group met
            return {"games": len(games), "note": str(exc)}
        return {"anchor": anchor, "games": len(games), "reps": reps,
                "elo": {m: round(iv.point, 1) for m, iv in boot.intervals.items()},
                "low": {m: round(iv.low, 1) for m, iv in boot.intervals.items()},
                "high": {m: round(iv.high, 1) for m, iv in boot.intervals.items()},
                "training": {l.module_id: self.version(l.module_id) for l in self.learners},
                "notes": list(boot.notes)}

    def _remember(self, learner: str, opponent: str, result: str) -> None:
        self.per_opponent[learner].setdefault(opponent, deque(maxlen=self.config.window_episodes)).append(result)

    def window_win_rate(self, learner: str = MAIN) -> float | None:
        window = self.windows.get(learner)
        return sum(r == "win" for r in window) / len(window) if window else None

    def summary(self, counts: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
        learners = {}
        for l in self.learners:
            c = counts[l.module_id]
            games = sum(c.values())
            learners[l.module_id] = {
                "role": l.role, "side": l.side, "games": games,
                **{f"{k}_rate": (v / games if games else None) for k, v in c.items()},
                "window_games": len(self.windows[l.module_id]),
                "window_win_rate": self.window_win_rate(l.module_id),
                "win_rate_vs": {m: self.win_rate(l.module_id, m) for m in self.per_opponent[l.module_id]}}
        main_counts = {k: sum(counts[l.module_id][k] for l in self.learners if l.role == MAIN)
                       for k in ("win", "draw", "loss")}
        games = sum(main_counts.values())
        main_ids = [l.module_id for l in self.learners if l.role == MAIN]
        windows = [r for r in (self.window_win_rate(m) for m in main_ids) if r is not None]
        out: dict[str, Any] = {
            "games": games, **{f"{k}_rate": (v / games if games else None) for k, v in main_counts.items()},
            "window_win_rate": sum(windows) / len(windows) if windows else None,
            "window_games": min(len(self.windows[m]) for m in main_ids),
            "pool": self.pool, "pool_size": len(self.pool),
            "pools": {s: self.pool_of(s) for s in self.sides},
            "win_rate_vs": {m: self._sides_main_rate(m, s) for s in self.sides for m in self.pool_of(s)},
            "learners": learners,
        }
        ratings = self.ratings()
        if ratings is not None:
            out["ratings"] = ratings
        return out

    # -- snapshot rules ------------------------------------------------------------
    def _ready(self, learner: Learner, iteration: int) -> bool:
        window = self.windows[learner.module_id]
        rate = self.window_win_rate(learner.module_id)
        bar = self.config.snapshot_win_rate if learner.role == MAIN else self.config.exploiter_win_rate
        return (rate is not None and len(window) >= window.maxlen and rate >= bar
                and iteration - self.last_event_iteration[learner.module_id]
                >= self.config.min_iterations_between_snapshots)

    def due(self, iteration: int) -> list[Learner]:
        """Learners whose window has earned a snapshot this iteration."""
        return [l for l in self.learners if self._ready(l, iteration)]

    def stale(self, iteration: int) -> list[Learner]:
        """Exploiters that found no weakness within ``exploiter_patience_iterations``: restart them from main."""
        patience = getattr(self.config, "exploiter_patience_iterations", 0)
        if not patience:
            return []
        out = [l for l in self.learners if l.role == EXPLOITER
               and iteration - self.last_event_iteration[l.module_id] >= patience]
        for learner in out:
            self.windows[learner.module_id].clear()
            self.last_event_iteration[learner.module_id] = iteration
        return out

    def should_snapshot(self, iteration: int) -> bool:
        return bool(self.due(iteration))

    def admit(self, iteration: int, learner: str | None = None) -> tuple[str, str | None]:
        """Name ``learner``'s new snapshot and the one it evicts (if its side's pool is full)."""
        owner = self.learner(learner or self.learners[0].module_id)
        assert owner is not None
        new = snapshot_id(owner.module_id, self.next_version[owner.module_id])
        self.next_version[owner.module_id] += 1
        snapshots = self.snapshots[owner.side]
        evicted = None
        if len(snapshots) >= self.config.max_pool_size:
            if self.config.eviction == "weakest":
                evicted = max(snapshots, key=lambda m: self._sides_main_rate(m, owner.side) or 0.0)
            else:
                evicted = snapshots[0]
            snapshots.remove(evicted)
            for games in self.per_opponent.values():
                games.pop(evicted, None)
        snapshots.append(new)
        self.windows[owner.module_id].clear()
        self.last_event_iteration[owner.module_id] = iteration
        return new, evicted

    # -- checkpoints ---------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"format": 2, "sides": {s: list(a) for s, a in self.sides.items()},
                "snapshots": {s: list(p) for s, p in self.snapshots.items()},
                "next_version": dict(self.next_version),
                "windows": {m: list(w) for m, w in self.windows.items()},
                "last_event_iteration": dict(self.last_event_iteration),
                "per_opponent": {l: {m: list(g) for m, g in o.items()} for l, o in self.per_opponent.items()},
                "rated": [[a, b, {str(k): v for k, v in t.items()}] for (a, b), t in self.rated.items()]}

    def load(self, state: Mapping[str, Any]) -> None:
        if state.get("format") != 2:
            raise ValueError("this checkpoint's self-play state is from an older format")
        if {s: list(a) for s, a in state["sides"].items()} != {s: list(a) for s, a in self.sides.items()}:
            raise ValueError(f"the checkpoint's sides {state['sides']} differ from this run's {self.sides}")
        self.snapshots = {s: list(p) for s, p in state["snapshots"].items()}
        self.next_version.update({k: int(v) for k, v in state["next_version"].items()})
        for module_id, games in state.get("windows", {}).items():
            if module_id in self.windows:
                self.windows[module_id].extend(games)
        self.last_event_iteration.update({k: int(v) for k, v in state.get("last_event_iteration", {}).items()})
        for learner, opponents in state.get("per_opponent", {}).items():
            if learner in self.per_opponent:
                for module_id, games in opponents.items():
                    self.per_opponent[learner][module_id] = deque(games, maxlen=self.config.window_episodes)
        self.rated = {(a, b): {float(k): int(v) for k, v in tally.items()} for a, b, tally in state.get("rated", [])}


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


def copy_weights(algo: Any, source: str, target: str) -> None:
    """Give ``target`` the current weights of ``source``, in the learner and in every env runner."""
    weights = _learner_weights(algo, source)
    algo.set_state({"learner_group": {"learner": {"rl_module": {target: weights}}}})

    def _copy(runner: Any) -> bool:
        runner.module[target].set_state(runner.module[source].get_state())
        return True

    # Runners also sync from the learner each iteration; copying now keeps the very next
    # episodes consistent.
    algo.env_runner_group.foreach_env_runner(_copy, local_env_runner=True)


def add_snapshot(algo: Any, module_id: str, mapping: SelfPlayMapping, source: str = MAIN,
                 trainable: list[str] | None = None) -> None:
    """Add a frozen module ``module_id`` holding ``source``'s current weights."""
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    learner = getattr(algo.learner_group, "_learner", None)
    spec = RLModuleSpec.from_module(learner.module[source] if learner is not None else algo.get_module(source))
    spec.inference_only = False
    algo.add_module(module_id=module_id, module_spec=spec, new_agent_to_module_mapping_fn=mapping,
                    new_should_module_be_updated=list(trainable or [MAIN]))
    copy_weights(algo, source, module_id)


def remove_snapshot(algo: Any, module_id: str, mapping: SelfPlayMapping,
                    trainable: list[str] | None = None) -> None:
    algo.remove_module(module_id, new_agent_to_module_mapping_fn=mapping,
                       new_should_module_be_updated=list(trainable or [MAIN]))


def snapshot_weights(algo: Any, module_id: str) -> dict[str, Any]:
    """The learner's weights of one module (for tests and checks)."""
    return _learner_weights(algo, module_id)
