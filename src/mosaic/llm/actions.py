"""An action read from a model's reply, asked again when the reply names none.

Prompts ask for a last line ``ACTION: <action>``. :func:`parse_action` takes the
last such line when it names a legal action; failing that, the one legal action
the reply mentions as a whole word or phrase (case and spacing ignored). A reply
that names no legal action, or several without an ``ACTION:`` line, names none.

:func:`choose_action` asks the model, and when the reply names no legal action
asks again (``retries`` times) with the legal actions spelled out; then it takes a
random legal action from the run's seeded generator and marks the choice invalid,
so invalid-action rates can be counted and the episode goes on.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Sequence

from mosaic.llm.backends import Call, LLMClient

ACTION_LINE = re.compile(r"\baction\W*?[:=]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s-]", " ", text.lower()).split())


def parse_action(reply: str, legal: Sequence[str]) -> str | None:
    """The legal action ``reply`` names, or None (see the module's doc)."""
    by_norm = {_norm(action): action for action in legal}
    for said in reversed(ACTION_LINE.findall(reply)):
        said = _norm(said.strip("`'\" ."))
        if said in by_norm:
            return by_norm[said]
    text = f" {_norm(reply)} "
    named = {action for key, action in by_norm.items() if key and f" {key} " in text}
    # "move forward" also contains "forward": a phrase inside a longer named phrase does not count
    named = {a for a in named if not any(a != b and f" {_norm(a)} " in f" {_norm(b)} " for b in named)}
    return next(iter(named)) if len(named) == 1 else None


def reminder(legal: Sequence[str]) -> str:
    return ("Your reply names no legal action. Answer again and end with one line "
            f"'ACTION: <action>', where <action> is exactly one of: {', '.join(legal)}.")


@dataclass
class Choice:
    """What was played and how it was got: the replies, their calls, and whether the model chose it."""

    action: str
    valid: bool
    replies: list[str] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)

    @property
    def tries(self) -> int:
        return len(self.replies)

    def to_dict(self) -> dict:
        return {"action": self.action, "valid": self.valid, "replies": self.replies,
                "calls": [c.to_dict() for c in self.calls]}


def choose_action(client: LLMClient, messages: list[dict[str, str]], legal: Sequence[str], rng: random.Random,
                  retries: int = 1) -> Choice:
    """Ask until a reply names a legal action (at most ``retries`` more times), else play a random one."""
    if not legal:
        raise ValueError("no legal action to choose from")
    conversation = list(messages)
    choice = Choice(action="", valid=False)
    for attempt in range(retries + 1):
        reply = client.complete(conversation)
        choice.replies.append(reply.text)
        choice.calls.append(reply.call)
        action = parse_action(reply.text, legal)
        if action is not None:
            choice.action, choice.valid = action, True
            return choice
        conversation += [{"role": "assistant", "content": reply.text}, {"role": "user", "content": reminder(legal)}]
    choice.action = rng.choice(list(legal))
    return choice
