"""CleanRL's ppo_atari.py and c51_atari.py, unmodified, on ALE's NoFrameskip-v4 games through MOSAIC.

They import gym 0.23.1 and SB3 1.2.0's Atari wrappers: the worker runs them with the environment's
``sb3-gym`` overlay (stable-baselines3 1.2.0) first on their path and ALE's games registered with gym by its
import hook (``cleanrl_worker.gym_atari``). One tiny run of each (ppo_atari: one update of 2 envs × 64 steps
of Pong, every ALE frame on FastLane; c51_atari: 200 steps of Breakout, learning from step 64) is made once
for the module and checked by several tests; the refusals of their tasks are in test_crl_atari_mujoco.py.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from crl_support import Home, events
from mosaic.fastlane.png import read_png
from mosaic.fastlane.registry import last_frame_path, read_registry
from test_crl_atari_mujoco import _LOSSES, ATARI_FRAME, _result

PPO_PONG = {"algorithm": "ppo_atari", "environment": {"env_id": "PongNoFrameskip-v4"}, "seed": 1,
            "total_timesteps": 128, "num_envs": 2, "resources": {"threads": 1},
            "algo_params": {"num_steps": 64, "num_minibatches": 2, "update_epochs": 1},
            "fastlane": {"enabled": True, "fps": 0, "max_overhead": 0}}
C51_BREAKOUT = {"algorithm": "c51_atari", "environment": {"env_id": "BreakoutNoFrameskip-v4"}, "seed": 1,
                "total_timesteps": 200, "batch_size": 16, "resources": {"threads": 1},
                "algo_params": {"learning_starts": 64, "buffer_size": 200, "train_frequency": 4,
                                "target_network_frequency": 50}}


@pytest.fixture(scope="module")
def ahome(cleanrl_env, tmp_path_factory) -> Home:
    return Home.create(tmp_path_factory.mktemp("crl-atari-gym") / "home", "cleanrl", cleanrl_env)


def _train(home: Home, name: str, config: dict):
    proc = home.cli("run", str(home.config(name, **config)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return home.runs()[-1]


@pytest.fixture(scope="module")
def ppo_pong(ahome):
    return _train(ahome, "ppo-pong", PPO_PONG)


@pytest.fixture(scope="module")
def c51_breakout(ahome):
    return _train(ahome, "c51-breakout", C51_BREAKOUT)


def _checkpoint_state(run, saved) -> dict:
    return json.loads((run / "checkpoints" / saved["path"].rsplit("/", 1)[-1] / "mosaic_state.json").read_text())


@pytest.mark.slow
def test_ppo_atari_trains_on_pong_with_sb3_1_and_its_frames_on_fastlane(ppo_pong):
    run = ppo_pong
    started = events(run, "run_started")[0]
    assert started["algorithm"] == "ppo_atari" and started["script"] == "cleanrl.ppo_atari"
    assert started["env"] == {"family": "atari", "env_id": "PongNoFrameskip-v4", "api_type": "gym"}
    # the overlay's SB3 is the one the script ran with; the environment's own stays 2.x for the others
    assert started["versions"]["stable-baselines3"] == "1.2.0" and started["versions"]["gym"] == "0.23.1"
    total = PPO_PONG["total_timesteps"]
    assert started["total_timesteps"] == total
    metrics = events(run, "metrics")
    assert metrics and metrics[-1]["timesteps_total"] == total
    assert events(run, "run_completed")[0]["summary"]["timesteps_total"] == total
    policy = metrics[-1]["learner"]["policy"]
    assert all(policy.get(k) is not None for k in ("vf_loss", "policy_loss", "entropy")), policy
    assert (run / "logs" / "script.stdout").read_text().count("SPS:") == 1  # its one update
    saved = events(run, "checkpoint_saved")
    assert len(saved) == 1 and saved[0]["timesteps_total"] == total
    state = _checkpoint_state(run, saved[0])
    assert state["modules"]["agent"] == "Agent" and state["env_id"] == "PongNoFrameskip-v4"

    stream = read_registry(run)["streams"]["main"]  # the ALE screen of env 0, every frame (fps 0)
    assert stream["state"] == "closed" and stream["owner"]["env"] == "env_0"
    assert tuple(stream["geometry"][k] for k in ("height", "width", "channels")) == ATARI_FRAME
    # each of env 0's 64 agent steps is 4 ALE frames (MaxAndSkipEnv); its reset plays no-ops besides
    assert stream["frames"] >= 4 * PPO_PONG["algo_params"]["num_steps"]
    pixels, _ = read_png(run / stream["last_frame"])
    assert pixels.shape == ATARI_FRAME and pixels.std() > 1


@pytest.mark.slow
def test_c51_atari_trains_on_breakout(c51_breakout):
    run = c51_breakout
    started = events(run, "run_started")[0]
    assert started["algorithm"] == "c51_atari" and started["versions"]["stable-baselines3"] == "1.2.0"
    assert started["env"]["env_id"] == "BreakoutNoFrameskip-v4"
    total = C51_BREAKOUT["total_timesteps"]
    metrics = events(run, "metrics")
    assert metrics and metrics[-1]["timesteps_total"] == total
    assert events(run, "run_completed")[0]["summary"]["timesteps_total"] == total
    assert any(m.get("learner", {}).get("policy", {}).get("qf_loss") is not None for m in metrics)
    saved = events(run, "checkpoint_saved")
    assert len(saved) == 1 and _checkpoint_state(run, saved[0])["modules"]["q_network"] == "QNetwork"


@pytest.mark.slow
def test_ppo_atari_learns_the_same_as_the_script_run_directly(ppo_pong, ahome, cleanrl_env, tmp_path):
    """Run directly as docs/cleanrl-worker.md says (the environment's python, the overlay and the worker's
    hook folder on PYTHONPATH), the same seed gives the same losses to the last bit: the observers and
    FastLane (every frame) change nothing."""
    run = ppo_pong
    command = events(run, "run_started")[0]["command"]
    site = subprocess.run([ahome.python, "-c", "import cleanrl_worker.runtime as r; print(r.SITE_DIR)"],
                          capture_output=True, text=True, timeout=300).stdout.strip()
    path = [str(cleanrl_env / "overlays" / "sb3-gym"), site]
    direct = ahome.direct(command[1], command[2:], tmp_path / "direct", pythonpath=path)
    assert direct.returncode == 0, direct.stderr[-3000:]
    proc = subprocess.run([ahome.python, "-c", _LOSSES, str(run), str(tmp_path / "direct")], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    through_mosaic, upstream = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(upstream) >= 3 and all(upstream.values()) and through_mosaic == upstream


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["ppo_atari", "c51_atari"])
def test_their_checkpoints_play_whole_games_through_the_scripts_wrappers(algorithm, request, ahome):
    """`mosaic eval` plays their checkpoints through SB3 1.2.0's Atari wrappers, as their scripts made the
    games they trained on (the evaluation runs again with the overlay first on its path): a whole game, its
    score the game's own, the ALE screen on FastLane; the same --seed plays the same game."""
    run = request.getfixturevalue("ppo_pong" if algorithm == "ppo_atari" else "c51_breakout")
    env_id = (PPO_PONG if algorithm == "ppo_atari" else C51_BREAKOUT)["environment"]["env_id"]
    played = _result(ahome.cli("eval", run.name, "--episodes", "1", "--seed", "4", "--json", "--fastlane"))
    assert played["env"] == {"family": "atari", "env_id": env_id, "algorithm": algorithm}
    (episode,) = played["episodes"]
    score, frames = episode["returns"]["agent_0"], episode["length"]
    if env_id.startswith("Pong"):  # a game of Pong ends at 21 points
        assert -21 <= score <= 21 and score != 0 and frames > 21 * 4, episode
    else:  # Breakout: five lives lost (each a reset that fires the next ball)
        assert score >= 0 and frames > 5 * 4, episode
    pixels, _ = read_png(last_frame_path(run, "eval"))
    assert pixels.shape == ATARI_FRAME and pixels.std() > 1
    again = _result(ahome.cli("eval", run.name, "--episodes", "1", "--seed", "4", "--json"))
    assert [(e["returns"], e["length"]) for e in again["episodes"]] == [(episode["returns"], frames)]
