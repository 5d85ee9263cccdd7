"""Scripted players for classic board games: functions ``(agent, observation) -> action`` for
``scripted:mosaic.arena.heuristics:NAME`` (:mod:`mosaic.workerkit.player`)."""

from __future__ import annotations

import numpy as np


def _legal(observation) -> np.ndarray:
    return np.flatnonzero(np.asarray(observation["action_mask"]))


def first_legal(agent, observation) -> int:
    """The lowest-numbered legal move."""
    return int(_legal(observation)[0])


def _drop_row(board: np.ndarray, column: int) -> int | None:
    empty = np.flatnonzero((board[:, column, 0] == 0) & (board[:, column, 1] == 0))
    return int(empty[-1]) if len(empty) else None


def _wins(plane: np.ndarray) -> bool:
    rows, cols = plane.shape
    for r in range(rows):
        for c in range(cols):
            if not plane[r, c]:
                continue
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                if all(0 <= r + k * dr < rows and 0 <= c + k * dc < cols and plane[r + k * dr, c + k * dc]
                       for k in range(4)):
                    return True
    return False


def connect_four(agent, observation) -> int:
    """Connect four: win now if a drop wins, else block the opponent's winning drop, else the legal column
    nearest the centre. PettingZoo's board is (6, 7, 2): plane 0 the mover's pieces, plane 1 the opponent's."""
    board = np.asarray(observation["observation"])
    legal = [int(c) for c in _legal(observation)]
    for plane in (0, 1):
        for column in legal:
            row = _drop_row(board, column)
            if row is None:
                continue
            trial = board[:, :, plane].copy()
            trial[row, column] = 1
            if _wins(trial):
                return column
    return min(legal, key=lambda c: (abs(c - 3), c))
