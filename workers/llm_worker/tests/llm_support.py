"""Helpers for the mosaic_llm worker's tests: model servers on 127.0.0.1 that answer by rules.

No model runs here. The servers speak the OpenAI protocol (``mosaic.testing.stub_llm_server``)
and answer with a few rules that read only the worker's own text: when those rules
win games or cover landmarks, the text told the truth about the board or the world.
"""

from __future__ import annotations

import re
from typing import Any

KEY_ENV = "MOSAIC_TEST_LLM_KEY"
LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def last_user(body: dict) -> str:
    return [m["content"] for m in body.get("messages", []) if m["role"] == "user"][-1]


# -- tic-tac-toe -------------------------------------------------------------------------------
def read_board(text: str) -> tuple[list[str], str]:
    """The 3x3 board (row by row, '.' empty) and our mark, from the worker's text."""
    mark = re.search(r"you are ([XO])", text).group(1)
    rows = re.findall(r"^([123])  ([.XO]) ([.XO]) ([.XO])$", text, re.MULTILINE)
    cells = [c for _row, *cs in rows for c in cs]
    return cells, mark


def square(index: int) -> str:
    return "abc"[index % 3] + str(index // 3 + 1)


def tictactoe_move(cells: list[str], mark: str) -> int:
    """Win if possible, else block, else the centre, a corner, any square."""
    other = "O" if mark == "X" else "X"
    for who in (mark, other):
        for line in LINES:
            marks = [cells[i] for i in line]
            if marks.count(who) == 2 and marks.count(".") == 1:
                return line[marks.index(".")]
    for i in (4, 0, 2, 6, 8, 1, 3, 5, 7):
        if cells[i] == ".":
            return i
    raise AssertionError("no empty square on the board")


def tictactoe_player(body: dict) -> str:
    text = last_user(body)
    if "PREDICT" in text:
        return "I cannot tell.\nPREDICT nobody: a1"
    cells, mark = read_board(text)
    return f"My move.\nACTION: {square(tictactoe_move(cells, mark))}"


# -- MPE ---------------------------------------------------------------------------------------
_AT = re.compile(r"^- (?P<name>[\w ]+?)(?: \([\w ]+\))? at \((?P<x>[-+.\d]+), (?P<y>[-+.\d]+)\)", re.MULTILINE)
_ME = re.compile(r"You are at \((?P<x>[-+.\d]+), (?P<y>[-+.\d]+)\)")


def toward_nearest_landmark(x: float, y: float, landmarks: list[tuple[float, float]]) -> str:
    lx, ly = min(landmarks, key=lambda p: (p[0] - x) ** 2 + (p[1] - y) ** 2)
    dx, dy = lx - x, ly - y
    if max(abs(dx), abs(dy)) < 0.05:
        return "stay"
    if abs(dx) >= abs(dy):
        return "right" if dx > 0 else "left"
    return "up" if dy > 0 else "down"


def mpe_world(text: str) -> tuple[tuple[float, float], dict[str, tuple[float, float]]]:
    me = _ME.search(text)
    return (float(me["x"]), float(me["y"])), {m["name"]: (float(m["x"]), float(m["y"])) for m in _AT.finditer(text)}


def spread_player(predict_stay: bool = False) -> Any:
    """Each agent heads for its nearest landmark; asked to predict, it applies the same rule to the others
    (or, with ``predict_stay``, always predicts 'stay')."""
    def answer(body: dict) -> str:
        text = last_user(body)
        me, seen = mpe_world(text)
        landmarks = [p for name, p in seen.items() if name.startswith("landmark")]
        if "PREDICT" in text:
            lines = []
            for agent in re.findall(r"^PREDICT (\S+):", text, re.MULTILINE):
                guess = "stay" if predict_stay else toward_nearest_landmark(*seen[agent], landmarks)
                lines.append(f"PREDICT {agent}: {guess}")
            return "\n".join(lines)
        return f"ACTION: {toward_nearest_landmark(*me, landmarks)}"
    return answer


# -- connect four ------------------------------------------------------------------------------
def read_c4(text: str) -> tuple[list[list[str]], str, list[int]]:
    mark = re.search(r"you are ([XO])", text).group(1)
    rows = [r.split() for r in re.findall(r"^((?:[.XO] ){6}[.XO])$", text, re.MULTILINE)]
    legal = [int(c) for c in re.search(r"Legal columns: (.*)", text).group(1).split(", ")]
    return rows, mark, legal


def _drop(rows: list[list[str]], col: int, mark: str) -> list[list[str]] | None:
    for r in range(5, -1, -1):
        if rows[r][col] == ".":
            out = [list(row) for row in rows]
            out[r][col] = mark
            return out
    return None


def _four(rows: list[list[str]], mark: str) -> bool:
    for r in range(6):
        for c in range(7):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + i * dr, c + i * dc) for i in range(4)]
                if all(0 <= y < 6 and 0 <= x < 7 and rows[y][x] == mark for y, x in cells):
                    return True
    return False


def connect_four_move(rows: list[list[str]], mark: str, legal: list[int]) -> int:
    """Win now, else stop the opponent winning next, else the legal column nearest the centre."""
    other = "O" if mark == "X" else "X"
    for who in (mark, other):
        for col in legal:
            after = _drop(rows, col - 1, who)
            if after is not None and _four(after, who):
                return col
    return min(legal, key=lambda c: abs(c - 4))


def connect_four_player(body: dict) -> str:
    rows, mark, legal = read_c4(last_user(body))
    return f"ACTION: {connect_four_move(rows, mark, legal)}"
