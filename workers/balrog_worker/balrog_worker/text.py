"""MiniGrid and BabyAI as text: what the agent sees, what it can do, and the prompts built from them.

The agent's partial view (``obs["image"]``, ``view × view`` cells of object, colour
and state, seen from the agent, who stands at the middle of the bottom row facing
up) becomes one line per thing in sight, placed by steps forward and to the side:
``a red ball 2 steps forward and 1 step left``. Walls are told as the nearest one
straight ahead, to the left and to the right. What the agent carries comes last.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
from minigrid.core.actions import Actions
from minigrid.core.constants import IDX_TO_COLOR, IDX_TO_OBJECT, STATE_TO_IDX

#: MiniGrid's seven actions as the model reads and names them, in the env's order.
ACTIONS: dict[str, str] = {
    "turn left": "turn 90 degrees to the left",
    "turn right": "turn 90 degrees to the right",
    "go forward": "move one step forward",
    "pick up": "pick up the object one step forward",
    "drop": "drop what you carry one step forward",
    "toggle": "open, close or unlock the door (or box) one step forward",
    "done": "say that the mission is complete",
}
ACTION_NAMES: tuple[str, ...] = tuple(ACTIONS)
ACTION_INDEX = {name: int(action) for name, action in zip(ACTION_NAMES, Actions)}
IDX_TO_STATE = {index: name for name, index in STATE_TO_IDX.items()}
SCENERY = {"unseen", "empty", "floor", "wall", "agent"}


def _steps(n: int, one: str, many: str) -> str:
    return f"{n} step {one}" if n == 1 else f"{n} steps {many}"


def place(forward: int, side: int) -> str:
    """Where a cell is from the agent: ``2 steps forward and 1 step left``."""
    parts = []
    if forward:
        parts.append(_steps(forward, "forward", "forward"))
    if side:
        word = "right" if side > 0 else "left"
        parts.append(_steps(abs(side), word, word))
    return " and ".join(parts) if parts else "here"


def thing(obj: str, colour: str, state: int) -> str:
    if obj == "door":
        return f"a {IDX_TO_STATE.get(state, 'closed')} {colour} door"
    if obj in ("lava",):
        return "lava"
    return f"a {colour} {obj}"


def describe_view(image: np.ndarray) -> list[str]:
    """One line per object in sight, nearest first, then the nearest walls ahead and to each side."""
    view = image.shape[0]
    me_x, me_y = view // 2, view - 1
    lines: list[tuple[int, str]] = []
    for x in range(view):
        for y in range(view):
            obj = IDX_TO_OBJECT.get(int(image[x, y, 0]), "unseen")
            if obj in SCENERY:
                continue
            forward, side = me_y - y, x - me_x
            colour = IDX_TO_COLOR.get(int(image[x, y, 1]), "grey")
            lines.append((forward + abs(side), f"{thing(obj, colour, int(image[x, y, 2]))} "
                                               f"{place(forward, side)}"))
    lines.sort()
    walls = []
    for label, cells in (("forward", [(me_x, me_y - d) for d in range(1, view)]),
                         ("left", [(me_x - d, me_y) for d in range(1, me_x + 1)]),
                         ("right", [(me_x + d, me_y) for d in range(1, view - me_x)])):
        for distance, (x, y) in enumerate(cells, start=1):
            if IDX_TO_OBJECT.get(int(image[x, y, 0])) == "wall":
                walls.append(f"a wall {_steps(distance, label, label)}")
                break
    return [text for _, text in lines] + walls


def describe(obs: dict[str, Any], carrying: Any = None) -> str:
    seen = describe_view(np.asarray(obs["image"]))
    lines = [f"- {line}" for line in seen] or ["- nothing but floor"]
    held = f"a {carrying.color} {carrying.type}" if carrying is not None else "nothing"
    return "\n".join(["You see:", *lines, f"You carry {held}."])


def system_prompt(env_id: str) -> str:
    actions = "\n".join(f"- {name}: {meaning}" for name, meaning in ACTIONS.items())
    return (f"You are an agent in the grid world {env_id}. Each turn you get your mission and what you see "
            "from where you stand, and you choose one action.\n"
            f"The actions:\n{actions}\n"
            "Think briefly if you like, then end your answer with one line 'ACTION: <action>', "
            "<action> being exactly one of the names above.")


def observation_prompt(mission: str, text: str) -> str:
    return f"Mission: {mission}\n{text}\nWhat do you do?"


def build_messages(env_id: str, history: Sequence[tuple[str, str]], current: str) -> list[dict[str, str]]:
    """The system prompt, the last turns (observation, chosen action), then the current observation."""
    messages = [{"role": "system", "content": system_prompt(env_id)}]
    for observation, action in history:
        messages += [{"role": "user", "content": observation}, {"role": "assistant", "content": f"ACTION: {action}"}]
    messages.append({"role": "user", "content": current})
    return messages
