"""The mosaic_llm worker end to end: real CLI, real envs, a real OpenAI-protocol server on 127.0.0.1.

The server answers by rules that read only the worker's text (``llm_support``), so
a rule that wins games or heads for landmarks shows the text told the truth.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llm_support import (connect_four_player, last_user, mpe_world, spread_player, tictactoe_player,
                         toward_nearest_landmark)
from mosaic.workerkit.envs import make_env
from mosaic.testing.stub_llm_server import StubServer
from mosaic.testing import check_live_evaluation, check_worker, run_events, run_under_daemon

SPREAD = {"family": "mpe", "env_id": "simple_spread_v3", "env_kwargs": {"N": 2, "max_cycles": 6}}
CONNECT_FOUR = {"family": "classic", "env_id": "connect_four_v3"}


def transcript(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "transcripts" / "episodes.jsonl").read_text().splitlines()]


def results(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


def evaluate(home, name: str, server, **fields) -> Path:
    proc = home.cli("run", str(home.evaluation(name, server, **fields)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return home.runs()[-1]


def replay(env_spec: dict, episode: dict, moves: list[dict]) -> dict[str, float]:
    """Reset with the episode's seed and play its recorded moves: the returns must come out the same."""
    env = make_env(env_spec["family"], env_spec["env_id"], "AEC", env_spec.get("env_kwargs"))
    env.reset(seed=episode["seed"])
    returns = {a: 0.0 for a in env.possible_agents}
    queue = list(moves)
    for agent in env.agent_iter():
        _, _, term, trunc, _ = env.last()
        if term or trunc:
            env.step(None)
        else:
            move = queue.pop(0)
            assert move["agent"] == agent
            env.step(move["action_index"])
        for a, r in env.rewards.items():
            returns[a] += float(r)
    assert not queue
    env.close()
    return returns


# -- games against random play ---------------------------------------------------------------------
def test_tictactoe_rules_read_from_the_text_beat_random_play_and_every_game_replays(home):
    with StubServer(tictactoe_player) as server:
        run = evaluate(home, "ttt", server, episodes=10, players={"player_2": {"kind": "random"}})
    res, lines = results(run), transcript(run)
    llm = res["players"]["llm"]
    assert llm["games"] == 10 and llm["win"]["rate"] >= 0.7, llm
    assert llm["win"]["rate"] + llm["draw"]["rate"] + llm["loss"]["rate"] == pytest.approx(1.0)
    assert llm["invalid_actions"]["rate"] == 0.0 and res["players"]["random"]["win"]["rate"] == llm["loss"]["rate"]
    # seats alternate: the model plays X in even games and O in odd ones
    assert [e["players"]["player_1"] for e in res["episodes"]] == ["llm", "random"] * 5
    for episode in res["episodes"]:
        moves = [m for m in lines if m["episode"] == episode["episode"] and m["kind"] == "move"]
        assert replay({"family": "classic", "env_id": "tictactoe_v3"}, episode, moves) == episode["returns"]
        asked = [m for m in lines if m["episode"] == episode["episode"] and m["kind"] == "action"]
        assert [m["action"] for m in asked] == [m["action"] for m in moves if m["player"] == "llm"]
        assert all(m["prompt"].startswith("Board") and m["calls"] for m in asked)
    events = run_events(run)
    episodes = [e for e in events if e["type"] == "episode"]
    assert len(episodes) == 10 and sum(e["success"] for e in episodes) == round(llm["win"]["rate"] * 10)
    metrics = [e for e in events if e["type"] == "metrics"]
    assert len(metrics) == 2 and metrics[-1]["win_rate/llm"] == llm["win"]["rate"]
    assert metrics[-1]["llm"]["requests"] == sum(len(m["calls"]) for m in lines if m["kind"] == "action")


def completed_summary(proc: subprocess.CompletedProcess) -> dict:
    """The summary ``mosaic run`` prints when the run completes (the ``run_completed`` event's)."""
    line = [text for text in proc.stdout.splitlines() if " completed: " in text][-1]
    return json.loads(line.split(" completed: ", 1)[1])


def test_the_closing_summary_labels_every_win_rate_with_its_player(home):
    with StubServer(tictactoe_player) as server:
        mixed = home.cli("run", str(home.evaluation("mixed", server, episodes=4,
                                                    players={"player_2": {"kind": "random"}})))
        assert mixed.returncode == 0, mixed.stderr[-3000:]
        mixed_run = home.runs()[-1]
        same = home.cli("run", str(home.evaluation("same", server, episodes=2)))
        assert same.returncode == 0, same.stderr[-3000:]
        same_run = home.runs()[-1]
    for proc, run in ((mixed, mixed_run), (same, same_run)):
        summary = completed_summary(proc)
        assert summary == run_events(run, "run_completed")[0]["summary"]
        assert summary["episodes"] == len(results(run)["episodes"])
        # no rate hides in a nested value whose key does not say whose rate it is
        assert all(not isinstance(v, dict) for v in summary.values()), summary
    players = results(mixed_run)["players"]
    assert {k: v for k, v in completed_summary(mixed).items() if k.startswith("win_rate/")} == {
        "win_rate/llm": players["llm"]["win"]["rate"], "win_rate/random": players["random"]["win"]["rate"]}
    # two model agents: one player in both seats, its win rates told apart by seat
    seats = results(same_run)["seats"]
    assert {k: v for k, v in completed_summary(same).items() if k.startswith("win_rate/")} == {
        "win_rate/llm@player_1": seats["player_1"]["win"]["rate"],
        "win_rate/llm@player_2": seats["player_2"]["win"]["rate"]}


def test_replies_naming_no_legal_move_are_asked_again_then_replaced_by_a_random_legal_one(home):
    """A model that always says a1: once a1 is taken, every reply is illegal, asked again, then replaced."""
    with StubServer(["I like the corner.\nACTION: a1"]) as server:
        run = evaluate(home, "stubborn", server, episodes=2, players={"player_2": {"kind": "random"}},
                       alternate_seats=False, retries_per_action=1)
    lines = transcript(run)
    asked = [m for m in lines if m["kind"] == "action"]
    assert asked[0]["valid"] and asked[0]["action"] == "a1"
    later = [m for m in asked if m["step"] > 0]
    assert later and all(not m["valid"] and len(m["replies"]) == 2 for m in later)
    assert all(m["action"] in m["prompt"].split("Legal moves: ")[1].split(", ") for m in later)
    assert "names no legal action" in server.requests[2]["messages"][-1]["content"]
    invalid = results(run)["players"]["llm"]["invalid_actions"]
    assert invalid["n"] == len(asked) and invalid["rate"] == pytest.approx(len(later) / len(asked))
    assert sum(e["invalid_actions"]["player_1"] for e in run_events(run, "episode")) == len(later)


# -- coordination and theory of mind ------------------------------------------------------------------
def scored_by_hand(lines: list[dict]) -> tuple[int, int]:
    """(correct, made) from the transcript alone: in MPE a prediction meets the target's move of the same step."""
    moves = {(m["episode"], m["step"], m["agent"]): m["action"] for m in lines if m["kind"] == "move"}
    correct = made = 0
    for p in (m for m in lines if m["kind"] == "prediction"):
        for target, predicted in p["predictions"].items():
            made += 1
            correct += predicted == moves[(p["episode"], p["step"], target)]
    return correct, made


@pytest.mark.parametrize("predict_stay", [False, True])
def test_theory_of_mind_accuracy_is_what_the_others_then_did(home, predict_stay):
    """Agents that head for their nearest landmark: predicting the same rule for the others is right
    almost always; predicting 'stay' is right only when the other stays (nearly never)."""
    with StubServer(spread_player(predict_stay)) as server:
        run = evaluate(home, "tom", server, environment=SPREAD, episodes=2, theory_of_mind=True)
    lines, tom = transcript(run), results(run)["theory_of_mind"]
    correct, made = scored_by_hand(lines)
    assert made == 2 * 6 * 2 == tom["predictions"]  # 2 episodes x 6 steps x 2 agents, one other agent each
    assert tom["accuracy"]["rate"] == pytest.approx(correct / made)
    if predict_stay:
        assert tom["accuracy"]["rate"] <= 0.25
    else:
        assert tom["accuracy"]["rate"] >= 0.9 and tom["readable"]["rate"] == 1.0
    assert set(tom["pairs"]) == {"agent_0->agent_1", "agent_1->agent_0"}
    # each action prompt shows the agent its own predictions
    actions = [m for m in lines if m["kind"] == "action"]
    assert all("You predicted: agent_" in m["prompt"] for m in actions)
    episodes = run_events(run, "episode")
    assert [e["tom_accuracy"] for e in episodes] == [e["tom"]["accuracy"]["rate"] for e in results(run)["episodes"]]


def test_a_message_round_shows_each_agent_the_others_messages_cut_to_length(home):
    def answer(body: dict) -> str:
        text = last_user(body)
        me, seen = mpe_world(text)
        landmarks = [p for name, p in seen.items() if name.startswith("landmark")]
        move = toward_nearest_landmark(*me, landmarks)
        if "write one short message" in text:
            return f"heading {move} from {me[0]:.2f} " + "blah " * 40
        return f"ACTION: {move}"

    with StubServer(answer) as server:
        run = evaluate(home, "talk", server, environment=SPREAD, episodes=1, coordination="message_round",
                       message_words=5)
    lines = transcript(run)
    said = {(m["step"], m["agent"]): m["message"] for m in lines if m["kind"] == "message"}
    assert len(said) == 12 and all(len(text.split()) == 5 for text in said.values())
    for m in (m for m in lines if m["kind"] == "action"):
        other = "agent_1" if m["agent"] == "agent_0" else "agent_0"
        assert f"- {other}: {said[(m['step'], other)]}" in m["prompt"]
        assert f"- {m['agent']}: " not in m["prompt"].split("Messages from the other agents")[1]
    assert len(server.requests) == 2 * 12


def test_a_central_planner_decides_for_its_team_in_one_call(home):
    def planner(body: dict) -> str:
        text = last_user(body)
        out = []
        for section in text.split("== ")[1:]:
            agent = section.split(" ==")[0]
            me, seen = mpe_world(section)
            landmarks = [p for name, p in seen.items() if name.startswith("landmark")]
            out.append(f"{agent}: {toward_nearest_landmark(*me, landmarks)}")
        return "Plan:\n" + "\n".join(out)

    with StubServer(planner) as server:
        run = evaluate(home, "plan", server, environment=SPREAD, episodes=1, coordination="central_planner")
    plans = [m for m in transcript(run) if m["kind"] == "plan"]
    assert len(server.requests) == 6  # one call per step for the team of two
    assert len(plans) == 12 and all(m["valid"] and m["team"] == ["agent_0", "agent_1"] for m in plans)
    assert results(run)["players"]["llm"]["invalid_actions"]["rate"] == 0.0


# -- mixed matches against a trained policy --------------------------------------------------------------
@pytest.fixture(scope="module")
def connect_four_checkpoint(tmp_path_factory) -> Path:
    """A PPO policy trained on connect_four_v3 by the Ray worker, through MOSAIC's CLI."""
    home = tmp_path_factory.mktemp("ray-home")
    config = home / "ray.json"
    config.write_text(json.dumps({
        "worker": "ray", "algorithm": "ppo", "total_timesteps": 600, "rllib": {"num_env_runners": 0},
        "algo_params": {"train_batch_size_per_learner": 300, "minibatch_size": 100, "num_epochs": 1,
                        "fcnet_hiddens": [32, 32]},
        "environment": {**CONNECT_FOUR, "api_type": "AEC"}}))
    proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(config)], capture_output=True, text=True,
                          timeout=900, env={**os.environ, "MOSAIC_HOME": str(home), "RAY_AUTH_MODE": "disabled"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = (home / "trainer" / "runs").iterdir()
    return run


@pytest.mark.xdist_group("llm-ray-checkpoint")  # one training for both tests that use it
def test_ten_connect_four_games_against_a_ray_checkpoint_played_as_it_was_trained(home, connect_four_checkpoint):
    from ray_worker.policy_actor import RayPolicyConfig, create_ray_actor, environment_config, read_checkpoint
    from ray_worker.environment import EnvironmentFactory

    with StubServer(connect_four_player) as server:
        run = evaluate(home, "c4", server, environment=CONNECT_FOUR, episodes=10,
                       players={"player_1": {"kind": "policy", "checkpoint": str(connect_four_checkpoint)}})
    res, lines = results(run), transcript(run)
    label = f"policy:{connect_four_checkpoint.name}"
    assert set(res["players"]) == {"llm", label}
    for who in ("llm", label):
        stats = res["players"][who]
        assert stats["games"] == 10
        assert round((stats["win"]["rate"] + stats["draw"]["rate"] + stats["loss"]["rate"]) * 10) == 10
    assert res["players"]["llm"]["win"]["rate"] == res["players"][label]["loss"]["rate"]
    assert [e["players"]["player_0"] for e in res["episodes"]] == ["llm", label] * 5
    # replay every game through the Ray worker's own env: each policy move is what its module plays there
    info = read_checkpoint(connect_four_checkpoint)
    actor = create_ray_actor(RayPolicyConfig(str(info.path)))
    env, _ = EnvironmentFactory(environment_config(info)).make_pettingzoo()
    checked = 0
    for episode in res["episodes"]:
        moves = [m for m in lines if m["episode"] == episode["episode"] and m["kind"] == "move"]
        env.reset(seed=episode["seed"])
        for agent in env.agent_iter():
            obs, _, term, trunc, _ = env.last()
            if term or trunc:
                env.step(None)
                continue
            move = moves.pop(0)
            assert move["agent"] == agent
            if move["player"] == label:
                assert actor.compute_action(obs) == move["action_index"]
                checked += 1
            env.step(move["action_index"])
        assert not moves
    env.close()
    assert checked >= 10


@pytest.mark.xdist_group("llm-ray-checkpoint")
def test_a_checkpoint_trained_on_another_env_is_refused_naming_the_player(home, connect_four_checkpoint):
    with StubServer(tictactoe_player) as server:
        proc = home.cli("run", str(home.evaluation("wrong", server, players={
            "player_2": {"kind": "policy", "checkpoint": str(connect_four_checkpoint)}})))
    assert proc.returncode == 2, proc.stderr
    assert "players.player_2.checkpoint: was trained on classic/connect_four_v3, not classic/tictactoe_v3" \
        in proc.stderr and "Traceback" not in proc.stderr
    assert home.runs() == []


# -- failures and bad input ------------------------------------------------------------------------------
def test_a_spent_budget_fails_the_run_naming_it_and_leaves_no_results(home):
    with StubServer(tictactoe_player) as server:
        proc = home.cli("run", str(home.evaluation("budget", server, episodes=5, model={"max_requests": 7})))
    assert proc.returncode == 1
    (run,) = home.runs()
    failed = run_events(run)[-1]
    assert failed["type"] == "run_failed" and "budget of 7 requests" in failed["message"]
    assert not (run / "results.json").exists()
    assert len([m for m in transcript(run) if m["kind"] == "action"]) == 7 == len(server.requests)


@pytest.mark.parametrize("fields, named", [
    ({"environment": {"family": "classic", "env_id": "tictactoe_v9"}}, "environment.env_id"),
    ({"environment": {"family": "classic", "env_id": "chess_v6"}}, "environment.env_id: chess_v6 has no text "
                                                                   "describer"),
    ({"environment": {"family": "mpe", "env_id": "simple_reference_v3"}}, "environment.env_id: simple_reference_v3: "
                                                                          "agent agent_0 acts in Discrete(50)"),
    ({"environment": {"family": "sisl", "env_id": "pursuit_v4"}}, "environment.family: 'sisl' has no text describer"),
    # an unknown family lists the families this worker plays, not every PettingZoo family (sisl was offered)
    ({"environment": {"family": "nofamily", "env_id": "pursuit_v4"}}, "environment.family: 'nofamily' has no text "
                                                                      "describer here; allowed: classic, mpe"),
    ({"environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "AEC"}}, "environment.api_type"),
    ({"players": {"player_3": {"kind": "random"}}}, "players.player_3: tictactoe_v3 has no agent 'player_3'"),
    ({"players": {"player_1": {"kind": "policy"}}}, "players.player_1.checkpoint: a policy player needs"),
    ({"players": {"player_1": {"kind": "human"}}}, "players.player_1.kind"),
    ({"players": {"player_1": {"kind": "policy", "checkpoint": "/nowhere"}}}, "players.player_1.checkpoint"),
    ({"coordination": "central_planner"}, "coordination: central_planner plans for a team"),
    ({"coordination": "telepathy"}, "coordination"),
    ({"model": {"api_key_env": "MOSAIC_NO_SUCH_KEY"}}, "model.api_key_env"),
    ({"model": {"base_url": "http://127.0.0.1:9/v1"}}, "model.base_url: nothing answers at 127.0.0.1:9"),
    ({"episodes": 0}, "episodes"),
    ({"algorithm": "ppo"}, "algorithm: "),
    ({"environment": {**CONNECT_FOUR, "env_ids": ["connect_four_v3", "tictactoe_v3"]}}, "environment.env_ids: "),
    # the spellings before the shared run fields are not accepted any more
    ({"heartbeat_interval_s": 1.0}, "heartbeat_interval_s: unknown field"),
    ({"episodes_per_task": 3}, "episodes_per_task: unknown field"),
])
def test_bad_input_is_refused_naming_the_field_before_any_run_exists(home, fields, named):
    with StubServer(["ACTION: b2"]) as server:
        config = home.evaluation("bad", server)
        data = json.loads(config.read_text())
        for key, value in fields.items():
            data[key] = {**data[key], **value} if key == "model" else value
        config.write_text(json.dumps(data))
        proc = home.cli("run", str(config))
    assert proc.returncode == 2, proc.stderr
    assert named in proc.stderr and "Traceback" not in proc.stderr and proc.stderr.startswith("mosaic: error: ")
    assert home.runs() == [] and server.requests == []


def validate(config: dict) -> subprocess.CompletedProcess:
    """``python -m llm_worker.cli --validate --config -`` (the worker runs in MOSAIC's own environment)."""
    return subprocess.run([sys.executable, "-m", "llm_worker.cli", "--validate", "--config", "-"],
                          input=json.dumps(config), capture_output=True, text=True, timeout=300)


#: A value other than the default for each shared field the worker refuses.
REFUSED = {"environment.env_ids": ["tictactoe_v3"], "total_timesteps": 1000, "num_envs": 2, "learning_rate": 0.001,
           "gamma": 0.9, "batch_size": 32, "algo_params": {"lr": 0.1}, "checkpoint.every_timesteps": 100,
           "checkpoint.at_end": False, "checkpoint.keep": 2, "checkpoint.restore_from": "/tmp",
           "reporting.every_timesteps": 100, "resources.threads": 2, "resources.gpus": 1}


def test_the_refused_list_covers_the_field_map():
    from llm_worker.config import LLMWorkerConfig
    from mosaic.workerkit.run_fields import SHARED_PATHS

    fields = LLMWorkerConfig.FIELDS
    assert set(fields.refused) == set(REFUSED)
    assert sorted([*fields.honoured, *fields.refused]) == sorted(SHARED_PATHS)
    assert fields.refused["resources.gpus"] == "no GPU path in this version of the worker"


@pytest.mark.parametrize("path", sorted(REFUSED))
def test_a_refused_shared_field_is_refused_by_name(path):
    section, _, leaf = path.partition(".")
    value = {leaf: REFUSED[path]} if leaf else REFUSED[path]
    if section == "environment":
        value = {"family": "classic", "env_id": "tictactoe_v3", **value}
    proc = validate({section: value})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"mosaic: error: {path}: ") and "is not supported by the mosaic_llm worker" \
        in proc.stderr
    assert "allowed: " in proc.stderr and "Traceback" not in proc.stderr


def test_the_algorithm_in_any_case_is_normalised_and_may_be_left_out(home):
    with StubServer(["ACTION: b2"]) as server:
        base = json.loads(home.evaluation("ok", server).read_text())
        given = validate({**base, "algorithm": "LLM", "reporting": {"heartbeat_interval_s": 0}})
        omitted = validate(base)
    assert given.returncode == 0 and omitted.returncode == 0, (given.stderr, omitted.stderr)
    assert json.loads(given.stdout)["algorithm"] == json.loads(omitted.stdout)["algorithm"] == "llm"
    assert json.loads(given.stdout)["reporting"]["heartbeat_interval_s"] == 0
    assert json.loads(omitted.stdout)["episodes"] == 10


# -- the contract -----------------------------------------------------------------------------------------
def test_conformance(home):
    with StubServer(tictactoe_player) as server:
        report = check_worker("mosaic_llm", json.loads(home.evaluation(
            "conformance", server, episodes=2, players={"player_2": {"kind": "random"}}).read_text()),
            home=home.root, bad_config={"episodes": -1})
    assert len(report.of_type("episode")) == 2 and report.of_type("metrics")[-1]["num_episodes_lifetime"] == 2
    assert (report.run.root / "results.json").exists()


def test_an_evaluation_submitted_to_the_daemon(home):
    with StubServer(spread_player()) as server:
        config = json.loads(home.evaluation("daemon", server, environment=SPREAD, episodes=2,
                                            theory_of_mind=True).read_text())
        info, events = run_under_daemon(home.root, config, timeout=300)
    assert info.state_reason == "completed", info.failure_reason
    assert len([e for e in events if e["type"] == "episode"]) == 2
    assert results(Path(info.run_dir))["theory_of_mind"]["predictions"] == 24


def test_frames_pause_resume_and_ctrl_c_of_a_live_evaluation(home, tmp_path):
    slow = lambda body: {"text": tictactoe_player(body), "delay_s": 0.02}  # noqa: E731
    with StubServer(slow) as server:
        config = home.evaluation("live", server, episodes=2000, players={"player_2": {"kind": "random"}},
                                 reporting={"heartbeat_interval_s": 0.5}, fastlane={"enabled": True},
                                 episodes_per_block=1)
        check_live_evaluation(home, config, "llm-live-1", tmp_path / "live.png")


def test_the_transformers_backend_plays_from_a_local_model_directory(home, tmp_path):
    """A tiny random GPT-2 made here (mosaic.testing.tiny_model): real tokenising and generation on CPU; its babble
    is parsed or replaced, and greedy decoding plays the same game twice."""
    from llm_worker.text import TicTacToe
    from mosaic.testing.tiny_model import make

    env = make_env("classic", "tictactoe_v3", "AEC")
    describer = TicTacToe(env)
    env.close()
    make(tmp_path / "tiny", [describer.system_prompt("player_1"), *describer.action_names("player_1"),
                             "Board ( ' . ' is empty ) , you are X O : Legal moves : ACTION"])
    model = {"backend": "transformers", "model": str(tmp_path / "tiny"), "max_tokens": 6}
    runs = [evaluate(home, f"local-{i}", None, episodes=1, history=0, model=model,
                     players={"player_2": {"kind": "random"}}) for i in range(2)]
    first, second = ([(m["replies"], m["action"]) for m in transcript(run) if m["kind"] == "action"] for run in runs)
    assert first and first == second
    for line in (m for m in transcript(runs[0]) if m["kind"] == "action"):
        assert all(c["prompt_tokens"] > 20 and 0 < c["completion_tokens"] <= 6 for c in line["calls"])
        assert len(line["replies"]) == len(line["calls"]) == (1 if line["valid"] else 2)
    assert run_events(runs[0], "run_started")[0]["versions"]["transformers"] == "5.23.0"
