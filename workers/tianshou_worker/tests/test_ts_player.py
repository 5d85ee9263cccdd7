"""A Tianshou classic-game run served as a player (``--player``): raw PettingZoo observations in, the trained
seat's greedy masked moves out, for either seat; the same moves Tianshou's policy makes on the observations
its training env (Tianshou's PettingZooEnv) gives it; seated in real matches against random play."""

from __future__ import annotations

import json
import subprocess

import pytest

from test_ts_classic import GAME

TICTACTOE = {"family": "classic", "env_id": "tictactoe_v3"}
CONNECT_FOUR = {"family": "classic", "env_id": "connect_four_v3"}

#: Run in the worker's environment: games on Tianshou's PettingZooEnv (what training stepped) and on the raw
#: PettingZoo game (what a match plays) in lockstep; each move, the raw observation, the move of the trained
#: multi-agent policy (the learner's seat id, Tianshou's own dispatch) on the training env's observation, and
#: the move of mosaic eval's actor; moves alternate between that policy and random legal play.
EQUIVALENCE = r"""
import json, sys
import numpy as np, torch
from tianshou.data import Batch
from mosaic.workerkit.envs import make_env
from mosaic.workerkit.player import to_wire
from tianshou_worker import classic
from tianshou_worker.runtime import learner_of, load_checkpoint

torch.set_num_threads(1)
folder, state, config, algo = load_checkpoint(sys.argv[1], "--evaluate")
algo.eval()
evaluation = classic.SeatActor(learner_of(config, algo).policy)
trained = classic.make_env(config.resolved_env_id)
raw = make_env("classic", config.resolved_env_id, "AEC")
seat = trained.agents[classic.seat_index(list(trained.agents), config.learner_seat)]
rng = np.random.default_rng(0)
for game in range(int(sys.argv[2])):
    seen, _ = trained.reset(seed=game)
    raw.reset(seed=game)
    for agent in raw.agent_iter():
        obs, _, term, trunc, _ = raw.last()
        if term or trunc:
            raw.step(None)
            continue
        assert seen["agent_id"] == agent, (seen["agent_id"], agent)
        batch = Batch(obs=Batch(agent_id=np.array([seat]), obs=np.asarray(seen["obs"])[None],
                                mask=np.asarray(seen["mask"])[None]), info=Batch())
        with torch.no_grad():
            training = int(algo.policy(batch).act[0])
        print(json.dumps({"game": game, "agent": agent, "observation": to_wire(obs), "training": training,
                          "evaluation": evaluation.compute_action(obs)}))
        move = training if rng.random() < 0.5 else int(rng.choice(np.flatnonzero(obs["action_mask"])))
        raw.step(move)
        seen, *_ = trained.step(move)
"""


@pytest.fixture(scope="module")
def game_run(module_home):
    fields = {**GAME, "total_timesteps": 700, "test_every_timesteps": 0}
    proc = module_home.cli("run", str(module_home.config("ttt", algorithm="dqn", seed=0, **fields)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return module_home.runs()[-1]


@pytest.fixture(scope="module")
def served(module_home, game_run):
    """The run as a greedy player and as an epsilon-greedy one, and random play: one process each."""
    from mosaic.host.match import open_player

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MOSAIC_HOME", str(module_home.root))
        with open_player(str(game_run)) as greedy, open_player(str(game_run), {"epsilon": 0.5}) as noisy, \
                open_player("random") as rnd:
            noisy.label = "noisy"
            yield greedy, noisy, rnd


def test_the_player_moves_as_tianshous_policy_does_on_the_training_envs_observations(module_home, game_run,
                                                                                    served):
    from mosaic.workerkit.player import from_wire

    greedy = served[0]
    assert greedy.environment == {**TICTACTOE, "env_kwargs": {}}
    assert greedy.agents == ["player_1", "player_2"]
    proc = subprocess.run([module_home.python, "-c", EQUIVALENCE, str(game_run), "6"], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    moves = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    for move in moves:
        answer = greedy.act(move["agent"], from_wire(move["observation"]))
        assert answer == move["training"] == move["evaluation"], move
        assert from_wire(move["observation"])["action_mask"][answer] == 1
    assert len(moves) >= 25 and {m["agent"] for m in moves} == {"player_1", "player_2"}
    # the greedy policy is not a constant: it answers different boards differently
    assert len({m["training"] for m in moves}) >= 3


def test_the_player_plays_repeatable_matches_against_random_in_both_seats(served):
    from mosaic.host.match import play_match

    greedy, noisy, rnd = served
    for player in (greedy, noisy):
        seatings = [{"player_1": player, "player_2": rnd}, {"player_1": rnd, "player_2": player}]
        first = play_match(TICTACTOE, seatings, games=6, seed=5)
        again = play_match(TICTACTOE, seatings, games=6, seed=5)
        assert [g.seats["player_1"] for g in first.games] == [player.label, "random"] * 3  # seats alternate
        # zero-sum, and no game ended by an illegal move (a tic-tac-toe win takes 5 moves or more)
        assert all(sum(g.returns.values()) == 0 and 5 <= g.length <= 9 for g in first.games)
        assert [(g.returns, g.length) for g in first.games] == [(g.returns, g.length) for g in again.games]
        assert len(first.scores(player.label)) == 6
    # epsilon 0.5 really plays other moves than the greedy policy (seeded by each game's reset)
    greedy_games = play_match(TICTACTOE, [{"player_1": greedy, "player_2": rnd}], games=6, seed=5)
    noisy_games = play_match(TICTACTOE, [{"player_1": noisy, "player_2": rnd}], games=6, seed=5)
    assert [(g.returns, g.length) for g in greedy_games.games] != [(g.returns, g.length) for g in noisy_games.games]


def test_a_match_on_another_game_is_refused_naming_the_difference(served):
    from mosaic.host.match import PlayerError, play_match

    greedy, _, rnd = served
    with pytest.raises(PlayerError, match="trained on classic/tictactoe_v3, not classic/connect_four_v3"):
        play_match(CONNECT_FOUR, [{"player_0": greedy, "player_1": rnd}], games=1)


def test_unknown_options_and_single_agent_runs_are_refused(module_home, game_run):
    proc = module_home.cli("player", str(game_run), "--options", '{"temperature": 1}', input="", timeout=300)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.strip().splitlines()[-1] == ("mosaic: error: --player-options: unknown option "
                                                   "'temperature'; allowed: deterministic, epsilon")
    cartpole = module_home.config("cartpole", algorithm="dqn", seed=0, total_timesteps=150, learning_starts=64,
                                  reporting={"every_timesteps": 100})
    trained = module_home.cli("run", str(cartpole))
    assert trained.returncode == 0, trained.stderr[-3000:]
    proc = module_home.cli("player", str(module_home.runs()[-1]), input="", timeout=300)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("mosaic: error: --player: ") and "trained on a single-agent Gymnasium env (CartPole-v1" in line


def test_the_worker_describes_itself_as_serving_players(module_home):
    proc = subprocess.run([module_home.python, "-m", "tianshou_worker.cli", "--describe"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["can_serve_player"] is True
