"""Helpers for the balrog worker's tests: its environment, the real CLI, and model servers on 127.0.0.1.

No model runs here. The tests' server speaks the OpenAI protocol
(``mosaic.testing.stub_llm_server``) and answers either from a script or with
:func:`goal_seeker`, a few rules that read the worker's own text of the
observation and head for the object the mission names: when that wins episodes,
the text said truthfully where things are.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mosaic.testing import WorkerHome

REPO = Path(__file__).resolve().parents[3]
KEY_ENV = "MOSAIC_TEST_LLM_KEY"
SEEN = re.compile(r"^- an? (?P<what>[\w ]+?) (?:(?P<f>\d+) steps? forward)?(?: and )?"
                  r"(?:(?P<s>\d+) steps? (?P<side>left|right))?$")


def _last_user(body: dict) -> str:
    return [m["content"] for m in body.get("messages", []) if m["role"] == "user"][-1]


def goal_seeker(body: dict) -> str:
    """Rules over the observation text: find what the mission names, turn to it, walk to it."""
    text = _last_user(body)
    mission = re.search(r"Mission: (.*)", text).group(1)
    walls_ahead = "- a wall 1 step forward" in text
    for line in text.splitlines():
        seen = SEEN.match(line)
        if not seen or seen["what"].startswith("wall") or " ".join(seen["what"].split()[-2:]) not in mission:
            continue
        forward, side = int(seen["f"] or 0), int(seen["s"] or 0)
        if side and (forward == 0 or walls_ahead):
            return f"It is to my {seen['side']}.\nACTION: turn {seen['side']}"
        return "Closer.\nACTION: go forward"
    return "I do not see it.\nACTION: turn left"


class Home(WorkerHome):
    def evaluation(self, name: str, server: Any, **fields: Any) -> Path:
        """A config file for an evaluation against ``server`` (None: the model section says it all)."""
        endpoint = {"base_url": server.base_url, "model": server.model} if server is not None else {}
        model = {**endpoint, "api_key_env": KEY_ENV, "backoff_s": 0.01, **fields.pop("model", {})}
        return self.config(name, model=model, **fields)
