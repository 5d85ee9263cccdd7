"""Real A2C training on TSP through MOSAIC: telemetry, frames, checkpoints, resume, eval, transparency.

One tiny run (two epochs of 80 env steps) is shared by the tests of this module.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from jm_support import STEPS_PER_EPOCH, TINY
from mosaic.fastlane.png import read_png

AGENT = "agent_0"
TIMER = ("time", "steps_per_second")


@pytest.fixture(scope="module")
def tsp_run(module_home):
    proc, run = module_home.run("tsp", checkpoint_every_timesteps=STEPS_PER_EPOCH, fastlane={"enabled": True})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run


def test_a2c_trains_on_tsp_and_reports_jumanjis_own_metrics(module_home, tsp_run):
    home, run = module_home, tsp_run
    (started,) = home.events(run, "run_started")
    assert started["versions"]["jumanji"] == "1.1.2" and started["versions"]["jax"] == "0.6.2"
    assert started["env"]["env_id"] == "TSP-v1" and started["total_timesteps"] == 2 * STEPS_PER_EPOCH
    metrics = home.events(run, "metrics")
    assert [(m["iteration"], m["timesteps_total"]) for m in metrics] == [(1, 80), (2, 160)]
    for m in metrics:
        logged = m["jumanji"]
        assert set(logged) == {"eval_stochastic", "eval_greedy", "train"}
        assert m["episode_return_mean"] == logged["eval_stochastic"]["episode_return"] < 0
        assert m["measures"]["tour_length"] == -m["episode_return_mean"]  # TSP: the return is minus the length
        assert m["measures"]["tour_length_greedy"] == -m["greedy"]["episode_return_mean"]
        learner = m["learner"]["policy"]
        assert {"total_loss", "policy_loss", "critic_loss", "entropy", "vf_loss"} <= set(learner)
        assert learner["vf_loss"] == learner["critic_loss"] == logged["train"]["critic_loss"]
        assert m["env_steps_per_s"] == logged["train"]["steps_per_second"] > 0
    assert metrics[-1]["num_episodes_lifetime"] == 8  # 8 envs, 20 cities: each finished one tour by step 20
    saved = home.events(run, "checkpoint_saved")
    assert [(s["iteration"], s["timesteps_total"]) for s in saved] == [(1, 80), (2, 160)]
    assert all((Path(s["path"]) / "training_state.pkl").stat().st_size > 0 for s in saved)
    pixels, _ = read_png(run / "fastlane" / "main.png")  # the stream's last frame, drawn by Jumanji's viewer
    assert pixels.ndim == 3 and len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)) > 10


def test_greedy_eval_reports_tour_lengths_and_random_play_is_compared_on_the_same_tours(module_home, tsp_run):
    home = module_home
    evaluated = home.cli("eval", tsp_run.name, "--episodes", "6", "--seed", "3", "--json")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    results = json.loads(evaluated.stdout)
    assert [e["seed"] for e in results["episodes"]] == [3, 4, 5, 6, 7, 8]
    assert all(e["length"] == 20 and e["measures"]["tour_length"] == -e["returns"][AGENT] > 0
               for e in results["episodes"])
    tour = results["measures"]["tour_length"]
    assert tour["n"] == 6 and tour["ci95_low"] < tour["mean"] < tour["ci95_high"]
    again = json.loads(home.cli("eval", tsp_run.name, "--episodes", "6", "--seed", "3", "--json").stdout)
    assert again["episodes"] == [{**e, "duration_s": a["duration_s"]} for e, a in zip(results["episodes"],
                                                                                        again["episodes"])]

    proc, random_run = home.run("tsp", algorithm="random", total_timesteps=STEPS_PER_EPOCH)
    assert proc.returncode == 0, proc.stderr[-3000:]
    played = json.loads(home.cli("eval", random_run.name, "--episodes", "6", "--seed", "3", "--json").stdout)
    assert {e["players"][AGENT] for e in played["episodes"]} == {"random"}
    assert all(e["length"] == 20 for e in played["episodes"])  # every city once, whatever the policy
    assert [e["returns"] for e in played["episodes"]] != [e["returns"] for e in results["episodes"]]


def test_a_resumed_run_continues_the_saved_training_state(module_home, tsp_run):
    """From the epoch-1 checkpoint, epoch 2 trains on the saved networks, optimiser and env states: its
    training values are the uninterrupted run's epoch 2, value for value."""
    first = module_home.events(tsp_run, "checkpoint_saved")[0]
    proc, resumed = module_home.run("tsp", restore_from=first["path"], total_timesteps=3 * STEPS_PER_EPOCH)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = module_home.events(resumed, "metrics")
    assert [(m["iteration"], m["timesteps_total"]) for m in metrics] == [(2, 160), (3, 240)]
    original = module_home.events(tsp_run, "metrics")[1]["jumanji"]["train"]
    again = metrics[0]["jumanji"]["train"]
    assert {k: v for k, v in again.items() if k not in TIMER} == {k: v for k, v in original.items()
                                                                   if k not in TIMER}
    assert module_home.events(resumed, "checkpoint_saved")[-1]["iteration"] == 3


LINE = re.compile(r"(Train|Eval Stochastic|Eval Greedy) >> Env Steps: ([0-9.e+]+) \| (.*)$")


def test_same_seed_same_values_as_jumanjis_train_py_run_directly(module_home, tsp_run, tmp_path):
    """``python -m jumanji.training.train`` with the overrides MOSAIC gives hydra logs, epoch by epoch,
    the values MOSAIC reported (as Jumanji's terminal logger prints them, to 3 decimals)."""
    dry = module_home.cli("run", "--dry-run", str(module_home.config("same", seed=0, total_timesteps=160,
                                                                     **TINY["tsp"])))
    overrides = json.loads(dry.stdout)["hydra_overrides"]
    (started,) = module_home.events(tsp_run, "run_started")
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": started["resources"]["xla_flags"]}  # as MOSAIC ran
    direct = subprocess.run([module_home.python, "-m", "jumanji.training.train", *overrides, "logger.type=terminal",
                             f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=900,
                            cwd=tmp_path, env=env)
    assert direct.returncode == 0, direct.stderr[-3000:]
    logged: list[tuple[str, dict[str, str]]] = []
    for line in (direct.stdout + direct.stderr).splitlines():
        found = LINE.search(line)
        if found:
            values = dict(part.split(": ", 1) for part in found.group(3).split(" | "))
            logged.append((found.group(1), values))
    ours = []
    for m in module_home.events(tsp_run, "metrics"):
        for label in ("eval_stochastic", "eval_greedy", "train"):
            ours.append((label.replace("_", " ").title(),
                         {k.replace("_", " ").title(): f"{v:.3f}" for k, v in m["jumanji"][label].items()
                          if k not in TIMER}))
    assert len(logged) == len(ours) == 6
    for (label, values), (our_label, our_values) in zip(logged, ours):
        assert label == our_label
        assert {k: v for k, v in values.items() if k in our_values} == our_values
