"""A BenchMARL run on a competitive PettingZoo task served as a player (``--player``): raw observations in, the actions
BenchMARL's own policy takes on TorchRL's encoding of them out, one agent at a time; a match against it through
``mosaic eval RUN --opponent RUN|random --seats ...``; and ``mosaic eval`` of the run itself on PettingZoo's env."""

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
