"""Every env id the worker's environment offers either trains a tiny MAPPO run or is refused with a documented reason.

Some envs train once a documented setting is changed (a network per agent, knights that cannot be killed): the walk
tries that setting and trains with it. Each trains one update (50 env steps, a batch of 50); image envs at the
smallest frames (or fewest agents) they offer. cooperative_pong is trained and evaluated by test_xc_training.py
instead. Turn-based classic games train in turns (the turn adapter, with action masks); the configs name no
``api_type``: the worker chooses it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

FAMILIES = ("mpe", "sisl", "butterfly", "classic")
#: The refusals docs/xuance-worker.md lists, by the words of their messages.
REASONS = ("has a single agent", "its agents observe or act in different spaces", "can be killed and leave the episode",
           "could not be imported")
#: The documented change that makes a refused env train, by the field its refusal names.
CHANGES = {"algo_params.use_parameter_sharing": {"algo_params": {"use_parameter_sharing": False}},
           "environment.env_kwargs": {"env_kwargs": {"killable_knights": False, "killable_archers": False}}}
#: Smaller problems the image envs offer, for a test's budget (XuanCe still sees the frames the env gives).
SMALL = {"pistonball_v6": {"n_pistons": 2}, "go_v5": {"board_size": 5}}
IMAGES = {"pistonball_v6"}
#: Trained (and evaluated) by another test, so not trained again here.
TRAINED_ELSEWHERE = {"butterfly/cooperative_pong_v5": "test_xc_training.py::test_an_image_env_trains_a_cnn_and_evaluates"}
DOCS = Path(__file__).resolve().parents[3] / "docs" / "xuance-worker.md"

CHECK_ALL = """
import json, sys
changes = json.loads(sys.argv[2])
from mosaic.workerkit.envs import available_env_ids
from mosaic.errors import ConfigError
from xuance_worker.config import XuanCeConfig
from xuance_worker.runtime import probe_env, quiet_xuance
quiet_xuance()
out = {}
for family in json.loads(sys.argv[1]):
    for env_id in available_env_ids(family):
        data = {"run_id": "check", "algorithm": "mappo", "environment": {"family": family, "env_id": env_id}}
        key = f"{family}/{env_id}"
        try:
            probe_env(XuanCeConfig.from_dict(data))
            out[key] = ["ok", None]
        except ConfigError as exc:
            out[key] = [str(exc), None]
            change = changes.get(exc.field)
            if change is not None:  # the documented way round it
                changed = {**data, "algo_params": change.get("algo_params", {}),
                           "environment": {**data["environment"], "env_kwargs": change.get("env_kwargs", {})}}
                try:
                    probe_env(XuanCeConfig.from_dict(changed))
                    out[key] = ["ok with " + exc.field, change]
                except ConfigError as again:
                    out[key] = [str(again), None]
print(json.dumps(out))
"""


def test_every_env_id_trains_or_is_refused_with_a_documented_reason(home):
    checked = subprocess.run([home.python, "-c", CHECK_ALL, json.dumps(FAMILIES), json.dumps(CHANGES)],
                             capture_output=True, text=True, timeout=600, check=True)
    verdicts = {env: why for env, (why, _) in json.loads(checked.stdout.strip().splitlines()[-1]).items()}
    changes = {env: change for env, (_, change) in json.loads(checked.stdout.strip().splitlines()[-1]).items()}
    refused = {env: why for env, why in verdicts.items() if not why.startswith("ok")}
    undocumented = {env: why for env, why in refused.items() if not any(r in why for r in REASONS)}
    assert not undocumented, undocumented
    docs = DOCS.read_text()
    assert all(reason in docs for reason in REASONS)
    accepted = sorted(env for env, why in verdicts.items() if why.startswith("ok"))
    # images (XuanCe's CNN), 2-D and discrete observations (flattened), simultaneous and turn-based classic games
    assert {"mpe/simple_spread_v3", "sisl/waterworld_v4", "sisl/pursuit_v4", "butterfly/pistonball_v6",
            "butterfly/cooperative_pong_v5", "butterfly/knights_archers_zombies_v10", "classic/rps_v2",
            "classic/tictactoe_v3", "classic/connect_four_v3", "classic/go_v5"} <= set(accepted)
    # agents that observe or act differently train with a network each; knights and archers that cannot die train
    assert {"mpe/simple_adversary_v3", "mpe/simple_tag_v3", "butterfly/knights_archers_zombies_v10"} <= {
        e for e in accepted if verdicts[e] != "ok"}
    for env in sorted(set(accepted) - set(TRAINED_ELSEWHERE)):
        family, env_id = env.split("/")
        change = changes[env] or {}
        kwargs = {**SMALL.get(env_id, {}), **change.get("env_kwargs", {})}
        steps = 50  # one update (batch_size 50): the walk's cost is each run's start, not its training
        proc, run = home.run("mappo", environment={"family": family, "env_id": env_id, "env_kwargs": kwargs},
                             algo_params=change.get("algo_params", {}),
                             total_timesteps=steps, num_envs=1, batch_size=50, reporting={"every_timesteps": steps})
        assert proc.returncode == 0, (env, proc.stderr[-2000:])
        (metrics,) = home.events(run, "metrics")
        assert metrics["timesteps_total"] == steps, env
        (started,) = home.events(run, "run_started")
        observed = set(started["observations"].values())
        turns = family == "classic" and env_id != "rps_v2"  # PettingZoo's AEC-only games
        assert (started["env"]["api_type"] == "AEC") == turns, env
        assert started["set_for_env"].get("use_actions_mask", False) == turns, env
        if env_id in IMAGES:  # pixels, to XuanCe's CNN, with its settings for images
            assert all(o.startswith("image ") for o in observed), observed
            assert started["set_for_env"]["representation"] == "Basic_CNN" and started["xuance_yaml"] == "mappo/atari.yaml"
        elif family == "classic" or env_id in ("pursuit_v4", "knights_archers_zombies_v10"):
            expected = {"pursuit_v4": "flatten(7x7x3)", "knights_archers_zombies_v10": "flatten(27x5)",
                        "rps_v2": "one-hot(4)", "tictactoe_v3": "flatten(3x3x2)", "connect_four_v3": "flatten(6x7x2)",
                        "go_v5": "flatten(5x5x17)"}[env_id]  # a board game's board, without its action mask
            assert all(o.startswith(expected + " by mosaic.workerkit.spaces") for o in observed), observed
        else:
            assert all(o.startswith("vector ") for o in observed), observed


@pytest.mark.parametrize("family, env_id, field", [("mpe", "simple_adversary_v3", "algo_params.use_parameter_sharing"),
                                                   ("butterfly", "knights_archers_zombies_v10", "environment.env_kwargs"),
                                                   ("classic", "tictactoe_v3", "environment.api_type"),
                                                   ("mpe", "simple_spread_v3", "environment.api_type")])
def test_refusals_are_one_line_errors_before_any_run_folder(home, family, env_id, field):
    # an api_type the game cannot be played through: PARALLEL for a turn-based game, AEC for a parallel one
    api_type = "AEC" if env_id == "simple_spread_v3" else "PARALLEL"
    proc = home.cli("run", str(home.config("refused", environment={"family": family, "env_id": env_id,
                                                                    "api_type": api_type})))
    assert proc.returncode == 2 and proc.stderr.startswith(f"mosaic: error: {field}: "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and home.runs() == []


AGENT_LEAVES = """
from argparse import Namespace
from xuance_worker import envs
from xuance_worker.runtime import quiet_xuance
quiet_xuance()
spec = {"family": "butterfly", "env_id": "knights_archers_zombies_v10", "api_type": "PARALLEL",
        "env_kwargs": {"spawn_rate": 2}}
env = envs.make_raw_env_class()(Namespace(mosaic_env=spec, env_seed=1, seed=1))
try:
    for episode in range(20):
        env.reset()
        for step in range(900):
            _, _, terminated, done, _ = env.step({a: env.action_space[a].sample() for a in env.agents})
            if all(terminated.values()) or done:
                break
    print("nobody left")
except RuntimeError as exc:
    print(exc)
"""


def test_an_agent_leaving_mid_episode_stops_the_env_adapter_naming_it(home):
    """What validation refuses (killable knights), the adapter also catches: XuanCe would fail with a KeyError."""
    out = subprocess.run([home.python, "-c", AGENT_LEAVES], capture_output=True, text=True, timeout=600, check=True)
    said = out.stdout.strip().splitlines()[-1]
    assert said.startswith("knights_archers_zombies_v10: ") and " left the episode at step " in said, out.stdout
    assert said.endswith("XuanCe's multi-agent loop needs every agent at every step")


STEP_BOUND = """
import json
from argparse import Namespace
from xuance_worker import envs
from xuance_worker.runtime import quiet_xuance
quiet_xuance()
out = {}
for family, env_id in json.loads(__import__("sys").argv[1]):
    spec = {"family": family, "env_id": env_id, "api_type": "PARALLEL", "env_kwargs": {"max_cycles": 7}}
    env = envs.make_raw_env_class()(Namespace(mosaic_env=spec, env_seed=1, seed=1))
    env.reset()
    steps, done = 0, False
    while not done and steps < 50:
        _, _, terminated, done, _ = env.step({a: env.action_space[a].sample() for a in env.agents})
        steps += 1
        done = done or all(terminated.values())
    out[env_id] = [env.max_episode_steps, steps]
    env.close()
print(json.dumps(out))
"""


def test_the_adapter_reads_each_familys_step_bound(home):
    """max_cycles from env_kwargs is the adapter's bound for every family: SISL keeps it on the game object its
    raw env holds, where the adapter once missed it and fell back to 500."""
    envs = [("mpe", "simple_spread_v3"), ("sisl", "pursuit_v4"), ("sisl", "waterworld_v4"),
            ("butterfly", "pistonball_v6")]  # (multiwalker needs Box2D, which this environment does not have)
    out = subprocess.run([home.python, "-c", STEP_BOUND, json.dumps(envs)], capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    bounds = json.loads(out.stdout.strip().splitlines()[-1])
    assert {env_id: bound for env_id, (bound, _) in bounds.items()} == {env_id: 7 for _, env_id in envs}
    assert {env_id: steps for env_id, (_, steps) in bounds.items()} == {env_id: 7 for _, env_id in envs}
