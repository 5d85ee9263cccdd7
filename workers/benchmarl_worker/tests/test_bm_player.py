"""A BenchMARL run on a competitive PettingZoo task served as a player (``--player``): raw observations in, the actions
BenchMARL's own policy takes on TorchRL's encoding of them out, one agent at a time; a match against it through
``mosaic eval RUN --opponent RUN|random --seats ...``; an arena tournament of it against MOSAIC's random player
process (``mosaic arena run``); and ``mosaic eval`` of the run itself on PettingZoo's env."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from bm_support import Home

#: simple_tag with two adversaries chasing one good agent: BenchMARL groups them as ``adversary`` and ``agent``.
TAG = {"family": "pettingzoo", "env_id": "simple_tag",
       "env_kwargs": {"num_good": 1, "num_adversaries": 2, "num_obstacles": 1, "max_cycles": 25}}
TAG_FIELDS = {"environment": TAG, "num_envs": 2, "total_timesteps": 100, "batch_size": 25,
              "algo_params": {"on_policy_collected_frames_per_batch": 50, "on_policy_n_minibatch_iters": 1}}
AGENTS = ["adversary_0", "adversary_1", "agent_0"]
#: What the run's player says it trained on: PettingZoo's env in MOSAIC's words, as BenchMARL built it (MAPPO acts
#: in simple_tag's continuous actions, BenchMARL's preference).
PLAYED = {"family": "mpe", "env_id": "simple_tag_v3", "api_type": "PARALLEL",
          "env_kwargs": {**TAG["env_kwargs"], "continuous_actions": True}}

#: Run in the worker's environment: BenchMARL's own collection policy, greedy, on TorchRL's PettingZoo env as
#: BenchMARL built it (the experiment's test env), for some steps; every step's raw PettingZoo observations (what
#: TorchRL encoded) and the actions BenchMARL's policy took on the tensordict.
REFERENCE = r"""
import json, sys
import torch
from torchrl.envs.utils import ExplorationType, set_exploration_type
from mosaic.workerkit.player import to_wire
from benchmarl_worker import policy as trained

folder, state, config, policy = trained.load(sys.argv[1], "reference")
experiment = policy.experiment
env = experiment.test_env
raw = env.base_env._env if hasattr(env, "base_env") else env._env
seen = {}
for name in ("reset", "step"):
    def keep(*args, _call=getattr(raw, name), **kwargs):
        out = _call(*args, **kwargs)
        seen["obs"] = dict(out[0])
        return out
    setattr(raw, name, keep)
steps = []
td = env.reset()
with torch.no_grad(), set_exploration_type(ExplorationType.DETERMINISTIC):
    for _ in range(int(sys.argv[2])):
        td = experiment.policy(td)
        actions = {agent: td.get((group, "action"))[i].numpy() for group, agents in experiment.group_map.items()
                   for i, agent in enumerate(agents)}
        steps.append({"obs": to_wire(seen["obs"]), "actions": to_wire(actions)})
        td = env.step(td)["next"]
print(json.dumps(steps))
"""


@pytest.fixture(scope="module")
def tag(benchmarl_env, tmp_path_factory) -> tuple[Home, object]:
    """A tiny MAPPO run on simple_tag (two collections of 50 frames)."""
    home = Home.create(tmp_path_factory.mktemp("bm-player") / "home", "benchmarl", benchmarl_env)
    proc = home.cli("run", str(home.config("tag", algorithm="mappo", seed=2, **TAG_FIELDS)), "--run-id", "tag")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return home, home.runs()[-1]


@pytest.mark.slow
def test_the_player_acts_as_benchmarls_policy_does_on_torchrls_encoding(tag):
    """Asked for each agent alone (in reverse order), over the wire, the player answers what BenchMARL's policy
    answered for the whole tensordict of TorchRL's PettingZoo env."""
    from mosaic.host.match import open_player
    from mosaic.workerkit.player import from_wire

    home, run = tag
    proc = subprocess.run([home.python, "-c", REFERENCE, str(run), "6"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    steps = json.loads(proc.stdout.strip().splitlines()[-1])
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MOSAIC_HOME", str(home.root))
        with open_player(str(run)) as player:
            assert player.environment == PLAYED and player.agents == AGENTS
            player.reset(0)
            for step in steps:
                for agent in reversed(AGENTS):
                    served = player.act(agent, from_wire(step["obs"][agent]))
                    wanted = from_wire(step["actions"][agent])
                    assert served.dtype == np.float32 and served.shape == (5,), (agent, served)
                    np.testing.assert_allclose(served, wanted, rtol=1e-6, atol=1e-7)
    # a trained policy acts on what it observes: not one action for every observation
    assert len({json.dumps(s["actions"]["adversary_0"]) for s in steps}) > 1


@pytest.mark.slow
def test_mosaic_eval_plays_the_run_and_a_match_seats_it_against_an_opponent(tag):
    home, run = tag
    proc = home.cli("eval", "tag", "--episodes", "2", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    alone = json.loads(proc.stdout)
    assert alone["num_episodes"] == 2 and alone["episode_length"]["mean"] == 25
    assert set(alone["per_agent_return"]) == set(AGENTS) and alone["opponent"] is None
    assert alone["seats"] == [{"players": {"adversary_0": "adversary", "adversary_1": "adversary",
                                           "agent_0": "agent"}, "opponent_agents": [], "episodes": 2,
                               "first_episode": 0}]
    assert alone["env"]["groups"] == {"adversary": ["adversary_0", "adversary_1"], "agent": ["agent_0"]}
    # the run plays the adversaries as a player; its good agent is played by another player of the same run
    proc = home.cli("eval", "tag", "--opponent", "tag", "--seats", "adversary_0,adversary_1", "--episodes", "2",
                    "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    match = json.loads(proc.stdout)
    assert match["num_episodes"] == 2 and match["opponent"] == "tag"
    assert match["seats"] == [{"players": {"adversary_0": "tag", "adversary_1": "tag", "agent_0": "tag (opponent)"},
                               "opponent_agents": ["agent_0"], "episodes": 2, "first_episode": 0}]
    assert {k: match["env"][k] for k in ("family", "env_id", "env_kwargs")} == \
        {k: PLAYED[k] for k in ("family", "env_id", "env_kwargs")}
    # the same greedy policies on the same seeds: the match plays the episodes the worker's own evaluation played
    assert match["per_agent_return"] == alone["per_agent_return"]
    # against random moves (MPE masks none: drawn from the env's action spaces in MOSAIC's process)
    proc = home.cli("eval", "tag", "--opponent", "random", "--seats", "agent_0", "--episodes", "2", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    chased = json.loads(proc.stdout)
    assert chased["seats"] == [{"players": {"adversary_0": "random", "adversary_1": "random", "agent_0": "tag"},
                                "opponent_agents": ["adversary_0", "adversary_1"], "episodes": 2,
                                "first_episode": 0}]
    assert chased["episode_length"]["mean"] == 25 and chased["per_agent_return"] != match["per_agent_return"]
    evaluations = json.loads((run / "analytics.json").read_text())["evaluations"]
    assert [e["opponent"] for e in evaluations] == [None, "tag", "random"]


@pytest.mark.slow
def test_bad_player_options_and_an_opponent_given_to_the_worker_are_refused(tag):
    home, run = tag
    for args, words in ((["--player", str(run), "--player-options", '{"module_id": "x"}'],
                         "--player-options: 'module_id' not known to the benchmarl worker's player; allowed: "
                         "deterministic"),
                        (["--player", str(run), "--player-options", '{"deterministic": "yes"}'],
                         "--player-options: deterministic: 'yes' is not a boolean"),
                        (["--evaluate", str(run), "--opponent", "random"],
                         "--opponent: the benchmarl worker's --evaluate plays the run's own groups in every seat")):
        proc = subprocess.run([home.python, "-m", "benchmarl_worker.cli", *args], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 2 and f"mosaic: error: {words}" in proc.stderr, proc.stderr
        assert proc.stdout == ""


def _processes_with_home(home: Home) -> list[str]:
    """Live processes started for ``home`` (their environment names it as MOSAIC_HOME: the CLI and every player it
    starts), this one aside."""
    import os

    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid != os.getpid() and proc.environ().get("MOSAIC_HOME") == str(home.root):
                found.append(f"{proc.info['pid']}: {' '.join(proc.info['cmdline'] or ())[:200]}")
        except psutil.Error:
            continue
    return found


@pytest.mark.slow
def test_an_arena_tournament_on_simple_tag_rates_the_runs_players_against_random_play(tag):
    """``mosaic arena run`` of a gauntlet of team games on the env the run trained on: MOSAIC's random player
    process, which draws from the action spaces the match tells it (continuous here), against the run's greedy
    player and the same run sampling its actions (``deterministic: false``), each side (the two adversaries, the
    good agent) in turn. Every pairing plays its games, each replays to its returns, `arena status` and `arena
    report` list every pairing and player, and no player process outlives the tournament."""
    from mosaic.host.match import replay
    from mosaic.workerkit.player import from_wire

    home, _ = tag
    environment = {key: PLAYED[key] for key in ("family", "env_id", "env_kwargs", "api_type")}
    spec = home.root / "tag-arena.json"
    spec.write_text(json.dumps({
        "name": "tag-arena", "environment": environment, "format": "gauntlet", "candidate": "random",
        "games_per_pairing": 2, "seed": 4, "report": {"reps": 100},
        "sides": {"adversaries": ["adversary_0", "adversary_1"], "good": ["agent_0"]},
        "players": {"random": "random", "greedy": "tag",
                    "sampled": {"target": "tag", "options": {"deterministic": False}}}}))
    proc = home.cli("arena", "run", str(spec), timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "played 4 game(s); 4 of 4 done" in proc.stderr, proc.stderr[-2000:]
    assert _processes_with_home(home) == [], "every player process must end with the tournament"
    games = [json.loads(line) for line in (home.root / "arena" / "tag-arena" / "games.jsonl").read_text().splitlines()]
    pairings = ["random~greedy", "random~sampled"]
    assert sorted((g["pairing"], g["game"]) for g in games) == [(p, i) for p in pairings for i in (0, 1)]
    for g in games:
        assert g["length"] == 25, "a game is one whole episode (max_cycles 25)"
        assert g["seed"] == 4, "the two games of a pair share the env's seed"
        adversaries, good = g["first"], g["second"]  # the first mover plays the first side; the pair swaps them
        assert g["sides"] == {adversaries: "adversaries", good: "good"}
        assert g["seats"] == {"adversary_0": adversaries, "adversary_1": adversaries, "agent_0": good}
        assert g["teams"][adversaries] == pytest.approx(g["returns"]["adversary_0"] + g["returns"]["adversary_1"])
        assert replay(environment, _game(g)) == pytest.approx(g["returns"]), "the recorded moves replay the game"
        for step in g["moves"]:  # continuous actions in [0, 1], every agent every step, random's too
            assert sorted(step) == AGENTS
            assert all(a.shape == (5,) and 0 <= a.min() <= a.max() <= 1 for a in map(from_wire, step.values()))
    # random's draws follow from the game's seed alone: on the same side and seed, against greedy or sampled play
    # (a process of its own in each pairing), it plays the same moves
    for side in ("adversaries", "good"):
        drawn = [[{a: x for a, x in step.items() if g["seats"][a] == "random"} for step in g["moves"]]
                 for g in sorted(games, key=lambda g: g["pairing"]) if g["sides"]["random"] == side]
        assert len(drawn) == 2 and drawn[0] == drawn[1], f"random's moves as {side} must follow from the seed alone"
    status = home.cli("arena", "status", "tag-arena")
    assert status.returncode == 0, status.stderr[-2000:]
    rows = [line.split() for line in status.stdout.splitlines()[1:] if line.strip() and not line.startswith("-")]
    assert rows == [["random", "vs", "greedy", "2", "2"], ["random", "vs", "sampled", "2", "2"]], status.stdout
    report = home.cli("arena", "report", "tag-arena")
    assert report.returncode == 0, report.stderr[-2000:]
    folder = home.root / "arena" / "tag-arena" / "report"
    ratings = json.loads((folder / "ratings.json").read_text())
    assert set(ratings["ratings"]) == {"greedy", "sampled", "random"}
    assert ratings["games"] == 4, "each pair of games rates one comparison per side: 4 in all"
    table = (folder / "ratings.csv").read_text().splitlines()
    column = table[0].split(",").index("games")
    assert {row.split(",")[0]: int(row.split(",")[column]) for row in table[1:]} == \
        {"random": 4, "greedy": 2, "sampled": 2}, "random plays both pairings, the others one each"


def _game(line: dict) -> object:
    from mosaic.host.match import Game

    return Game(line["game"], line["seed"], line["seats"], line["returns"], line["length"], None, line["teams"],
                line["moves"])
