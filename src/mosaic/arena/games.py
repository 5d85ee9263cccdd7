"""A tournament's journaled games as rated games: what the standings rate and the adaptive schedule weighs.

Both :mod:`mosaic.arena.standings` and :class:`mosaic.arena.tournament.Tournament` (its adaptive schedule) read
the journal's games through here, so neither imports the other to do it. The ratings (numpy and scipy, seconds to
import) are imported where games are rated, not with this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping

if TYPE_CHECKING:
    from mosaic.scoring.ratings import Game


def label_returns(game: Mapping[str, Any]) -> dict[str, float]:
    """Each player label's returns in a journaled game, summed over the agents it seated."""
    out: dict[str, float] = {}
    for agent, label in game["seats"].items():
        out[label] = out.get(label, 0.0) + float(game["returns"][agent])
    return out


def rated_games(games: Iterable[Mapping[str, Any]], teams: bool = False) -> list[Game]:
    """Journaled games (``Tournament.games``) as rated games. A two-player game: the first mover as ``a``
    (seat 0), 1 / 0.5 / 0 by the returns. A team game (``teams``: the spec has ``sides``): its returns are on
    each side's own scale (general-sum), so the two games of a pair (one env seed, sides swapped) give one
    comparison per side, with no first mover: the player whose team did better on that side, on that seed,
    wins it (equal returns: a draw). A pair missing a game counts nothing yet."""
    from mosaic.scoring.ratings import Game

    ordered = sorted(games, key=lambda g: (g["pairing"], g["game"]))
    if teams:
        return _paired_side_games(ordered)
    out = []
    for g in ordered:
        scores = label_returns(g)
        first, second = scores[g["first"]], scores[g["second"]]
        out.append(Game(g["first"], g["second"], 1.0 if first > second else 0.0 if first < second else 0.5, 0))
    return out


def _paired_side_games(games: list[Mapping[str, Any]]) -> list[Game]:
    from mosaic.scoring.ratings import Game

    pairs: dict[tuple[str, int], list[Mapping[str, Any]]] = {}
    for g in games:
        pairs.setdefault((g["pairing"], int(g["game"]) // 2), []).append(g)
    out = []
    for pair in pairs.values():
        if len(pair) != 2:
            continue
        one, two = pair
        for side in sorted(set(one["sides"].values())):
            p1 = next(label for label, s in one["sides"].items() if s == side)
            p2 = next(label for label, s in two["sides"].items() if s == side)
            r1, r2 = float(one["teams"][p1]), float(two["teams"][p2])
            out.append(Game(p1, p2, 1.0 if r1 > r2 else 0.0 if r1 < r2 else 0.5, None))
    return out
