"""Actions read from replies; a reply naming none is asked again, then replaced by a random legal action."""

from __future__ import annotations

import random

import pytest

from mosaic.llm.actions import choose_action, parse_action, reminder
from mosaic.llm.backends import ModelConfig, make_client
from mosaic.testing.stub_llm_server import StubServer

MINIGRID = ["turn left", "turn right", "move forward", "pick up", "drop", "toggle", "done"]
COLUMNS = [str(c) for c in range(7)]


@pytest.mark.parametrize("reply, legal, expected", [
    ("I will go ahead.\nACTION: move forward", MINIGRID, "move forward"),
    ("action = Turn  Left.", MINIGRID, "turn left"),
    ("**Action**: `drop`", MINIGRID, "drop"),
    ("Let me **move forward** now", MINIGRID, "move forward"),  # one legal phrase named
    ("Thinking about column 2 or 5... ACTION: 5", COLUMNS, "5"),  # the ACTION line settles it
    ("ACTION: 3\nno wait\nACTION: 4", COLUMNS, "4"),  # the last ACTION line wins
    ("ACTION: jump\nI will turn right", MINIGRID, "turn right"),  # an illegal ACTION line is ignored
    ("toggle or drop?", MINIGRID, None),  # two actions named, no ACTION line
    ("column 2 or 5", COLUMNS, None),
    ("I refuse to play.", MINIGRID, None),
    ("ACTION: 9", COLUMNS, None),  # not a legal column
    ("", MINIGRID, None),
])
def test_parse_action(reply, legal, expected):
    assert parse_action(reply, legal) == expected


@pytest.fixture
def client_for(monkeypatch):
    monkeypatch.setenv("MOSAIC_TEST_LLM_KEY", "local")
    servers = []

    def make(script):
        server = StubServer(script).start()
        servers.append(server)
        return server, make_client(ModelConfig(base_url=server.base_url, model=server.model,
                                               api_key_env="MOSAIC_TEST_LLM_KEY", backoff_s=0.0))
    yield make
    for server in servers:
        server.close()


def test_a_reply_naming_no_action_is_asked_again_with_the_legal_actions(client_for):
    server, client = client_for(["Hmm, hard to say.", "Fine. ACTION: pick up"])
    messages = [{"role": "user", "content": "What do you do?"}]
    choice = choose_action(client, messages, MINIGRID, random.Random(0), retries=2)
    assert (choice.action, choice.valid, choice.tries) == ("pick up", True, 2)
    second = server.requests[1]["messages"]  # the conversation goes on, with the reminder
    assert second[:2] == [messages[0], {"role": "assistant", "content": "Hmm, hard to say."}]
    assert second[2]["content"] == reminder(MINIGRID) and "move forward" in second[2]["content"]
    assert [c.attempts for c in choice.calls] == [1, 1]


def test_no_legal_action_after_the_retries_plays_a_seeded_random_one_marked_invalid(client_for):
    server, client = client_for(["ACTION: fly", "ACTION: teleport"])
    choice = choose_action(client, [{"role": "user", "content": "Your move"}], COLUMNS, random.Random(7), retries=1)
    assert not choice.valid and choice.tries == 2 and len(server.requests) == 2
    assert choice.action == random.Random(7).choice(COLUMNS)  # the run's generator, so repeatable
    assert choice.to_dict()["replies"] == ["ACTION: fly", "ACTION: teleport"]
