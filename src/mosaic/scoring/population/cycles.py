"""The cycles of a meta-game's "beats" relation: transitivity, strongly connected components (Tarjan) and the
elementary cycles, enumerated up to a cap (numpy)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mosaic.scoring.population.metagame import MetaGame

#: The most elementary cycles listed per beats graph (then ``truncated`` says so).
MAX_CYCLES = 100
_CYCLE_STEPS = 200_000


@dataclass(frozen=True)
class Cycles:
    """The beats relation of a meta-game: ``beats`` the pairs (i, j) with i's payoff against j above 0,
    ``ties`` the even pairings; ``transitive``: no cycle. ``components``: the strongly connected components
    (players beating each other round), the ones beating the rest first; ``cycles``: the elementary cycles
    ``(a, b, ..., z)`` (a beats b ... z beats a, starting at the first player in the meta-game's order), at
    most ``MAX_CYCLES``: ``truncated`` says when more may exist."""

    players: tuple[str, ...]
    beats: tuple[tuple[str, str], ...]
    ties: tuple[tuple[str, str], ...]
    transitive: bool
    components: tuple[tuple[str, ...], ...]
    cycles: tuple[tuple[str, ...], ...]
    truncated: bool


def _beats(payoff: np.ndarray) -> np.ndarray:
    return payoff > 1e-12 * max(1.0, float(np.max(np.abs(payoff))) if payoff.size else 1.0)


def _components(edges: np.ndarray) -> list[list[int]]:
    """Tarjan's strongly connected components of the digraph ``edges`` ``(n, n)`` (bool), in reverse
    topological order (a component reached from another comes first); iterative."""
    n = len(edges)
    index, low, on_stack = [-1] * n, [0] * n, [False] * n
    stack: list[int] = []
    out: list[list[int]] = []
    counter = 0
    for root in range(n):
        if index[root] >= 0:
            continue
        work = [(root, 0)]
        while work:
            v, next_w = work.pop()
            if next_w == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack[v] = True
            for w in range(next_w, n):
                if not edges[v, w]:
                    continue
                if index[w] < 0:
                    work.append((v, w + 1))
                    work.append((w, 0))
                    break
                if on_stack[w]:
                    low[v] = min(low[v], index[w])
            else:
                if low[v] == index[v]:
                    component = []
                    while True:
                        w = stack.pop()
                        on_stack[w] = False
                        component.append(w)
                        if w == v:
                            break
                    out.append(sorted(component))
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[v])
    return out


def _elementary_cycles(edges: np.ndarray, components: list[list[int]],
                       cap: int) -> tuple[list[tuple[int, ...]], bool]:
    """The elementary cycles of ``edges`` ``(n, n)``, each once, starting at its lowest index, found by a
    depth-first search within each component from each start over higher indices; stops after ``cap`` cycles
    (or a bound on the steps) and says so."""
    found: list[tuple[int, ...]] = []
    steps = 0
    for component in components:
        if len(component) < 2:
            continue
        for start in component:
            path, blocked = [start], {start}
            work = [iter([w for w in component if w > start and edges[start, w]])]
            while work:
                steps += 1
                if steps > _CYCLE_STEPS:
                    return found, True
                w = next(work[-1], None)
                if w is None:
                    work.pop()
                    blocked.discard(path.pop())
                    continue
                if w in blocked:
                    continue
                if edges[w, start]:
                    found.append(tuple(path + [w]))
                    if len(found) >= cap:
                        return found, True
                path.append(w)
                blocked.add(w)
                work.append(iter([x for x in component if x > start and edges[w, x]]))
    return found, False


def _cycles_of(edges: np.ndarray, cap: int) -> tuple[list[list[int]], list[tuple[int, ...]], bool]:
    components = _components(edges)[::-1]
    found, truncated = _elementary_cycles(edges, components, cap)
    return components, found, truncated


def _check_cap(max_cycles: Any) -> int:
    if isinstance(max_cycles, bool) or not isinstance(max_cycles, (int, np.integer)) or max_cycles < 1:
        raise ValueError(f"max_cycles: an integer >= 1, got {max_cycles!r}")
    return int(max_cycles)


def cycles(meta: MetaGame, max_cycles: int = MAX_CYCLES) -> Cycles:
    """The beats relation of ``meta`` (``payoff (n, n)``): transitivity, strongly connected components,
    elementary cycles (at most ``max_cycles``; the enumeration is meant for populations of tens of players)."""
    cap = _check_cap(max_cycles)
    names = meta.players
    edges = _beats(meta.payoff)
    n = len(names)
    components, found, truncated = _cycles_of(edges, cap)
    return Cycles(players=names,
                  beats=tuple((names[i], names[j]) for i in range(n) for j in range(n) if edges[i, j]),
                  ties=tuple((names[i], names[j]) for i in range(n) for j in range(i + 1, n)
                             if not edges[i, j] and not edges[j, i]),
                  transitive=all(len(c) == 1 for c in components),
                  components=tuple(tuple(names[k] for k in c) for c in components),
                  cycles=tuple(tuple(names[k] for k in c) for c in found), truncated=truncated)
