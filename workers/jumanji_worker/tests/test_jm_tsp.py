"""Real A2C training on TSP through MOSAIC, from one long run: telemetry, frames, pause, cancel,
checkpoints, resume, eval, and the same values as Jumanji's train.py run directly.

Starting a Jumanji process (importing JAX, Jumanji, hydra) and compiling its first epoch is most of a
test's time here, so the module shares one run: started with ``mosaic run``, watched until it has trained
a few epochs, paused and resumed, then cancelled with Ctrl-C; the tests read what it left.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from jm_support import STEPS_PER_EPOCH, TINY
from mosaic.fastlane.png import read_png
from mosaic.fastlane.shm import list_segments
from mosaic.testing import check_pause_resume, run_events, wait_until

AGENT = "agent_0"
TIMER = ("time", "steps_per_second")
RUN_ID = "jumanji-tsp-long"


def cache_of(home) -> dict[str, str]:
    """The environment of this module's runs: the worker's own choice of XLA cache (not the session's of
    conftest.py), in a MOSAIC cache folder of the module's, empty when the long run starts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_COMPILATION_CACHE", "JAX_PERSISTENT"))}
    return {**env, "MOSAIC_HOME": str(home.root), "MOSAIC_CACHE_DIR": str(home.root.parent / "mosaic-cache")}


@pytest.fixture(scope="module")
def long_run(module_home):
    """A TSP run with a budget it never reaches, a checkpoint every epoch and FastLane on: paused and resumed
    once it has trained three epochs (``check_pause_resume`` asserts as it goes), then Ctrl-C."""
    home = module_home
    config = home.config("long", seed=0, total_timesteps=10_000 * STEPS_PER_EPOCH, **TINY["tsp"],
                         checkpoint={"every_timesteps": STEPS_PER_EPOCH}, fastlane={"enabled": True},
                         reporting={"heartbeat_interval_s": 0.5})
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", RUN_ID],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=cache_of(home))
    run = home.root / "trainer" / "runs" / RUN_ID
    try:
        wait_until(lambda: (run / "telemetry.jsonl").exists() and len(run_events(run, "metrics")) >= 3, 900,
                   "three epochs", interval=0.2, proc=proc)
        (stream,) = wait_until(lambda: list_segments(RUN_ID), 120, "the FastLane stream", proc=proc)
        assert stream.endswith(".main")
        check_pause_resume(run, proc, heartbeats=2, timeout=600)  # held in the logger's write after an epoch
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(120)
    return run, code, proc.stderr.read()


def test_pause_resume_and_ctrl_c_cancels_with_a_checkpoint_of_the_last_epoch(long_run):
    run, code, stderr = long_run
    assert code == 3, stderr[-2000:]
    events = run_events(run)
    assert events[-1]["type"] == "run_cancelled"
    last = [e for e in events if e["type"] == "metrics"][-1]
    saved = [e for e in events if e["type"] == "checkpoint_saved"]
    assert [s["iteration"] for s in saved] == list(range(1, last["iteration"] + 1))  # one an epoch, the last too
    state = json.loads((Path(saved[-1]["path"]) / "mosaic_state.json").read_text())
    assert state["timesteps_total"] == last["timesteps_total"] and state["environment"] == "tsp"
    assert all((Path(s["path"]) / "training_state.pkl").stat().st_size > 0 for s in saved)
    assert json.loads((run / "analytics.json").read_text())["status"] == "cancelled"
    assert not list_segments(RUN_ID)
    pixels, _ = read_png(run / "fastlane" / "main.png")  # the stream's last frame, drawn by Jumanji's viewer
    assert pixels.ndim == 3 and len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)) > 10


def test_a2c_trains_on_tsp_and_reports_jumanjis_own_metrics(long_run):
    run = long_run[0]
    (started,) = run_events(run, "run_started")
    assert started["versions"]["jumanji"] == "1.1.2" and started["versions"]["jax"] == "0.6.2"
    assert started["env"]["env_id"] == "TSP-v1" and started["steps_per_epoch"] == STEPS_PER_EPOCH
    metrics = run_events(run, "metrics")
    assert [m["timesteps_total"] for m in metrics] == [STEPS_PER_EPOCH * (i + 1) for i in range(len(metrics))]
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
    # 8 envs, 20 cities, 10 steps an epoch: each env ends a tour every second epoch
    assert [m["num_episodes_lifetime"] for m in metrics[:4]] == [0, 8, 8, 16][:len(metrics[:4])]


LINE = re.compile(r"(Train|Eval Stochastic|Eval Greedy) >> Env Steps: ([0-9.e+]+) \| (.*)$")


def test_same_seed_same_values_as_jumanjis_train_py_run_directly(module_home, long_run, tmp_path,
                                                                 jax_compilation_cache):
    """``python -m jumanji.training.train`` with the overrides MOSAIC gives hydra logs, epoch by epoch,
    the values MOSAIC reported (as Jumanji's terminal logger prints them, to 3 decimals)."""
    run = long_run[0]
    dry = module_home.cli("run", "--dry-run", str(module_home.config("same", seed=0, total_timesteps=160,
                                                                     **TINY["tsp"])))
    overrides = json.loads(dry.stdout)["hydra_overrides"]
    (started,) = run_events(run, "run_started")
    # as MOSAIC ran, XLA's cache too: the programs train.py traces are loaded where they are the long run's (the
    # cache's key is the program itself, so anything train.py traces differently is compiled anew)
    env = {**cache_of(module_home), **jax_compilation_cache, "JAX_COMPILATION_CACHE_DIR": started["resources"]["xla_cache"],
           "JAX_PLATFORMS": "cpu", "XLA_FLAGS": started["resources"]["xla_flags"]}
    direct = subprocess.run([module_home.python, "-m", "jumanji.training.train", *overrides, "logger.type=terminal",
                             f"hydra.run.dir={tmp_path}"], capture_output=True, text=True, timeout=900,
                            cwd=tmp_path, env=env)
    assert direct.returncode == 0, direct.stderr[-3000:]
    logged: list[tuple[str, dict[str, str]]] = []
    for line in (direct.stdout + direct.stderr).splitlines():
        found = LINE.search(line)
        if found:
            logged.append((found.group(1), dict(part.split(": ", 1) for part in found.group(3).split(" | "))))
    ours = []
    for m in run_events(run, "metrics")[:2]:
        for label in ("eval_stochastic", "eval_greedy", "train"):
            ours.append((label.replace("_", " ").title(),
                         {k.replace("_", " ").title(): f"{v:.3f}" for k, v in m["jumanji"][label].items()
                          if k not in TIMER}))
    assert len(logged) == len(ours) == 6
    for (label, values), (our_label, our_values) in zip(logged, ours):
        assert label == our_label
        assert {k: v for k, v in values.items() if k in our_values} == our_values


def test_a_resumed_run_continues_the_saved_training_state(module_home, long_run):
    """From the epoch-1 checkpoint, epoch 2 trains on the saved networks, optimiser and env states: its
    training values are the uninterrupted run's epoch 2, value for value."""
    run = long_run[0]
    first = run_events(run, "checkpoint_saved")[0]
    env = cache_of(module_home)
    xla = Path(env["MOSAIC_CACHE_DIR"]) / "xla"
    compiled, started_at = {p.name for p in xla.glob("*-cache")}, time.time()
    config = module_home.config("resumed", seed=0, **TINY["tsp"], checkpoint={"restore_from": first["path"]},
                                total_timesteps=2 * STEPS_PER_EPOCH)
    proc = subprocess.run([sys.executable, "-m", "mosaic", "run", str(config)], capture_output=True, text=True,
                          timeout=900, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    resumed = module_home.runs()[-1]
    # the same programs as the long run's: each loaded from XLA's cache (its use stamped), nothing compiled again
    assert module_home.events(resumed, "run_started")[0]["resources"]["xla_cache"] == str(xla)
    assert {p.name for p in xla.glob("*-cache")} == compiled
    loaded = {p.name.split("-")[0] for p in xla.glob("*-atime")
              if int.from_bytes(p.read_bytes(), "little") / 1e9 >= started_at}
    assert "pmap_epoch_fn" in loaded, sorted(loaded)  # an epoch of A2C: the program that takes longest to compile
    assert module_home.events(resumed)[0]["type"] == "run_started"  # the restore is logged after it
    (m,) = module_home.events(resumed, "metrics")
    assert (m["iteration"], m["timesteps_total"]) == (2, 2 * STEPS_PER_EPOCH)
    original = run_events(run, "metrics")[1]["jumanji"]["train"]
    assert {k: v for k, v in m["jumanji"]["train"].items() if k not in TIMER} == \
        {k: v for k, v in original.items() if k not in TIMER}
    assert module_home.events(resumed, "checkpoint_saved")[-1]["iteration"] == 2


def test_greedy_eval_reports_each_tour_length_with_a_confidence_interval(module_home, long_run):
    evaluated = module_home.cli("eval", long_run[0].name, "--episodes", "6", "--seed", "3", "--video", "1",
                                "--json")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    results = json.loads(evaluated.stdout)
    saved = run_events(long_run[0], "checkpoint_saved")[-1]
    assert results["checkpoint"] == saved["path"] and results["env"]["policy"] == "greedy"
    assert [e["seed"] for e in results["episodes"]] == [3, 4, 5, 6, 7, 8]
    assert all(e["length"] == 20 and e["measures"]["tour_length"] == -e["returns"][AGENT] > 0
               for e in results["episodes"])
    tour = results["measures"]["tour_length"]
    assert tour["n"] == 6 and tour["ci95_low"] < tour["mean"] < tour["ci95_high"]
    again = module_home.cli("eval", long_run[0].name, "--episodes", "6", "--seed", "3", "--json")
    assert again.returncode == 0, again.stderr[-3000:]  # the same --seed plays the same instances, the same way
    assert [e["returns"] for e in json.loads(again.stdout)["episodes"]] == [e["returns"] for e in results["episodes"]]
    (video,) = results["videos"]
    assert Path(video).stat().st_size > 0
