"""How language-model agents decide together, and how their predictions of each other are scored.

Pure logic, testable without an env or a model:

- **prompts** for the three strategies: ``independent`` (an agent's rules, its last
  turns and its view), ``message_round`` (the same, plus the messages the others
  wrote this round, after each agent wrote its own) and ``central_planner`` (one
  prompt with every teammate's view, answered with a line ``<agent>: <action>`` per
  agent);
- **theory of mind**: an agent is first asked for a line ``PREDICT <agent>: <action>``
  per other agent; :class:`MindReading` keeps each prediction until its target next
  acts and then scores it (in turn-based games that is the target's next turn, in
  simultaneous ones the same step);
- **teams**: who shares a planner. In competitive envs every agent is alone; elsewhere
  agents whose ids share a prefix (``adversary_0``, ``adversary_1``) form a team.
"""

from __future__ import annotations

import random
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Sequence

from mosaic.llm.actions import Choice, parse_action
from mosaic.llm.backends import LLMClient

_PREDICTION = re.compile(r"^\W*predict\W+(?P<agent>[\w-]+)\s*[:=]\s*(?P<action>.+?)\s*$", re.IGNORECASE | re.MULTILINE)
_PLAN_LINE = r"^\W*{agent}\s*[:=]\s*(?P<action>.+?)\s*$"


def team_of(agent: str) -> str:
    """``adversary_1`` -> ``adversary``; an id without a numeric suffix is its own team."""
    head, sep, tail = agent.rpartition("_")
    return head if sep and tail.isdigit() else agent


def teams(agents: Sequence[str], competitive: bool) -> dict[str, list[str]]:
    if competitive:
        return {a: [a] for a in agents}
    out: dict[str, list[str]] = defaultdict(list)
    for agent in agents:
        out[team_of(agent)].append(agent)
    return dict(out)


# -- prompts ------------------------------------------------------------------------------------
def conversation(system: str, history: Sequence[tuple[str, str]], current: str) -> list[dict[str, str]]:
    """System rules, then earlier (view, action) turns, then the current view."""
    messages = [{"role": "system", "content": system}]
    for view, action in history:
        messages += [{"role": "user", "content": view}, {"role": "assistant", "content": f"ACTION: {action}"}]
    messages.append({"role": "user", "content": current})
    return messages


def with_messages(view: str, messages: dict[str, str]) -> str:
    if not messages:
        return view
    said = "\n".join(f"- {agent}: {text}" for agent, text in messages.items())
    return f"{view}\nMessages from the other agents this turn:\n{said}"


def with_predictions(view: str, predictions: dict[str, str | None]) -> str:
    made = {a: p for a, p in predictions.items() if p}
    if not made:
        return view
    return f"{view}\nYou predicted: " + "; ".join(f"{a} will play {p}" for a, p in made.items())


def message_request(words: int) -> str:
    return (f"Before anyone acts, write one short message (at most {words} words) to the other agents: what you "
            "intend, or what you suggest they do. Reply with the message only.")


def cut_message(text: str, words: int) -> str:
    return " ".join(text.split()[:words])


def prediction_request(targets: dict[str, Sequence[str]]) -> str:
    lines = "\n".join(f"PREDICT {agent}: <one of {', '.join(names)}>" for agent, names in targets.items())
    return ("Before you act, predict the next action of each other agent. Reply with exactly these lines:\n"
            + lines)


def planner_prompt(rules: str, views: dict[str, str], legal: dict[str, Sequence[str]]) -> list[dict[str, str]]:
    system = (f"{rules}\nYou are the planner of a team and choose the action of every agent in it. End your "
              "reply with one line '<agent>: <action>' per agent, each action being one of that agent's legal "
              "actions.")
    parts = [f"== {agent} ==\n{view}" for agent, view in views.items()]
    ask = "\n".join(f"{agent}: <one of {', '.join(legal[agent])}>" for agent in views)
    return [{"role": "system", "content": system},
            {"role": "user", "content": "\n\n".join(parts) + f"\n\nAnswer with:\n{ask}"}]


# -- reading replies ------------------------------------------------------------------------------
def parse_predictions(reply: str, targets: dict[str, Sequence[str]]) -> dict[str, str | None]:
    """``PREDICT <agent>: <action>`` lines -> the named action of each target (None: none readable)."""
    out: dict[str, str | None] = {agent: None for agent in targets}
    for found in _PREDICTION.finditer(reply):
        agent = found["agent"]
        if agent in targets and out[agent] is None:
            out[agent] = parse_action(f"ACTION: {found['action']}", targets[agent])
    return out


def parse_plan(reply: str, legal: dict[str, Sequence[str]]) -> dict[str, str | None]:
    """The last ``<agent>: <action>`` line for each agent naming a legal action (None: none)."""
    out: dict[str, str | None] = {}
    for agent, names in legal.items():
        lines = re.findall(_PLAN_LINE.format(agent=re.escape(agent)), reply, re.IGNORECASE | re.MULTILINE)
        out[agent] = next((a for a in (parse_action(f"ACTION: {line}", names) for line in reversed(lines))
                           if a is not None), None)
    return out


def plan_reminder(missing: dict[str, Sequence[str]]) -> str:
    return ("Your reply names no legal action for " + ", ".join(missing) + ". Answer again with one line per "
            "agent: " + "; ".join(f"{a}: one of {', '.join(n)}" for a, n in missing.items()))


def choose_plan(client: LLMClient, messages: list[dict[str, str]], legal: dict[str, Sequence[str]],
                rng: random.Random, retries: int = 1) -> dict[str, Choice]:
    """One planner reply for several agents: asked again for the agents it missed, then random for those."""
    conversation_ = list(messages)
    choices = {agent: Choice(action="", valid=False) for agent in legal}
    missing = dict(legal)
    for _attempt in range(retries + 1):
        reply = client.complete(conversation_)
        for agent in missing:
            choices[agent].replies.append(reply.text)
        # the call is recorded once, on the first agent still waiting for an action
        choices[next(iter(missing))].calls.append(reply.call)
        for agent, action in parse_plan(reply.text, missing).items():
            if action is not None:
                choices[agent].action, choices[agent].valid = action, True
        missing = {a: n for a, n in missing.items() if not choices[a].valid}
        if not missing:
            return choices
        conversation_ += [{"role": "assistant", "content": reply.text},
                          {"role": "user", "content": plan_reminder(missing)}]
    for agent, names in missing.items():
        choices[agent].action = rng.choice(list(names))
    return choices


# -- theory of mind -----------------------------------------------------------------------------------
@dataclass
class Scored:
    predictor: str
    target: str
    predicted: str | None
    actual: str
    made_at: int
    resolved_at: int

    @property
    def correct(self) -> bool:
        return self.predicted == self.actual


@dataclass
class MindReading:
    """Predictions waiting for their target's next action, and those already scored."""

    pending: dict[tuple[str, str], tuple[str | None, int]] = field(default_factory=dict)
    scored: list[Scored] = field(default_factory=list)

    def predict(self, predictor: str, predictions: dict[str, str | None], step: int) -> None:
        for target, action in predictions.items():
            self.pending[(predictor, target)] = (action, step)

    def acted(self, target: str, action: str, step: int) -> list[Scored]:
        """``target`` played ``action``: score every prediction waiting for it."""
        done = []
        for (predictor, who), (predicted, made_at) in list(self.pending.items()):
            if who == target:
                done.append(Scored(predictor, target, predicted, action, made_at, step))
                del self.pending[(predictor, who)]
        self.scored += done
        return done

    def end_episode(self) -> int:
        """Predictions whose target never acted again (the game ended first) are dropped; returns how many."""
        dropped = len(self.pending)
        self.pending.clear()
        return dropped


def tom_summary(scored: Sequence[Scored]) -> dict[str, Any]:
    """Accuracy over predictions made (an unreadable prediction counts as wrong), and how many were readable."""
    from mosaic.llm import scores

    out: dict[str, Any] = {"predictions": len(scored),
                           "accuracy": scores.rate(sum(s.correct for s in scored), len(scored)),
                           "readable": scores.rate(sum(s.predicted is not None for s in scored), len(scored))}
    pairs: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        pairs[f"{s.predictor}->{s.target}"].append(s)
    out["pairs"] = {pair: scores.rate(sum(s.correct for s in group), len(group)) for pair, group in pairs.items()}
    return out
