"""Every algorithm trains, checkpoints and evaluates through MOSAIC; the shim is transparent.

Real runs: ``mosaic run`` starts the worker in its own environment, which
starts the unmodified CleanRL script; ``mosaic eval`` plays the checkpoint.
"""

from __future__ import annotations

import json
import math

import pytest

from crl_support import TINY, events, printed_episodes
from mosaic.fastlane.png import read_png
from mosaic.fastlane.registry import last_frame_path, read_registry

ALGORITHMS = ["ppo", "dqn", "c51", "sac", "td3", "ddpg"]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_trains_checkpoints_and_evaluates(home, algorithm):
    # FastLane at 5 frames per second and no overhead budget (a busy machine's slow renders cannot thin them out):
    # the first step's frame at once, then some more. Uncapped (fps 0), every step was drawn: ~20 ms each for
    # Pendulum here, about half of a continuous algorithm's run.
    proc, run = home.run(algorithm, fastlane={"enabled": True, "fps": 5, "max_overhead": 0})
    assert proc.returncode == 0, proc.stderr[-3000:]

    started = events(run, "run_started")[0]
    assert started["worker"] == "cleanrl" and started["algorithm"] == algorithm
    assert started["versions"]["cleanrl"] == "1.2.0" and started["versions"]["numpy"].startswith("1.")
    episodes = events(run, "episode")
    assert episodes, "no episode was relayed"
    assert all(math.isfinite(e["returns"]["agent_0"]) and e["length"] > 0 for e in episodes)
    total = TINY[algorithm]["total_timesteps"]  # whole rollouts for ppo: every budget here is run exactly
    assert started["total_timesteps"] == total and not events(run, "log")[0]["level"] == "warning"
    metrics = events(run, "metrics")
    # the count is the env steps the script ran (the off-policy scripts' last global_step label is total - 1,
    # and their last SPS falls at a multiple of 100)
    assert metrics and metrics[-1]["timesteps_total"] == total
    assert events(run, "run_completed")[0]["summary"]["timesteps_total"] == total
    assert [m["iteration"] for m in metrics] == list(range(1, len(metrics) + 1))
    assert any(m.get("learner", {}).get("policy") for m in metrics), "no loss was relayed"
    assert sum(m.get("num_episodes", 0) for m in metrics) == len(episodes)

    saved = events(run, "checkpoint_saved")
    assert len(saved) == 1 and (run / "checkpoints").exists()
    state = json.loads((run / "checkpoints" / saved[0]["path"].rsplit("/", 1)[-1] / "mosaic_state.json").read_text())
    assert state["format"] == "mosaic-cleanrl-worker/1" and state["algorithm"] == algorithm
    assert state["timesteps_total"] == saved[0]["timesteps_total"] == total and state["policy"] in state["modules"]

    manifest = json.loads((run / "analytics.json").read_text())
    assert manifest["status"] == "completed" and manifest["versions"]["gym"] == "0.23.1"
    assert manifest["latest_checkpoint"] == saved[0]["path"]
    tensorboard = run / manifest["artefacts"]["tensorboard"]
    assert list(tensorboard.glob("events.out.tfevents.*")), "the script's TensorBoard file is missing"
    assert (run / manifest["artefacts"]["tensorboard_link"]).resolve() == tensorboard.resolve()

    stream = read_registry(run)["streams"]["main"]  # FastLane: env 0's frames, closed at the end
    assert stream["state"] == "closed" and stream["frames"] > 0
    pixels, _ = read_png(run / stream["last_frame"])
    assert pixels.ndim == 3 and pixels.std() > 1

    played = home.cli("eval", run.name, "--episodes", "3", "--json", "--fastlane")
    assert played.returncode == 0, played.stderr[-3000:]
    pixels, _ = read_png(last_frame_path(run, "eval"))  # the evaluation's frames went to FastLane
    assert pixels.ndim == 3 and pixels.std() > 1
    result = json.loads(played.stdout[played.stdout.index("{"):])
    stats = result["per_agent_return"]["agent_0"]
    assert stats["n"] == 3 and stats["ci95_low"] <= stats["mean"] <= stats["ci95_high"]
    assert result["env"]["env_id"] == started["env"]["env_id"]
    assert [e["seed"] for e in result["episodes"]] == [0, 1, 2]
    # the same --seed plays the same episodes
    again = home.cli("eval", run.name, "--episodes", "3", "--json")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "env.seed(seed)" not in again.stderr  # gym 0.23.1's coloured deprecation warning: nothing to act on
    repeat = json.loads(again.stdout[again.stdout.index("{"):])
    assert [(e["returns"], e["length"]) for e in repeat["episodes"]] == \
        [(e["returns"], e["length"]) for e in result["episodes"]]


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["ppo", "dqn"])
def test_same_seed_same_episodes_as_the_script_run_directly(home, tmp_path, algorithm):
    """The shim observes and never changes what is learned: episode for episode, step for step."""
    proc, run = home.run(algorithm, seed=7, fastlane={"enabled": True})  # rendering must not change a thing
    assert proc.returncode == 0, proc.stderr[-3000:]
    command = events(run, "run_started")[0]["command"]
    module, argv = command[1], command[2:]
    assert module.startswith("cleanrl.")
    direct = home.direct(module, argv, tmp_path / "direct")
    assert direct.returncode == 0, direct.stderr[-3000:]

    upstream = printed_episodes(direct.stdout)
    through_mosaic = [(e["timesteps_total"], e["returns"]["agent_0"]) for e in events(run, "episode")]
    assert len(upstream) >= 5
    assert through_mosaic == upstream
    # and the script printed the same inside MOSAIC (its stdout is kept, not relayed)
    assert printed_episodes((run / "logs" / "script.stdout").read_text()) == upstream


@pytest.mark.slow
def test_a_budget_ppo_rounds_is_said_up_front_and_counted_exactly(home):
    """600 env steps of 2 × 64-step rollouts: ppo runs 4 whole rollouts, 512 env steps, and says so first."""
    proc, run = home.run("ppo", total_timesteps=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kinds = [e["type"] for e in events(run)]
    assert kinds[0] == "run_started" and kinds[1] == "log"
    warning = events(run)[1]
    assert warning["level"] == "warning" and "4 iterations, 512 env steps" in warning["message"]
    assert warning["requested_timesteps"] == 600 and warning["env_steps"] == 512
    assert events(run, "run_started")[0]["total_timesteps"] == 512
    metrics = events(run, "metrics")
    assert [m["timesteps_total"] for m in metrics] == [128, 256, 384, 512]
    assert all(m["total_timesteps"] == 512 for m in metrics)
    assert events(run, "run_completed")[0]["summary"]["timesteps_total"] == 512
    assert "[warning] total_timesteps 600" in proc.stderr and "100% 512/512" in proc.stderr
