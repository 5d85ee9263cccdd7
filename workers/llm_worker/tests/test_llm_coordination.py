"""Coordination and theory of mind without an env: prompts, parsing, scoring, teams; and every env's text."""

from __future__ import annotations

import random

import numpy as np
import pytest

from llm_worker import coordination as co
from llm_worker.text import MPE_MOVES, Unsupported, View, api_type, coverage, describer_for
from mosaic.workerkit.envs import available_env_ids, make_env, reward_structure
from mosaic.llm.backends import ModelConfig, make_client
from mosaic.testing.stub_llm_server import StubServer

MOVES = list(MPE_MOVES)


def test_predictions_are_read_per_agent_and_unknown_lines_ignored():
    reply = "Thinking...\nPREDICT agent_1: Up\npredict agent_2 = move left\nPREDICT agent_9: up\nPREDICT agent_1: down"
    got = co.parse_predictions(reply, {"agent_1": MOVES, "agent_2": MOVES, "agent_3": MOVES})
    # the first readable line per agent counts; "move left" names no move (there is no such action)
    assert got == {"agent_1": "up", "agent_2": "left", "agent_3": None}


def test_plan_lines_name_each_agent_and_only_legal_actions_count():
    legal = {"agent_0": ["left", "right"], "agent_1": ["stay", "up"]}
    assert co.parse_plan("agent_0: right\nagent_1: up", legal) == {"agent_0": "right", "agent_1": "up"}
    assert co.parse_plan("agent_0: fly\nAGENT_1 = stay", legal) == {"agent_0": None, "agent_1": "stay"}
    assert co.parse_plan("agent_0: left\nagent_0: right", legal)["agent_0"] == "right"  # the last line wins


def test_mind_reading_scores_a_turn_based_prediction_at_the_targets_next_move():
    mind = co.MindReading()
    mind.predict("player_1", {"player_2": "b2"}, step=0)
    assert mind.acted("player_1", "a1", step=0) == []  # the predictor's own move resolves nothing
    [scored] = mind.acted("player_2", "b2", step=1)
    assert (scored.predictor, scored.target, scored.correct, scored.made_at, scored.resolved_at) == \
        ("player_1", "player_2", True, 0, 1)
    mind.predict("player_1", {"player_2": "c3"}, step=2)
    mind.predict("player_1", {"player_2": "a3"}, step=4)  # a newer prediction replaces one not yet resolved
    [scored] = mind.acted("player_2", "c3", step=5)
    assert scored.predicted == "a3" and not scored.correct
    mind.predict("player_2", {"player_1": None}, step=6)
    assert mind.end_episode() == 1 and not mind.pending
    summary = co.tom_summary(mind.scored + [co.Scored("a", "b", None, "up", 0, 0)])
    assert summary["predictions"] == 3 and summary["accuracy"]["rate"] == pytest.approx(1 / 3)
    assert summary["readable"]["rate"] == pytest.approx(2 / 3)
    assert summary["pairs"]["player_1->player_2"]["n"] == 2


def test_teams_follow_name_prefixes_except_in_competitive_games():
    agents = ["adversary_0", "adversary_1", "agent_0", "agent_1", "leader"]
    assert co.teams(agents, competitive=False) == {"adversary": ["adversary_0", "adversary_1"],
                                                    "agent": ["agent_0", "agent_1"], "leader": ["leader"]}
    assert co.teams(["player_0", "player_1"], competitive=True) == {"player_0": ["player_0"],
                                                                    "player_1": ["player_1"]}


def test_a_plan_missing_an_agent_is_asked_again_then_that_agent_alone_plays_at_random():
    legal = {"agent_0": ["left", "right"], "agent_1": ["stay", "up"]}
    with StubServer(["agent_0: right\nagent_1: sideways", "agent_1: still nothing"]) as server:
        client = make_client(ModelConfig(base_url=server.base_url, model=server.model, api_key_env="PATH"))
        choices = co.choose_plan(client, [{"role": "user", "content": "plan"}], legal, random.Random(0), retries=1)
        assert len(server.requests) == 2
        # the second request asked again for agent_1 only
        assert "agent_1" in server.requests[1]["messages"][-1]["content"]
        assert "agent_0" not in server.requests[1]["messages"][-1]["content"]
    assert (choices["agent_0"].action, choices["agent_0"].valid) == ("right", True)
    assert choices["agent_1"].valid is False and choices["agent_1"].action in legal["agent_1"]
    assert sum(len(c.calls) for c in choices.values()) == 2  # each call recorded once


@pytest.mark.parametrize("family", ["classic", "mpe"])
def test_every_installed_env_id_is_described_and_played_by_name_or_refused_with_its_reason(family):
    """Walks every id: supported ones play 6 decision points by action *name*; the rest say why not."""
    found = coverage(family)
    assert set(found) == set(available_env_ids(family))
    for env_id, why in found.items():
        env = make_env(family, env_id, api_type(family))
        try:
            if why is not None:
                with pytest.raises(Unsupported):
                    describer_for(family, env_id, env)
                assert env_id in why or "agent" in why
                continue
            env.reset(seed=1)
            describer = describer_for(family, env_id, env)
            rng = np.random.default_rng(0)
            if api_type(family) == "AEC":
                for step, agent in enumerate(env.agent_iter(max_iter=6)):
                    obs, _, term, trunc, _ = env.last()
                    if term or trunc:
                        env.step(None)
                        continue
                    text = describer.view(env, agent, View(step, {}))
                    legal = describer.legal_names(env, agent)
                    assert legal and all(name in text for name in legal), (env_id, text)
                    if isinstance(obs, dict) and "action_mask" in obs:  # names map onto the env's own mask
                        mask = [describer.index(agent, n) for n in legal]
                        assert mask == list(np.flatnonzero(obs["action_mask"]))
                    env.step(describer.index(agent, str(rng.choice(legal))))
            else:
                for step in range(6):
                    texts = {a: describer.view(env, a, View(step, {})) for a in env.agents}
                    for agent, text in texts.items():
                        assert "You are at" in text and all(o in text for o in env.possible_agents if o != agent)
                    env.step({a: describer.index(a, str(rng.choice(describer.legal_names(env, a))))
                              for a in env.agents})
            assert describer.system_prompt(env.possible_agents[0])
        finally:
            env.close()
    assert reward_structure(family, next(iter(found))) is not None


def test_tictactoe_text_matches_the_boards_render_layout():
    env = make_env("classic", "tictactoe_v3", "AEC")
    env.reset(seed=0)
    describer = describer_for("classic", "tictactoe_v3", env)
    env.step(describer.index("player_1", "c1"))  # top right
    env.step(describer.index("player_2", "a3"))  # bottom left
    text = describer.view(env, "player_1", View(2, {}))
    assert "1  . . X" in text and "3  O . ." in text
    # pettingzoo stores squares column by column: c1 is square 6, a3 square 2
    assert env.unwrapped.board.squares[6] == 1 and env.unwrapped.board.squares[2] == 2
    env.close()


def test_connect_four_text_shows_discs_where_they_fell():
    env = make_env("classic", "connect_four_v3", "AEC")
    env.reset(seed=0)
    describer = describer_for("classic", "connect_four_v3", env)
    env.step(describer.index("player_0", "4"))
    env.step(describer.index("player_1", "4"))
    rows = describer.view(env, "player_0", View(2, {})).splitlines()
    assert rows[-1].startswith("Legal columns: 1, 2, 3, 4")
    assert rows[-2] == ". . . X . . ." and rows[-3] == ". . . O . . ."  # the bottom row, then the one above
    assert all(row == ". . . . . . ." for row in rows[-7:-3])
    env.close()
