"""A XuanCe run served as a player (``--player``): a team that acts for any of its agents, one at a time, with the
actions the worker's own evaluation (``mosaic eval``: every agent in one forward pass) picks for it."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest

from xc_support import Home

ADVERSARY = {"family": "mpe", "env_id": "simple_adversary_v3", "api_type": "PARALLEL", "env_kwargs": {"max_cycles": 25}}
SPREAD = {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
          "env_kwargs": {"N": 2, "max_cycles": 25}}

#: Run in the worker's environment: the worker's evaluation (load_agent, JointActor, play_episodes, as
#: ``mosaic eval`` plays) of a run, printing every step's raw observations and the actions it took for them.
EVALUATION = r"""
import contextlib, json, sys, tempfile
from pathlib import Path
from mosaic.workerkit.checkpoints import resolve
from mosaic.workerkit.evaluation import play_episodes
from mosaic.workerkit.player import to_wire
from xuance_worker.envs import ObservationCodec
from xuance_worker.evaluation import JointActor, Seating, load_agent
from xuance_worker.runtime import XuanCeCheckpointState

out = {}
for target, episodes in zip(sys.argv[1::2], sys.argv[2::2]):
    state, folder = XuanCeCheckpointState.read(target), resolve(target)
    steps = []

    class Recording(JointActor):
        def compute_actions(self, observations, steps=steps):
            actions = super().compute_actions(observations)
            steps.append({"obs": {a: to_wire(o) for a, o in zip(self.agents, observations)},
                          "actions": {a: to_wire(x) for a, x in zip(self.agents, actions)}})
            return actions

    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(sys.stderr):
        agent, envs, config = load_agent(folder, state, Path(scratch))
        env = config.environment.make()
        codec = ObservationCodec({a: env.observation_space(a) for a in env.possible_agents})
        actor = Recording(agent, list(envs.agents), "x", codec)
        play_episodes(env, [Seating(actor)], int(episodes), seed=11)
    out[target] = {"steps": steps, "shared": bool(agent.use_parameter_sharing)}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def runs(xuance_env, tmp_path_factory) -> dict:
    """A tiny MAPPO on simple_adversary (a network per agent: their spaces differ) and a tiny IPPO on simple_spread
    with one shared network (XuanCe appends one-hot agent ids)."""
    home = Home.create(tmp_path_factory.mktemp("xc-player") / "home", "xuance", xuance_env)
    out = {"home": home}
    for name, algorithm, environment, fields in (
            ("adversary", "mappo", ADVERSARY,
             {"total_timesteps": 1000, "algo_params": {"use_parameter_sharing": False}}),
            ("spread", "ippo", SPREAD, {"total_timesteps": 400})):
        proc, run = home.run(algorithm, environment=environment, **fields)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out[name] = run
    return out


@pytest.fixture(scope="module")
def served(runs):
    """The adversary run's player process (MOSAIC_HOME: the test home, where the worker's environment is)."""
    from mosaic.host.match import open_player

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MOSAIC_HOME", str(runs["home"].root))
        player = open_player(str(runs["adversary"]))
    yield player
    player.close()


@pytest.fixture(scope="module")
def recorded(runs) -> dict:
    """The worker's own evaluation of both runs (two episodes of the adversary run, one of the spread run), in
    one process of the worker's environment: every step's raw observations and the actions it took."""
    episodes = {"adversary": 2, "spread": 1}
    args = [x for name, n in episodes.items() for x in (str(runs[name]), str(n))]
    proc = subprocess.run([runs["home"].python, "-c", EVALUATION, *args], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    return {name: out[str(runs[name])] for name in episodes}


def _compare(player, recorded: dict) -> int:
    """Ask the player for each agent alone (in reverse order, so no joint batch could be reused); returns how
    many actions were compared."""
    from mosaic.workerkit.player import from_wire

    compared = 0
    for step in recorded["steps"]:
        for agent in reversed(list(step["obs"])):
            served_action = player.act(agent, from_wire(step["obs"][agent]))
            assert served_action == from_wire(step["actions"][agent]), (compared, agent)
            compared += 1
    return compared


def test_the_player_acts_as_the_workers_evaluation_does_agent_by_agent(recorded, served):
    assert served.environment == {"family": "mpe", "env_id": "simple_adversary_v3",
                                  "env_kwargs": {"max_cycles": 25}, "api_type": "PARALLEL"}
    assert sorted(served.agents) == ["adversary_0", "agent_0", "agent_1"]
    adversary = recorded["adversary"]
    assert adversary["shared"] is False
    served.reset(0)
    assert _compare(served, adversary) == 2 * 25 * 3
    # a trained policy acts on what it observes: not one action for every observation
    assert len({json.dumps(s["actions"], sort_keys=True) for s in adversary["steps"]}) > 1


def test_under_parameter_sharing_each_agent_gets_its_own_agent_id(runs, recorded):
    """One shared network: the action depends on the agent's one-hot id, which XuanCe appends as in training."""
    from mosaic.host.match import open_player

    assert recorded["spread"]["shared"] is True
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MOSAIC_HOME", str(runs["home"].root))
        with open_player(str(runs["spread"])) as player:
            assert _compare(player, recorded["spread"]) == 25 * 2


def test_the_player_refuses_another_env_naming_the_difference(served):
    from mosaic.host.match import play_match
    from mosaic.workerkit.player import PlayerError

    team = {"adversary_0": served, "agent_0": served, "agent_1": served}
    with pytest.raises(PlayerError, match="trained on mpe/simple_adversary_v3, not mpe/simple_tag_v3"):
        play_match({"family": "mpe", "env_id": "simple_tag_v3"},
                   [{a: served for a in ("adversary_0", "adversary_1", "adversary_2", "agent_0")}], games=1)
    with pytest.raises(PlayerError, match="differ in max_cycles"):
        play_match({**ADVERSARY, "env_kwargs": {"max_cycles": 50}}, [team], games=1)
    # on its own env it plays every seat, as a team, its answers repeat with the seed
    first = play_match(ADVERSARY, [team], games=1, seed=3, max_steps=5)
    again = play_match(ADVERSARY, [team], games=1, seed=3, max_steps=5)
    assert first.games[0].moves == again.games[0].moves and len(first.games[0].moves) == 5
    assert first.games[0].teams == {served.label: pytest.approx(sum(first.games[0].returns.values()))}


def test_describe_says_it_serves_a_player_and_bad_options_are_refused(runs):
    home = runs["home"]
    proc = subprocess.run([home.python, "-m", "xuance_worker.cli", "--describe"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["can_serve_player"] is True
    for options, words in (({"module_id": "x"}, "'module_id' not known to the xuance worker's player; allowed: "
                                                "deterministic"),
                           ({"deterministic": "yes"}, "deterministic: 'yes' is not a boolean")):
        proc = subprocess.run([home.python, "-m", "xuance_worker.cli", "--player", str(runs["adversary"]),
                               "--player-options", json.dumps(options)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2 and f"mosaic: error: --player-options: {words}" in proc.stderr, proc.stderr
        assert proc.stdout == ""  # no hello: refused before serving


def test_sampled_play_repeats_with_the_seed(runs):
    """deterministic: false samples MAPPO's distributions, seeded by reset."""
    from mosaic.workerkit.player import PlayerProcess

    home = runs["home"]
    command = [home.python, "-m", "xuance_worker.cli", "--player", str(runs["adversary"]), "--player-options",
               json.dumps({"deterministic": False})]
    observation = np.linspace(-1, 1, 10, dtype=np.float32)
    with PlayerProcess(command) as player:
        draws = []
        for _ in range(2):
            player.reset(5)
            draws.append([int(player.act("agent_0", observation)) for _ in range(12)])
    assert draws[0] == draws[1] and len(set(draws[0])) > 1
