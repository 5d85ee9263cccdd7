"""Evaluations through `mosaic run`, in the worker's environment, against OpenAI-protocol servers on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bl_support import goal_seeker
from mosaic.testing.stub_llm_server import StubServer
from mosaic.testing import check_live_evaluation, check_worker, run_events, run_under_daemon

GOTO = "BabyAI-GoToRedBallNoDists-v0"
EMPTY = "MiniGrid-Empty-5x5-v0"


def transcript(run, task):
    return [json.loads(line) for line in (run / "transcripts" / f"{task}.jsonl").read_text().splitlines()]


def test_twenty_babyai_episodes_scored_with_results_and_transcripts(home):
    with StubServer(goal_seeker) as server:
        proc = home.cli("run", str(home.evaluation("goto", server, environment={"env_ids": [GOTO]}, episodes=20, seed=3,
                                                   max_steps=40, model={"price_input_per_mtok": 1.0})))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = home.runs()
    results = json.loads((run / "results.json").read_text())
    task = results["tasks"][GOTO]
    assert task["episodes"] == 20 and results["overall"]["episodes"] == 20
    # the rules only read the worker's text: they win when the text places things truthfully
    assert task["success"]["rate"] >= 0.8, task
    assert task["progression"]["mean"] == task["success"]["rate"]  # BabyAI's progression is 0 or 1
    assert task["success"]["ci95_low"] < task["success"]["rate"] <= task["success"]["ci95_high"] <= 1.0
    assert task["invalid_actions"]["rate"] == 0.0
    steps = transcript(run, GOTO)
    assert len(steps) == task["steps"] == results["llm"]["replies"] == results["llm"]["requests"]
    assert {s["seed"] for s in steps} == set(range(3, 23))  # episode i of the task: seed + i
    assert all(s["valid"] and s["replies"] and s["calls"][0]["cost"] > 0 for s in steps)
    assert sum(s["tokens"] for s in steps) == pytest.approx(task["tokens_per_episode"]["mean"] * 20)
    episodes = run_events(run, "episode")
    assert [e["success"] for e in episodes] == [e["success"] for e in results["episodes"]]
    assert all(e["returns"]["agent"] > 0 for e in episodes if e["success"])
    (metrics,) = run_events(run, "metrics")
    assert metrics["success_rate"] == task["success"]["rate"] and metrics["llm"]["requests"] == len(steps)

    # the same task with a model that only turns: nothing is won
    with StubServer(["ACTION: turn left"]) as server:
        proc = home.cli("run", str(home.evaluation("turner", server, environment={"env_ids": [GOTO]}, episodes=3,
                                                   seed=3, max_steps=8)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    turner = json.loads((home.runs()[-1] / "results.json").read_text())["tasks"][GOTO]
    assert turner["success"]["rate"] == 0.0 and turner["steps"] == 24


def test_replies_naming_no_action_are_asked_again_then_replaced_and_counted(home):
    script = ["hmm, let me think", "ACTION: go forward",  # step 1: asked again, then valid
              "I like turtles", "ACTION: fly",  # step 2: nothing legal twice: a random action, invalid
              {"status": 500, "error": "overloaded"}, "ACTION: turn left"]  # step 3: retried; then repeats
    with StubServer(script) as server:
        proc = home.cli("run", str(home.evaluation("invalid", server, environment={"env_id": EMPTY}, episodes=1,
                                                   max_steps=4, retries_per_action=1)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = home.runs()
    one, two, three, four = transcript(run, EMPTY)
    assert one["valid"] and one["action"] == "go forward" and one["replies"] == script[:2]
    assert not two["valid"] and two["replies"] == script[2:4] and two["action"] in (
        "turn left", "turn right", "go forward", "pick up", "drop", "toggle", "done")
    assert three["valid"] and three["calls"][0]["attempts"] == 2  # the 500, then the reply
    assert four["valid"] and four["action"] == "turn left"
    (episode,) = run_events(run, "episode")
    assert episode["invalid_actions"] == 1 and episode["length"] == 4
    results = json.loads((run / "results.json").read_text())
    assert results["overall"]["invalid_actions"]["rate"] == 0.25
    assert results["llm"]["requests"] == 7 and results["llm"]["replies"] == 6


def test_a_spent_budget_fails_the_run_naming_it_and_leaves_no_results(home):
    with StubServer(["ACTION: turn left"]) as server:
        proc = home.cli("run", str(home.evaluation("budget", server, environment={"env_id": EMPTY}, episodes=3,
                                                   max_steps=4, model={"max_requests": 6})))
    assert proc.returncode == 1
    (run,) = home.runs()
    failed = run_events(run)[-1]
    assert failed["type"] == "run_failed" and "budget of 6 requests" in failed["message"]
    assert "model.max_requests" in failed["message"]
    assert not (run / "results.json").exists()  # a partial evaluation is not written up as one
    assert len(transcript(run, EMPTY)) == 6  # what was played stays auditable
    assert json.loads((run / "analytics.json").read_text())["status"] == "failed"
    assert len(server.requests) == 6


def test_an_endpoint_failing_mid_run_fails_the_run_with_its_cause(home):
    replies = ["ACTION: turn left"] * 3 + [{"status": 401, "error": "key revoked"}]
    with StubServer(replies) as server:
        proc = home.cli("run", str(home.evaluation("revoked", server, environment={"env_id": EMPTY}, episodes=2,
                                                   max_steps=4)))
    assert proc.returncode == 1
    failed = run_events(home.runs()[-1])[-1]
    assert failed["type"] == "run_failed" and "HTTP 401: key revoked" in failed["message"]
    assert "model.api_key_env" in failed["message"]


@pytest.mark.parametrize("fields, named", [
    ({"environment": {"env_ids": ["BabyAI-GoToRedBall-v9"]}},
     "environment.env_ids[0]: 'BabyAI-GoToRedBall-v9' is not a MiniGrid or BabyAI id; "
     "did you mean BabyAI-GoToRedBall-v0"),
    ({"environment": {"env_id": "BabyAI-GoToRedBall-v9"}}, "environment.env_id: 'BabyAI-GoToRedBall-v9' is not"),
    ({"environment": {"env_ids": []}}, "environment.env_ids: name at least one"),
    ({"environment": {"env_ids": [EMPTY], "env_id": EMPTY}}, "environment.env_id: 'MiniGrid-Empty-5x5-v0' given "
                                                             "beside env_ids"),
    ({"environment": {"env_ids": ["CartPole-v1"]}}, "environment.env_ids[0]: 'CartPole-v1' is not a MiniGrid-* or"),
    ({"environment": {"env_ids": [EMPTY], "family": "babyai"}},
     "environment.family: 'babyai' but environment.env_ids[0] is 'MiniGrid-Empty-5x5-v0', not a BabyAI-* id; "
     "allowed: minigrid"),
    ({"environment": {"env_ids": [EMPTY], "family": "mpe"}}, "environment.family: 'mpe' is not played"),
    ({"environment": {"env_ids": [EMPTY], "env_kwargs": {"render_mode": "human"}}},
     "environment.env_kwargs.render_mode: set by the worker"),
    ({"environment": {"env_ids": [EMPTY], "env_kwargs": {"max_steps": 5}}, "max_steps": 3},
     "max_steps: given twice"),
    ({"environment": {"env_ids": [EMPTY], "env_kwargs": {"no_such_kwarg": 5}}},
     "environment.env_ids[0]: MiniGrid-Empty-5x5-v0 cannot be built here"),
    ({"model": {"api_key_env": "MOSAIC_NO_SUCH_KEY"}}, "model.api_key_env: the environment variable "
                                                       "'MOSAIC_NO_SUCH_KEY' is not set"),
    ({"model": {"base_url": "http://127.0.0.1:9/v1"}}, "model.base_url: nothing answers at 127.0.0.1:9"),
    ({"model": {"temperature": 5}}, "model.temperature"),
    ({"episodes": 0}, "episodes"),
    ({"algorithm": "ppo"}, "algorithm: "),
    # the spellings before the shared run fields are not accepted any more
    ({"tasks": [EMPTY]}, "tasks: unknown field"),
    ({"episodes_per_task": 3}, "episodes_per_task: unknown field"),
    ({"heartbeat_interval_s": 1.0}, "heartbeat_interval_s: unknown field"),
])
def test_bad_input_is_refused_naming_the_field_before_any_run_exists(home, fields, named):
    with StubServer(["ACTION: done"]) as server:
        config = home.evaluation("bad", server, environment={"env_ids": [EMPTY]})
        data = json.loads(config.read_text())
        for key, value in fields.items():
            data[key] = {**data[key], **value} if key == "model" else value  # the env is replaced whole
        config.write_text(json.dumps(data))
        proc = home.cli("run", str(config))
    assert proc.returncode == 2, proc.stderr
    assert named in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("mosaic: error: ")
    assert home.runs() == [] and server.requests == []


def validate(home, config: dict) -> subprocess.CompletedProcess:
    """``python -m balrog_worker.cli --validate --config -`` in the worker's environment."""
    return subprocess.run([home.python, "-m", "balrog_worker.cli", "--validate", "--config", "-"],
                          input=json.dumps(config), capture_output=True, text=True, timeout=300)


#: A value other than the default for each shared field the worker refuses.
REFUSED = {"total_timesteps": 1000, "num_envs": 2, "learning_rate": 0.001, "gamma": 0.9, "batch_size": 32,
           "algo_params": {"lr": 0.1}, "checkpoint.every_timesteps": 100, "checkpoint.at_end": False,
           "checkpoint.keep": 2, "checkpoint.restore_from": "/tmp", "reporting.every_timesteps": 100,
           "resources.threads": 2, "resources.gpus": 1}


def test_the_refused_list_covers_the_field_map(home):
    proc = subprocess.run([home.python, "-c", "import json; from balrog_worker.config import BalrogConfig; "
                           "print(json.dumps(BalrogConfig.FIELDS.to_dict()))"], capture_output=True, text=True)
    fields = json.loads(proc.stdout)
    assert set(fields["refused"]) == set(REFUSED)
    assert fields["refused"]["resources.gpus"] == "no GPU path in this version of the worker"


@pytest.mark.parametrize("path", sorted(REFUSED))
def test_a_refused_shared_field_is_refused_by_name(home, path):
    section, _, leaf = path.partition(".")
    config = {"environment": {"env_id": EMPTY}, section: {leaf: REFUSED[path]} if leaf else REFUSED[path]}
    proc = validate(home, config)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith(f"mosaic: error: {path}: ") and "is not supported by the balrog worker" in proc.stderr
    assert "allowed: " in proc.stderr and "Traceback" not in proc.stderr


def test_the_algorithm_in_any_case_is_normalised_and_the_family_follows_the_ids(home):
    with StubServer(["ACTION: done"]) as server:
        base = json.loads(home.evaluation("ok", server).read_text())
        checked = {}
        for name, environment in {"babyai": {"env_ids": [GOTO, "BabyAI-GoToObj-v0"]},
                                  "mixed": {"env_ids": [GOTO, EMPTY]},
                                  "one": {"env_id": EMPTY},
                                  "named": {"family": "minigrid", "env_ids": [GOTO]}}.items():
            proc = validate(home, {**base, "algorithm": "LLM", "environment": environment})
            assert proc.returncode == 0, proc.stderr
            checked[name] = json.loads(proc.stdout)
        omitted = validate(home, {k: v for k, v in base.items() if k != "algorithm"})
    assert all(c["algorithm"] == "llm" for c in checked.values())
    assert {n: c["environment"]["family"] for n, c in checked.items()} == {
        "babyai": "babyai", "mixed": "minigrid", "one": "minigrid", "named": "minigrid"}
    assert checked["one"]["environment"]["env_id"] == EMPTY and checked["babyai"]["episodes"] == 5
    assert omitted.returncode == 0 and json.loads(omitted.stdout)["algorithm"] == "llm"
    assert json.loads(omitted.stdout)["environment"] == {
        "family": "babyai", "env_id": "", "env_ids": [GOTO], "env_kwargs": {}}


def test_the_transformers_backend_plays_from_a_local_model_directory(home, tmp_path):
    """A tiny random GPT-2 made here: real tokenising and generation on CPU; its babble is parsed or replaced."""
    made = subprocess.run([home.python, str(Path(__file__).with_name("tiny_model.py")), str(tmp_path / "tiny")],
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    model = {"backend": "transformers", "model": str(tmp_path / "tiny"), "max_tokens": 6}

    def evaluate(name):
        proc = home.cli("run", str(home.evaluation(name, None, environment={"env_id": EMPTY}, episodes=2, max_steps=3,
                                                   history=0, model=model)))
        assert proc.returncode == 0, proc.stderr[-3000:]
        return home.runs()[-1]

    first, second = evaluate("local-1"), evaluate("local-2")
    steps = transcript(first, EMPTY)
    assert len(steps) == 6
    for step in steps:
        assert all(c["prompt_tokens"] > 50 and 0 < c["completion_tokens"] <= 6 for c in step["calls"])
        assert len(step["replies"]) == len(step["calls"]) == (1 if step["valid"] else 2)
    results = json.loads((first / "results.json").read_text())
    assert results["llm"]["replies"] == sum(len(s["calls"]) for s in steps)
    assert results["overall"]["invalid_actions"]["rate"] == sum(not s["valid"] for s in steps) / 6
    started = run_events(first, "run_started")[0]
    assert started["versions"]["transformers"] == "5.23.0" and started["versions"]["torch"].startswith("2.13.0")
    # greedy decoding and the seeded fallback: the same evaluation again is the same, reply for reply
    assert [(s["replies"], s["action"]) for s in transcript(second, EMPTY)] == [(s["replies"], s["action"])
                                                                                 for s in steps]
    wrong = home.cli("run", str(home.evaluation("nodir", None, environment={"env_id": EMPTY}, model={
        **model, "model": str(tmp_path / "nothing-here")})))
    assert wrong.returncode == 2 and "model.model: " in wrong.stderr and "not a model directory" in wrong.stderr


def test_conformance(home):
    with StubServer(goal_seeker) as server:
        report = check_worker("balrog", json.loads(home.evaluation(
            "conformance", server, environment={"env_id": EMPTY}, episodes=2, max_steps=6).read_text()), home=home.root,
            bad_config={"environment": {"env_id": EMPTY}, "history": -1})
    assert report.of_type("episode") and report.of_type("metrics")[-1]["num_episodes_lifetime"] == 2
    assert (report.run.root / "results.json").exists()


def test_an_evaluation_submitted_to_the_daemon(home):
    with StubServer(goal_seeker) as server:
        config = json.loads(home.evaluation("daemon", server, environment={"env_id": EMPTY}, episodes=3,
                                            max_steps=10).read_text())
        info, events = run_under_daemon(home.root, config, timeout=300)
    assert info.state_reason == "completed", info.failure_reason
    assert [e["type"] for e in events if e["type"] == "episode"] == ["episode"] * 3
    results = json.loads((Path(info.run_dir) / "results.json").read_text())
    assert results["overall"]["episodes"] == 3 and (Path(info.run_dir) / "transcripts" / f"{EMPTY}.jsonl").exists()


def test_frames_pause_resume_and_ctrl_c_of_a_live_evaluation(home, tmp_path):
    slow = lambda body: {"text": goal_seeker(body), "delay_s": 0.02}  # noqa: E731
    with StubServer(slow) as server:
        config = home.evaluation("live", server, environment={"env_ids": [GOTO]}, episodes=500, max_steps=30,
                                 reporting={"heartbeat_interval_s": 0.5}, fastlane={"enabled": True})
        check_live_evaluation(home, config, "balrog-live-1", tmp_path / "live.png")


def test_every_installed_task_is_played_or_refused_with_its_reason(home):
    """Each MiniGrid-* and BabyAI-* id minigrid registers: built, described and three steps played, or refused."""
    listed = subprocess.run([str(home.python), "-c", "import json; from balrog_worker.cli import task_ids, "
                             "unavailable; print(json.dumps([task_ids(), unavailable()]))"],
                            capture_output=True, text=True, timeout=300)
    everything, gone = json.loads(listed.stdout)
    assert len(everything) > 150 and any(t.startswith("BabyAI-") for t in everything)
    assert gone and all(t.startswith("MiniGrid-WFC-") for t in gone)  # minigrid's wheel lacks their images
    tasks = [t for t in everything if t not in gone]
    with StubServer(["ACTION: turn left"]) as server:
        for task, reason in gone.items():
            refused = home.cli("run", str(home.evaluation("gone", server, environment={"env_ids": [EMPTY, task]})))
            assert refused.returncode == 2
            assert f"environment.env_ids[1]: {task} cannot be played here: {reason}" in refused.stderr
        proc = home.cli("run", str(home.evaluation("all", server, environment={"family": "minigrid", "env_ids": tasks},
                                                   episodes=1, max_steps=3)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = home.runs()
    results = json.loads((run / "results.json").read_text())
    assert set(results["tasks"]) == set(tasks) and all(r["steps"] == 3 for r in results["tasks"].values())
    for task in tasks:
        first = transcript(run, task)[0]["observation"]
        assert first.startswith("Mission: ") and "You see:" in first and "\nYou carry " in first
