"""A language model as an arena player (``mosaic player CONFIG``): real player processes, real envs, a real
OpenAI-protocol server on 127.0.0.1 answering by rules that read only the player's text (``llm_support``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from llm_support import KEY_ENV, connect_four_player, last_user
from mosaic.errors import UserError
from mosaic.host.match import open_player, play_match
from mosaic.testing import wait_until
from mosaic.testing.stub_llm_server import StubServer
from mosaic.workerkit.envs import make_env

from llm_worker.cli import make_player
from llm_worker.player import LLMPlayer
from llm_worker.text import View, describer_for

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "arena" / "llm_player.yaml"
CONNECT_FOUR = {"family": "classic", "env_id": "connect_four_v3"}


@pytest.fixture(scope="module")
def setting(tmp_path_factory):
    """The key variable set and a MOSAIC_HOME of the module's own, for this process and the players it starts."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, "local-test-key")
        patch.setenv("MOSAIC_HOME", str(tmp_path_factory.mktemp("home")))
        yield tmp_path_factory.mktemp("players")


@pytest.fixture(scope="module")
def idle_server():
    with StubServer(["ACTION: 1"]) as server:
        yield server


def player_file(folder: Path, name: str, server, **fields) -> Path:
    """The example player config, pointed at ``server``, with ``fields`` over it."""
    document = yaml.safe_load(EXAMPLE.read_text())
    document["model"].update(base_url=server.base_url, model=server.model, api_key_env=KEY_ENV, backoff_s=0.01)
    document.update(fields)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


# -- matches through `mosaic player` -----------------------------------------------------------------------
def test_the_example_config_plays_connect_four_against_random_through_mosaic_player(setting):
    with StubServer(connect_four_player) as server:
        config = player_file(setting, "c4", server)
        with open_player(str(config)) as llm, open_player("random") as rnd:
            assert (llm.label, llm.agents, llm.environment) == ("llm-local", [], {**CONNECT_FOUR, "env_kwargs": {}})
            seatings = [{"player_0": llm, "player_1": rnd}, {"player_0": rnd, "player_1": llm}]
            one = play_match(CONNECT_FOUR, seatings, games=4, seed=11)
            first = list(server.requests)
            two = play_match(CONNECT_FOUR, seatings, games=4, seed=11)  # the same process: reset clears all
            second = server.requests[len(first):]
        stderr = wait_until(lambda: [line for line in llm._stderr if "player totals" in line], 30,
                            "the player's totals on stderr")
    # every game ended by a win or a draw: an illegal move would end it -1/0
    for game in one.games:
        assert sorted(game.returns.values()) in ([-1.0, 1.0], [0.0, 0.0]), game
    assert np.mean(one.scores("llm-local")) >= 0.75, one.games  # the rule read the board from the prompt
    # the same seeds, the same games and the same prompts, twice
    assert one.games == two.games and first == second
    # one request per model move, each game's first prompt without history, later ones with the last two turns
    moves = [(g.length + (g.seats["player_0"] == "llm-local")) // 2 for g in one.games]
    assert len(first) == sum(moves)
    start = 0
    for count in moves:
        game = first[start:start + count]
        assert [len(body["messages"]) for body in game] == [2 + 2 * min(turn, 2) for turn in range(count)]
        assert all(last_user(body).startswith("Board, top row first") for body in game)
        start += count
    totals = json.loads(stderr[-1].split("player totals: ", 1)[1])
    assert (totals["games"], totals["decisions"], totals["invalid_actions"]) == (8, 2 * sum(moves), 0)
    assert totals["llm"]["requests"] == 2 * sum(moves) and totals["llm"]["prompt_tokens"] > 0


# -- the prompt is the worker's own --------------------------------------------------------------------------
def first_legal(body: dict) -> str:
    """Predict the first action listed; play the first legal one."""
    text = last_user(body)
    asked = re.findall(r"^PREDICT (\S+): <one of ([^,>]+)", text, re.MULTILINE)
    if asked:
        return "\n".join(f"PREDICT {agent}: {guess}" for agent, guess in asked)
    return "ACTION: " + re.search(r"^Legal \w+: ([^,\n]+)", text, re.MULTILINE).group(1)


def nonsense(body: dict) -> str:
    return "I would rather not say."


def drive(player, env_spec: dict, seat: int, seed: int) -> tuple[list[dict], list[tuple[str, int, int]]]:
    """One game in a real env, the player at ``seat`` against random play: at each of its turns what the
    worker's describer shows there (the runtime's view: env steps so far, returns so far) and the legal moves;
    and every move (agent, step, action)."""
    env = make_env(env_spec["family"], env_spec["env_id"], "AEC", env_spec.get("env_kwargs"))
    env.reset(seed=seed)
    describer = describer_for(env_spec["family"], env_spec["env_id"], env)
    me = env.possible_agents[seat]
    rng = np.random.default_rng(seed)
    player.reset(seed)
    turns, moves, returns, step = [], [], {a: 0.0 for a in env.possible_agents}, 0
    for agent in env.agent_iter():
        obs, _, term, trunc, _ = env.last()
        if term or trunc:
            env.step(None)
            continue
        if agent == me:
            turn = {"step": step, "view": describer.view(env, agent, View(step, dict(returns))),
                    "legal": describer.legal(env, agent)}
            turn["action"] = player.act(agent, obs)
            turns.append(turn)
        else:
            legal = describer.legal(env, agent)
            action = int(rng.choice(legal))
            moves.append((agent, step, action))
            env.step(action)
            step += 1
            for a, r in env.rewards.items():
                returns[a] += float(r)
            continue
        moves.append((agent, step, turn["action"]))
        env.step(turn["action"])
        step += 1
        for a, r in env.rewards.items():
            returns[a] += float(r)
    env.close()
    return turns, moves


@pytest.mark.parametrize("env_spec, seat, rule, tom", [
    ({"family": "classic", "env_id": "connect_four_v3"}, 1, first_legal, True),
    ({"family": "classic", "env_id": "rps_v2", "env_kwargs": {"max_cycles": 5}}, 1, first_legal, True),
    ({"family": "classic", "env_id": "tictactoe_v3"}, 0, nonsense, False),
], ids=["connect_four", "rps", "tictactoe-invalid"])
def test_each_prompt_is_the_workers_view_of_the_game_and_replies_are_handled_as_in_its_games(
        setting, env_spec, seat, rule, tom):
    with StubServer(rule) as server:
        player = LLMPlayer.load(str(player_file(setting, env_spec["env_id"], server, environment=env_spec,
                                                theory_of_mind=tom)))
        turns, moves = drive(player, env_spec, seat, seed=3)
        requests, invalid = list(server.requests), player.invalid
        again, _ = drive(player, env_spec, seat, seed=3) if rule is nonsense else (turns, moves)
    asks = [body for body in requests if "PREDICT" not in last_user(body)]
    if rule is nonsense:  # asked once more, then a random legal move, counted invalid; seeded by the game
        assert len(asks) == 2 * len(turns) and invalid == len(turns)
        firsts = asks[::2]
        assert [t["action"] for t in turns] == [t["action"] for t in again]
    else:
        assert len(asks) == len(turns) and invalid == 0
        firsts = asks
        assert [t["action"] for t in turns] == [t["legal"][0] for t in turns]  # the first legal, by name
    them = player.describer.agents[1 - seat]
    predicted = f"\nYou predicted: {them} will play {player.describer.action_names(them)[0]}" if tom else ""
    for turn, body in zip(turns, firsts):
        assert turn["action"] in turn["legal"]
        assert last_user(body) == turn["view"] + predicted
    if tom:  # each prediction scored against what the other then played (rps: its throw of the same round)
        other = [(s, a) for agent, s, a in moves if agent == them]
        actual = []
        for turn in turns[:-1]:
            if env_spec["env_id"] == "rps_v2":
                actual.append(next(a for s, a in other if s // 2 == turn["step"] // 2))
            else:
                actual.append(next(a for s, a in other if s > turn["step"]))
        player.reset(99)  # ends the game: its scored predictions join the totals
        tom_totals = player.totals()["theory_of_mind"]
        assert tom_totals["predictions"] == len(actual)
        assert tom_totals["accuracy"]["rate"] == pytest.approx(sum(a == 0 for a in actual) / len(actual))


# -- refusals ------------------------------------------------------------------------------------------------
def test_a_player_config_for_a_game_without_a_describer_exits_2_naming_the_games(setting, idle_server):
    path = player_file(setting, "chess", idle_server, environment={"family": "classic", "env_id": "chess_v6"})
    proc = subprocess.run([sys.executable, "-m", "mosaic", "player", str(path)], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert ("mosaic: error: environment.env_id: 'chess_v6' has no text describer a player can feed from one "
            "observation; allowed: connect_four_v3, rps_v2, tictactoe_v3") in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize("fields, options, message", [
    ({"environment": {"family": "classic", "env_id": "chess_v6"}}, {},
     "environment.env_id: 'chess_v6' has no text describer a player can feed from one observation; "
     "allowed: connect_four_v3, rps_v2, tictactoe_v3"),
    ({"environment": {"family": "mpe", "env_id": "simple_spread_v3"}}, {}, "environment.family: 'mpe' cannot"),
    ({"environment": {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"}}, {},
     "environment.api_type: unknown field; allowed: family, env_id, env_kwargs"),
    ({"environment": {"family": "classic", "env_id": "rps_v2", "env_kwargs": {"rounds": 3}}}, {},
     "environment.env_kwargs: rejected by rps_v2"),
    ({"coordination": "message_round"}, {}, "coordination: unknown field; allowed: worker, label, environment"),
    ({"history": -1}, {}, "history: -1 is below the minimum 0"),
    ({"model": {"backend": "vllm"}}, {}, "model.backend: 'vllm' is not one of openai, transformers"),
    ({"worker": "ray_worker"}, {}, "worker: 'ray_worker' is not one of mosaic_llm"),
    ({}, {"model": {"temperature": 5}}, "model.temperature: 5.0 is above the maximum 2.0"),
    ({}, {"model": {"api_key_env": "MOSAIC_TEST_UNSET_KEY"}},
     "model.api_key_env: the environment variable 'MOSAIC_TEST_UNSET_KEY' is not set"),
], ids=["no-describer", "mpe", "api_type", "env_kwargs", "coordination", "history", "backend", "worker", "option",
     "key"])
def test_bad_player_configs_are_refused_naming_the_field(setting, idle_server, fields, options, message):
    path = player_file(setting, "refused", idle_server, **fields)
    with pytest.raises(UserError) as refused:
        make_player(str(path), options)
    assert message in str(refused.value)


def test_a_missing_environment_is_required(setting, tmp_path):
    path = tmp_path / "bare.json"
    path.write_text(json.dumps({"worker": "mosaic_llm", "model": {"api_key_env": KEY_ENV}}))
    with pytest.raises(UserError, match="environment: is required"):
        make_player(str(path), {})


def test_describe_says_it_can_serve_a_player():
    proc = subprocess.run([sys.executable, "-m", "llm_worker.cli", "--describe"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["can_serve_player"] is True
