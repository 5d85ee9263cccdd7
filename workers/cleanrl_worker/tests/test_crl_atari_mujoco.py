"""CleanRL's Atari and MuJoCo scripts through MOSAIC: dqn_atari on Pong, ppo_continuous_action on Hopper,
ppo_atari_envpool on EnvPool's Pong.

Real runs of the unmodified scripts in the worker's own environment (ale-py 0.12.1 with its ROMs,
mujoco 2.3.7, gymnasium 0.29.1, envpool 0.8.4 with its ROMs), at budgets of a few hundred env steps; each run is made once per
module and checked by several tests. The refusals are checked in one interpreter of that environment.
"""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from crl_support import Home, events
from mosaic.fastlane.png import read_png
from mosaic.fastlane.registry import last_frame_path, read_registry

#: dqn_atari: 256 agent steps of Pong (4 ALE frames each), learning from step 128 on.
PONG = {"algorithm": "dqn_atari", "environment": {"env_id": "PongNoFrameskip-v4"}, "seed": 1,
        "total_timesteps": 256, "batch_size": 32, "resources": {"threads": 1},
        "algo_params": {"learning_starts": 128, "buffer_size": 256, "train_frequency": 4,
                        "target_network_frequency": 100},
        "fastlane": {"enabled": True, "fps": 0, "max_overhead": 0}}
#: ppo_continuous_action: two 128-step rollouts of Hopper-v4; FastLane with its default throttle (MuJoCo
#: renders through EGL on the CPU: every step would cost tens of milliseconds).
HOPPER = {"algorithm": "ppo_continuous_action", "environment": {"env_id": "Hopper-v4"}, "seed": 1,
          "total_timesteps": 256, "num_envs": 1, "resources": {"threads": 1},
          "algo_params": {"num_steps": 128, "num_minibatches": 2, "update_epochs": 2},
          "fastlane": {"enabled": True}}
ATARI_FRAME = (210, 160, 3)  # the ALE screen
#: ppo_atari_envpool: one update of 2 envs × 64 steps of EnvPool's Pong; every frame on FastLane (fps 0).
ENVPOOL_PONG = {"algorithm": "ppo_atari_envpool", "environment": {"env_id": "Pong-v5"}, "seed": 1,
                "total_timesteps": 128, "num_envs": 2, "resources": {"threads": 1},
                "algo_params": {"num_steps": 64, "num_minibatches": 2, "update_epochs": 1},
                "fastlane": {"enabled": True, "fps": 0, "max_overhead": 0}}
AGENT_VIEW = (84, 84)  # the newest grey frame of the agent's observation stack


@pytest.fixture(scope="module")
def mhome(cleanrl_env, tmp_path_factory) -> Home:
    return Home.create(tmp_path_factory.mktemp("crl-atari-mujoco") / "home", "cleanrl", cleanrl_env)


def _train_and_eval(home: Home, name: str, config: dict, *eval_args: str):
    proc = home.cli("run", str(home.config(name, **config)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = home.runs()[-1]
    played = home.cli("eval", run.name, "--json", *eval_args)
    return run, played


@pytest.fixture(scope="module")
def pong(mhome):
    return _train_and_eval(mhome, "pong", PONG, "--episodes", "1", "--fastlane")


@pytest.fixture(scope="module")
def hopper(mhome):
    return _train_and_eval(mhome, "hopper", HOPPER, "--episodes", "2")


@pytest.fixture(scope="module")
def envpool_pong(mhome):
    # A game of Pong is about 800 agent steps, each a forward pass of the CNN: `mosaic eval` gives torch one
    # thread (its default threads took ~100 ms a step on this busy 2-core machine, one ~3 ms)
    return _train_and_eval(mhome, "envpool-pong", ENVPOOL_PONG, "--episodes", "1", "--fastlane")


def _result(played: subprocess.CompletedProcess) -> dict:
    assert played.returncode == 0, played.stderr[-3000:]
    return json.loads(played.stdout[played.stdout.index("{"):])


@pytest.mark.slow
def test_dqn_atari_trains_on_pong_with_its_frames_on_fastlane(pong):
    run, _ = pong
    started = events(run, "run_started")[0]
    assert started["algorithm"] == "dqn_atari" and started["script"] == "cleanrl.dqn_atari"
    assert started["env"] == {"family": "atari", "env_id": "PongNoFrameskip-v4", "api_type": "gymnasium"}
    assert started["versions"]["ale-py"] == "0.12.1" and started["versions"]["gymnasium"] == "0.29.1"
    total = PONG["total_timesteps"]
    assert started["total_timesteps"] == total
    metrics = events(run, "metrics")
    assert metrics and metrics[-1]["timesteps_total"] == total
    assert events(run, "run_completed")[0]["summary"]["timesteps_total"] == total
    assert any(m.get("learner", {}).get("policy", {}).get("qf_loss") is not None for m in metrics)
    saved = events(run, "checkpoint_saved")
    assert len(saved) == 1 and saved[0]["timesteps_total"] == total
    state = json.loads((run / "checkpoints" / saved[0]["path"].rsplit("/", 1)[-1] / "mosaic_state.json").read_text())
    assert state["modules"]["q_network"] == "QNetwork" and state["env_id"] == "PongNoFrameskip-v4"

    stream = read_registry(run)["streams"]["main"]  # the ALE screen of env 0, every frame (fps 0)
    assert stream["state"] == "closed" and stream["owner"]["env"] == "env_0"
    assert tuple(stream["geometry"][k] for k in ("height", "width", "channels")) == ATARI_FRAME
    # each agent step is 4 ALE frames (the script's MaxAndSkipEnv), and resets play no-ops besides
    assert stream["frames"] >= 4 * total
    pixels, _ = read_png(run / stream["last_frame"])
    assert pixels.shape == ATARI_FRAME and pixels.std() > 1


@pytest.mark.slow
def test_dqn_atari_checkpoint_plays_a_whole_game(pong):
    run, played = pong
    result = _result(played)
    assert result["env"] == {"family": "atari", "env_id": "PongNoFrameskip-v4", "algorithm": "dqn_atari"}
    (episode,) = result["episodes"]
    # a game of Pong ends at 21 points: the score is the game's (unclipped), the length its ALE frames
    assert -21 <= episode["returns"]["agent_0"] <= 21 and episode["returns"]["agent_0"] != 0
    assert episode["length"] > 21 * 4
    pixels, _ = read_png(last_frame_path(run, "eval"))
    assert pixels.shape == ATARI_FRAME and pixels.std() > 1


@pytest.mark.slow
def test_ppo_continuous_action_trains_on_hopper(hopper):
    run, _ = hopper
    started = events(run, "run_started")[0]
    assert started["algorithm"] == "ppo_continuous_action" and started["env"]["family"] == "mujoco"
    assert started["versions"]["mujoco"] == "2.3.7"
    episodes = events(run, "episode")
    assert len(episodes) >= 2, "Hopper's early episodes last tens of steps: several end in 256"
    assert all(math.isfinite(e["returns"]["agent_0"]) and e["length"] > 0 for e in episodes)
    metrics = events(run, "metrics")
    total = HOPPER["total_timesteps"]
    assert [m["timesteps_total"] for m in metrics] == [128, 256]
    assert sum(m.get("num_episodes", 0) for m in metrics) == len(episodes)
    assert all(m["learner"]["policy"]["vf_loss"] is not None for m in metrics)
    assert events(run, "run_completed")[0]["summary"]["timesteps_total"] == total
    folder = run / "checkpoints" / events(run, "checkpoint_saved")[0]["path"].rsplit("/", 1)[-1]
    stats = json.loads((folder / "obs_normalization.json").read_text())
    assert len(stats["mean"]) == len(stats["var"]) == 11 and stats["count"] > total
    stream = read_registry(run)["streams"]["main"]  # rendered headless (MUJOCO_GL=egl), throttled
    assert stream["state"] == "closed" and 1 <= stream["frames"] <= total
    pixels, _ = read_png(run / stream["last_frame"])
    assert pixels.shape == (480, 480, 3) and pixels.std() > 1


@pytest.mark.slow
def test_ppo_continuous_action_checkpoint_plays_with_its_observation_statistics(hopper):
    _, played = hopper
    result = _result(played)
    assert result["env"]["family"] == "mujoco" and result["per_agent_return"]["agent_0"]["n"] == 2
    assert all(math.isfinite(e["returns"]["agent_0"]) and e["length"] > 0 for e in result["episodes"])


@pytest.mark.slow
def test_ppo_atari_envpool_trains_on_pong_with_the_agents_view_on_fastlane(envpool_pong):
    run, _ = envpool_pong
    started = events(run, "run_started")[0]
    assert started["algorithm"] == "ppo_atari_envpool" and started["script"] == "cleanrl.ppo_atari_envpool"
    assert started["env"] == {"family": "envpool", "env_id": "Pong-v5", "api_type": "gym"}
    assert started["versions"]["envpool"] == "0.8.4" and started["versions"]["gym"] == "0.23.1"
    total = ENVPOOL_PONG["total_timesteps"]  # one rollout: 2 envs × 64 steps, counted as the script's global_step
    assert started["total_timesteps"] == total
    metrics = events(run, "metrics")
    assert [m["timesteps_total"] for m in metrics] == [total]
    assert metrics[0]["learner"]["policy"]["vf_loss"] is not None and "charts/SPS" in metrics[0]["scalars"]
    assert events(run, "run_completed")[0]["summary"]["timesteps_total"] == total
    assert (run / "logs" / "script.stdout").read_text().count("SPS:") == 1  # the script ran its one update
    saved = events(run, "checkpoint_saved")
    assert len(saved) == 1 and saved[0]["timesteps_total"] == total
    state = json.loads((run / "checkpoints" / saved[0]["path"].rsplit("/", 1)[-1] / "mosaic_state.json").read_text())
    assert state["modules"]["agent"] == "Agent" and state["env_id"] == "Pong-v5"

    stream = read_registry(run)["streams"]["main"]  # env 0's observations: its reset, then each of its 64 steps
    assert stream["state"] == "closed" and stream["owner"]["env"] == "env_0"
    assert tuple(stream["geometry"][k] for k in ("height", "width", "channels")) == (*AGENT_VIEW, 1)
    assert stream["frames"] == 1 + ENVPOOL_PONG["algo_params"]["num_steps"]
    pixels, _ = read_png(run / stream["last_frame"])
    assert pixels.shape[:2] == AGENT_VIEW and pixels.size == 84 * 84 and pixels.std() > 1


@pytest.mark.slow
def test_ppo_atari_envpool_checkpoint_plays_a_whole_game(envpool_pong):
    run, played = envpool_pong
    result = _result(played)
    assert result["env"] == {"family": "envpool", "env_id": "Pong-v5", "algorithm": "ppo_atari_envpool"}
    (episode,) = result["episodes"]
    # a game ends at 21 points: the unclipped score, never 0; the length in agent steps (a point takes dozens)
    assert -21 <= episode["returns"]["agent_0"] <= 21 and episode["returns"]["agent_0"] != 0
    assert episode["length"] > 21 * 10
    pixels, _ = read_png(last_frame_path(run, "eval"))
    assert pixels.shape[:2] == AGENT_VIEW and pixels.size == 84 * 84 and pixels.std() > 1


_LOSSES = """
import json, sys
from pathlib import Path
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
out = []
for folder in sys.argv[1:]:
    (events,) = Path(folder).glob("runs/*/events.out.tfevents.*")
    acc = EventAccumulator(str(events.parent))
    acc.Reload()
    out.append({tag: [s.value for s in acc.Scalars(tag)] for tag in acc.Tags()["scalars"] if tag.startswith("losses/")})
print(json.dumps(out))
"""


@pytest.mark.slow
def test_ppo_atari_envpool_learns_the_same_as_the_script_run_directly(envpool_pong, mhome, tmp_path):
    """The envpool hook (FastLane on, every frame) observes and changes nothing: the same seed run directly
    gives the same losses, to the last bit."""
    run, _ = envpool_pong
    command = events(run, "run_started")[0]["command"]
    direct = mhome.direct(command[1], command[2:], tmp_path / "direct")
    assert direct.returncode == 0, direct.stderr[-3000:]
    proc = subprocess.run([mhome.python, "-c", _LOSSES, str(run), str(tmp_path / "direct")], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    through_mosaic, upstream = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(upstream) >= 5 and through_mosaic == upstream


#: (config, field named, words in the message): an Atari env with a non-Atari script and back, a MuJoCo
#: task with the gym 0.23 scripts, a family that does not hold the id, dqn_atari's single env.
REFUSED = [
    ({"algorithm": "ppo", "environment": {"env_id": "PongNoFrameskip-v4"}}, "environment.env_id",
     "allowed: CartPole-v1, Acrobot-v1, MountainCar-v0"),
    ({"algorithm": "c51", "environment": {"env_id": "BreakoutNoFrameskip-v4"}}, "environment.env_id",
     "is an Atari task with a discrete action space: use dqn_atari"),
    ({"algorithm": "dqn", "environment": {"family": "atari", "env_id": "PongNoFrameskip-v4"}},
     "environment.env_id", "use dqn_atari"),
    ({"algorithm": "dqn_atari", "environment": {"env_id": "CartPole-v1"}}, "environment.env_id",
     "allowed: BreakoutNoFrameskip-v4, PongNoFrameskip-v4"),
    ({"algorithm": "dqn_atari", "environment": {"env_id": "Hopper-v4"}}, "environment.env_id",
     "use ddpg, ppo_continuous_action"),
    ({"algorithm": "dqn_atari", "environment": {"env_id": "ALE/Pong-v5"}}, "environment.env_id",
     "allowed: BreakoutNoFrameskip-v4"),
    ({"algorithm": "td3", "environment": {"env_id": "Hopper-v4"}}, "environment.env_id",
     "allowed: Pendulum-v1, MountainCarContinuous-v0"),
    ({"algorithm": "sac", "environment": {"env_id": "HalfCheetah-v4"}}, "environment.env_id",
     "is a MuJoCo task with a box action space: use ddpg, ppo_continuous_action"),
    ({"algorithm": "ppo_continuous_action", "environment": {"env_id": "CartPole-v1"}}, "environment.env_id",
     "Hopper-v4"),
    ({"algorithm": "ppo_continuous_action", "environment": {"family": "gymnasium", "env_id": "Hopper-v4"}},
     "environment.family", "allowed: mujoco"),
    ({"algorithm": "dqn_atari", "environment": {"family": "mujoco", "env_id": "PongNoFrameskip-v4"}},
     "environment.family", "allowed: atari"),
    ({"algorithm": "dqn_atari", "environment": {"family": "ale"}}, "environment.family",
     "allowed: gymnasium, atari, mujoco"),
    ({"algorithm": "dqn_atari", "num_envs": 2}, "num_envs", "dqn_atari.py asserts a single env"),
    ({"algorithm": "ppo_continuous_action", "batch_size": 64}, "batch_size", "algo_params.num_minibatches"),
    # EnvPool's Atari ids are ppo_atari_envpool's only, and ALE's are not its
    ({"algorithm": "ppo_atari_envpool", "environment": {"env_id": "PongNoFrameskip-v4"}}, "environment.env_id",
     "use dqn_atari, ppo_atari, c51_atari; allowed: Pong-v5, Breakout-v5"),
    ({"algorithm": "ppo_atari_envpool", "environment": {"env_id": "ALE/Pong-v5"}}, "environment.env_id",
     "allowed: Pong-v5, Breakout-v5"),
    ({"algorithm": "dqn_atari", "environment": {"env_id": "Pong-v5"}}, "environment.env_id",
     "use ppo_atari_envpool; allowed: BreakoutNoFrameskip-v4"),
    ({"algorithm": "ppo", "environment": {"env_id": "Breakout-v5"}}, "environment.env_id",
     "is an EnvPool Atari task with a discrete action space: use ppo_atari_envpool"),
    ({"algorithm": "ppo_atari_envpool", "environment": {"family": "atari", "env_id": "Pong-v5"}},
     "environment.family", "allowed: envpool"),
    ({"algorithm": "ppo_atari_envpool", "batch_size": 64}, "batch_size", "algo_params.num_minibatches"),
    # ppo_atari and c51_atari (the sb3-gym overlay): ALE's NoFrameskip-v4 games only, and those games are
    # not the other gym scripts'
    ({"algorithm": "ppo_atari", "environment": {"env_id": "CartPole-v1"}}, "environment.env_id",
     "use ppo, dqn, c51; allowed: BreakoutNoFrameskip-v4, PongNoFrameskip-v4"),
    ({"algorithm": "ppo_atari", "environment": {"env_id": "Pong-v5"}}, "environment.env_id",
     "use ppo_atari_envpool; allowed: BreakoutNoFrameskip-v4, PongNoFrameskip-v4"),
    ({"algorithm": "c51_atari", "environment": {"env_id": "Hopper-v4"}}, "environment.env_id",
     "allowed: BreakoutNoFrameskip-v4, PongNoFrameskip-v4"),
    ({"algorithm": "c51_atari", "environment": {"env_id": "ALE/Breakout-v5"}}, "environment.env_id",
     "allowed: BreakoutNoFrameskip-v4, PongNoFrameskip-v4"),
    ({"algorithm": "c51", "environment": {"env_id": "PongNoFrameskip-v4"}}, "environment.env_id",
     "use dqn_atari, ppo_atari, c51_atari; allowed: CartPole-v1"),
    ({"algorithm": "ppo", "environment": {"env_id": "BreakoutNoFrameskip-v4"}}, "environment.env_id",
     "use dqn_atari, ppo_atari, c51_atari; allowed: CartPole-v1"),
    ({"algorithm": "ppo_atari", "environment": {"family": "gymnasium", "env_id": "PongNoFrameskip-v4"}},
     "environment.family", "allowed: atari"),
    ({"algorithm": "ppo_atari", "batch_size": 64}, "batch_size", "algo_params.num_minibatches"),
]
#: Configs that name no family, or only the default one with no env id: the task's family is filled in.
ACCEPTED = [
    ({"algorithm": "dqn_atari"}, ("atari", "BreakoutNoFrameskip-v4")),
    ({"algorithm": "dqn_atari", "environment": {"family": "gymnasium"}}, ("atari", "BreakoutNoFrameskip-v4")),
    ({"algorithm": "ppo_continuous_action"}, ("mujoco", "HalfCheetah-v4")),
    ({"algorithm": "ppo_continuous_action", "environment": {"env_id": "Pendulum-v1"}}, ("gymnasium", "Pendulum-v1")),
    ({"algorithm": "ddpg", "environment": {"family": "mujoco", "env_id": "Walker2d-v4"}}, ("mujoco", "Walker2d-v4")),
    ({"algorithm": "ppo_atari_envpool"}, ("envpool", "Pong-v5")),
    ({"algorithm": "ppo_atari"}, ("atari", "BreakoutNoFrameskip-v4")),
    ({"algorithm": "c51_atari", "environment": {"family": "atari", "env_id": "PongNoFrameskip-v4"}},
     ("atari", "PongNoFrameskip-v4")),
    ({"algorithm": "ppo_atari_envpool", "environment": {"family": "envpool", "env_id": "Breakout-v5"}},
     ("envpool", "Breakout-v5")),
]

@pytest.fixture(scope="module")
def checked(mhome, tmp_path_factory) -> list[tuple[int, str, str]]:
    """``--validate`` of every config of REFUSED and ACCEPTED, in one interpreter of the worker's environment."""
    folder = tmp_path_factory.mktemp("crl-refused")
    paths = []
    for i, (fields, *_) in enumerate([*REFUSED, *ACCEPTED]):
        paths.append(str(folder / f"c{i}.json"))
        (folder / f"c{i}.json").write_text(json.dumps({"worker": "cleanrl", **fields}))
    check = """
import contextlib, io, json, sys
from cleanrl_worker.cli import main
out = []
for path in sys.argv[1:]:
    err, text = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(text):
        code = main(["--validate", "--config", path])
    out.append([code, text.getvalue(), err.getvalue().strip()])
from cleanrl_worker.cli import envs
out.append(envs())
print(json.dumps(out))
"""
    proc = subprocess.run([mhome.python, "-c", check, *paths], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("index", range(len(REFUSED)), ids=[f"{c['algorithm']}-{f}" for c, f, _ in REFUSED])
def test_a_task_the_script_does_not_train_on_is_refused_by_name(checked, index):
    _, field, words = REFUSED[index]
    code, _, message = checked[index]
    assert code == 2, message
    assert message.startswith(f"mosaic: error: {field}: ") and len(message.splitlines()) == 1, message
    assert words in message and "allowed" in message, message


@pytest.mark.parametrize("index", range(len(ACCEPTED)), ids=[c["algorithm"] for c, _ in ACCEPTED])
def test_the_family_follows_the_task(checked, index):
    _, (family, env_id) = ACCEPTED[index]
    code, out, message = checked[len(REFUSED) + index]
    assert code == 0, message
    environment = json.loads(out[out.index("{"):])["environment"]
    assert (environment["family"], environment["env_id"]) == (family, env_id)


def test_the_worker_lists_envpools_atari_games(checked):
    offered = checked[-1]  # what `--envs` (and `mosaic workers show`) list, envpool being installed
    assert {"Pong-v5", "Breakout-v5"} <= set(offered["envpool"])
    assert "PongNoFrameskip-v4" in offered["atari"] and "Pong-v5" not in offered["atari"]


def test_a_refused_task_through_mosaic_run_makes_no_run(home):
    line = home.check_refused({"algorithm": "ppo", "environment": {"env_id": "PongNoFrameskip-v4"}},
                               "environment.env_id", "use dqn_atari")
    assert "Atari" in line
