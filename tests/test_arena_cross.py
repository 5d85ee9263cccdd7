"""Players from different worker environments in one tournament: a Ray PPO run (MOSAIC's environment), a
Tianshou DQN run (Tianshou's own environment), random play and a language model (the mosaic_llm worker, on a
real local server speaking OpenAI's protocol) on tic-tac-toe; and `mosaic eval RUN --opponent` across them."""

from __future__ import annotations

import json

import pytest

from cli_support import REPO, run_cli, write_config
from mosaic.host.daemon.endpoint import stop_daemon
from mosaic.testing.stub_llm_server import StubServer

pytestmark = pytest.mark.xdist_group("arena")

TICTACTOE = {"family": "classic", "env_id": "tictactoe_v3"}
KEY_ENV = "MOSAIC_CROSS_LLM_KEY"
ENV = {"RAY_AUTH_MODE": "disabled", KEY_ENV: "local-test-key"}


@pytest.fixture(scope="module")
def field(tmp_path_factory):
    """A home with Tianshou's environment, a tiny trained run of each library, and a language model's server."""
    from mosaic.runs import RunStore
    from mosaic.testing.worker_homes import WorkerHome, worker_env_for_tests

    home = tmp_path_factory.mktemp("cross") / "home"
    WorkerHome.create(home, "tianshou",
                      worker_env_for_tests("tianshou", REPO, lambda: tmp_path_factory.mktemp("ts-env")))
    ray_config = write_config(home / "ray.json", {
        "worker": "ray", "algorithm": "ppo", "total_timesteps": 400, "rllib": {"num_env_runners": 0},
        "environment": {**TICTACTOE, "api_type": "AEC"}, "policy_configuration": "INDEPENDENT",
        "algo_params": {"train_batch_size_per_learner": 200, "minibatch_size": 100, "num_epochs": 1,
                        "fcnet_hiddens": [32, 32]}})
    ts_config = write_config(home / "ts.json", {
        "worker": "tianshou", "algorithm": "dqn", "seed": 0, "environment": TICTACTOE, "learner_seat": "player_1",
        "total_timesteps": 600, "num_envs": 4, "collect_steps": 8, "update_per_step": 0.25, "learning_starts": 256,
        "hidden_sizes": [64, 64], "test_every_timesteps": 0, "gamma": 0.9,
        "algo_params": {"n_step_return_horizon": 3, "target_update_freq": 320, "eps_training": 0.1}})
    for config, run_id in ((ray_config, "ttt-ray"), (ts_config, "ttt-tianshou")):
        done = run_cli("run", str(config), "--run-id", run_id, home=home, timeout=900, env=ENV)
        assert done.returncode == 0, done.stderr[-3000:]
    store = RunStore(home)
    with StubServer(["ACTION: 4"]) as server:  # the centre, else (taken) a retry and a legal random move
        llm = home / "llm.yaml"
        llm.write_text(json.dumps({
            "worker": "mosaic_llm", "label": "llm", "environment": TICTACTOE, "retries_per_action": 1,
            "model": {"backend": "openai", "base_url": server.base_url, "model": server.model,
                      "api_key_env": KEY_ENV, "backoff_s": 0.01}}))
        yield {"home": home, "ray": store.resolve("ttt-ray").root, "tianshou": store.resolve("ttt-tianshou").root,
               "llm": llm, "server": server}




def test_four_libraries_meet_in_one_tournament(field, tmp_path):
    home = field["home"]
    spec = write_config(tmp_path / "cross.json", {
        "name": "cross", "environment": TICTACTOE, "games_per_pairing": 2, "seed": 3, "report": {"reps": 100},
        "players": {"ray-ppo": str(field["ray"]), "tianshou-dqn": str(field["tianshou"]), "random": "random",
                    "llm": str(field["llm"])}})
    requests = len(field["server"].requests)
    try:  # two shards at once, each a run of the daemon started for the home
        done = run_cli("arena", "run", str(spec), "--parallel", "2", home=home, timeout=900, env=ENV)
    finally:
        stop_daemon(home)
    assert done.returncode == 0, done.stderr[-3000:]
    games = [json.loads(x) for x in (home / "arena" / "cross" / "games.jsonl").read_text().splitlines()]
    assert len(games) == 6 * 2
    for label in ("ray-ppo", "tianshou-dqn", "random", "llm"):
        firsts = [g for g in games if g["first"] == label]
        assert len(firsts) == 3, (label, games)  # each player moved first once against each other player
    for g in games:  # every game ended by its rules: a forfeit by an illegal move is -1 for the mover only
        assert sum(g["returns"].values()) == 0 and 5 <= g["length"] <= 9, g
    assert len(field["server"].requests) > requests  # the language model was asked for its moves
    report = run_cli("arena", "report", "cross", home=home, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    ratings = json.loads((home / "arena" / "cross" / "report" / "ratings.json").read_text())["ratings"]
    assert set(ratings) == {"ray-ppo", "tianshou-dqn", "random", "llm"}


@pytest.mark.parametrize("run, opponent", [("tianshou", "ray"), ("ray", "llm")])
def test_eval_against_another_librarys_player(field, run, opponent):
    home = field["home"]
    done = run_cli("eval", str(field[run]), "--opponent", str(field[opponent]), "--episodes", "2", "--json",
                   home=home, timeout=600, env=ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads(done.stdout)
    assert results["num_episodes"] == 2 and len(results["outcomes"]) == 2
    manifest = json.loads((field[run] / "analytics.json").read_text())
    assert manifest["evaluations"][-1]["num_episodes"] == 2
