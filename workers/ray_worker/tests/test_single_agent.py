"""Single-agent Gymnasium envs through the Ray worker: RLlib's single-agent path, MOSAIC's telemetry.

One real PPO run on CartPole-v1 (shared by the module) learns well past a random policy (≈ 22),
publishes FastLane frames while it trains, checkpoints, and is evaluated by ``mosaic eval`` in a
subprocess, which plays the checkpoint without Ray. The multi-agent-only options are refused
naming their field.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mosaic.errors import ConfigError
from mosaic.testing.learning import check, claim, learning, seed
from ray_support import train

#: Random play on CartPole-v1 lasts about 22 steps; the trained policy must do far better.
RANDOM_RETURN = 22.0
CARTPOLE = {"family": "gymnasium", "env_id": "CartPole-v1"}
#: The smallest budget that learned on every seed tried (5 iterations of 1000 env steps, about 35 s on a
#: loaded 2-core machine): the greedy policy then balances for 250-450 steps.
PPO_CARTPOLE = {
    "environment": CARTPOLE, "total_timesteps": 5000, "seed": seed(0),
    "algo_params": {"train_batch_size_per_learner": 1000, "minibatch_size": 128, "num_epochs": 10, "lr": 0.001,
                    "vf_loss_coeff": 0.01, "fcnet_hiddens": [64, 64]},
    "fastlane": {"enabled": True, "fps": 30}, "tensorboard": False,
}


@pytest.fixture(scope="module")
def cartpole(ray_session, tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    return home, train(home, PPO_CARTPOLE)


@learning(seed=0, beats_random=claim(bar=2 * RANDOM_RETURN, measured={0: 142.67, 1: 114.29, 2: 123.14, 3: 132.17},
                                     what="the last iteration's mean return over random play's 22"))
def test_ppo_on_cartpole_trains_through_the_single_agent_path(request, cartpole):
    _, run = cartpole
    started = run.events[0]
    assert started["type"] == "run_started" and started["agents"] == ["agent_0"]
    assert started["modules"]["modules"] == {"default_policy": ["agent_0"]}
    metrics = run.of_type("metrics")
    assert len(metrics) == 5 and metrics[-1]["timesteps_total"] == 5000
    assert {"policy_loss", "vf_loss", "entropy"} <= set(metrics[-1]["learner"]["default_policy"])
    episodes = run.of_type("episode")
    assert episodes and all(set(e["returns"]) == {"agent_0"} for e in episodes)
    assert all(e["modules"] == {"agent_0": "default_policy"} for e in episodes)
    assert metrics[-1]["num_episodes_lifetime"] == len(episodes) == run.summary["episodes"]
    # it learned: the last iteration's episodes last far longer than random play's
    check(request, "beats_random", metrics[-1]["episode_return_mean"], baseline=RANDOM_RETURN)
    (saved,) = run.of_type("checkpoint_saved")
    assert (run.run.root / "checkpoints" / "checkpoint_000005" / "mosaic_state.json").exists()
    assert saved["timesteps_total"] == 5000


def test_fastlane_frames_of_the_single_agent_env(cartpole):
    from mosaic.fastlane.png import read_png
    from mosaic.fastlane.registry import read_registry
    from mosaic.fastlane.shm import list_segments

    _, run = cartpole
    root = run.run.root
    stream = read_registry(root)["streams"]["runner-0"]
    assert stream["state"] == "closed"
    pixels, meta = read_png(root / "fastlane" / "runner-0.png")
    assert pixels.shape == (400, 600, 3) and pixels.std() > 10  # CartPole's cart and pole, not a blank frame
    assert set(meta["rewards"]) == {"agent_0"} and meta["env_id"] == "CartPole-v1"
    assert not list_segments(run.run.run_id)


@learning(seed=0, beats_random=claim(bar=4 * RANDOM_RETURN, measured={0: 233.8, 1: 403.0, 2: 238.6, 3: 251.4},
                                     what="the greedy policy's mean return (5 episodes) over random play's 22"))
def test_mosaic_eval_plays_the_checkpoint_without_ray(request, cartpole):
    home, run = cartpole
    proc = subprocess.run([sys.executable, "-m", "mosaic", "eval", run.run.run_id, "--episodes", "5", "--json"],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "MOSAIC_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    agent = results["per_agent_return"]["agent_0"]
    assert agent["n"] == 5, agent
    check(request, "beats_random", agent["mean"], baseline=RANDOM_RETURN)
    assert list((run.run.root / "eval").glob("*/summary.json"))


def test_a_single_agent_run_is_refused_as_a_player_naming_why(cartpole):
    """A match seats players in a PettingZoo env: `mosaic player RUN` exits 2 saying why."""
    home, run = cartpole
    proc = subprocess.run([sys.executable, "-m", "mosaic", "player", str(run.run.root)], input="", capture_output=True,
                          text=True, timeout=300, env={**os.environ, "MOSAIC_HOME": str(home)})
    assert proc.returncode == 2 and proc.stdout == "", (proc.stdout, proc.stderr[-2000:])
    assert "single-agent Gymnasium env (CartPole-v1)" in proc.stderr.strip().splitlines()[-1]


def test_sac_on_continuous_pendulum_uses_rllibs_single_agent_replay_buffer(ray_session, tmp_path):
    from ray_worker.policy_actor import RayPolicyController
    from ray_worker.policy_evaluator import EvaluationConfig, run_evaluation

    run = train(tmp_path, {"algorithm": "sac", "environment": {"family": "gymnasium", "env_id": "Pendulum-v1"},
                           "total_timesteps": 100, "tensorboard": False,
                           "algo_params": {"train_batch_size_per_learner": 32, "rollout_fragment_length": 25,
                                           "num_steps_sampled_before_learning_starts": 50}})
    learners = [m["learner"] for m in run.of_type("metrics")]
    assert any("default_policy" in learner for learner in learners), "SAC never learned"
    controller = RayPolicyController.from_checkpoint(run.summary["final_checkpoint"])
    results = run_evaluation(EvaluationConfig(controller=controller, num_episodes=1, max_steps=20, save=False))
    (episode,) = results.episodes
    assert episode.length == 20 and set(episode.returns) == {"agent_0"}


@pytest.mark.parametrize("field,override", [
    ("policy_configuration", {"policy_configuration": "INDEPENDENT"}),
    ("policy_configuration", {"policy_configuration": "SELF_PLAY"}),
    ("self_play", {"self_play": {"max_pool_size": 3}}),
    ("ctde", {"ctde": {"actors": "per_group"}}),
    ("environment.api_type", {"environment": {**CARTPOLE, "api_type": "AEC"}}),
])
def test_multi_agent_options_are_refused_naming_the_field(field, override):
    from ray_worker.config import RayWorkerConfig

    with pytest.raises(ConfigError) as err:
        RayWorkerConfig.from_dict({"run_id": "r", "environment": CARTPOLE, **override})
    assert err.value.field == field and "single agent" in str(err.value)


def test_refusals_through_the_command_line():
    bad = {"worker": "ray", "environment": CARTPOLE, "policy_configuration": "SHARED_VALUE_FUNCTION"}
    proc = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--validate", "--config", "-"],
                          input=json.dumps(bad), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("mosaic: error: policy_configuration: ") and "allowed:" in proc.stderr
    unknown = {"worker": "ray", "environment": {"family": "gymnasium", "env_id": "CartPol-v1"}}
    proc = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--validate", "--config", "-"],
                          input=json.dumps(unknown), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "environment.env_id" in proc.stderr and "'CartPole-v1'" in proc.stderr


def test_the_description_offers_single_agent_gymnasium():
    from ray_worker import get_worker_metadata
    from ray_worker.environment import offered_envs

    caps = get_worker_metadata()[1]
    assert "single_agent" in caps.paradigms and "gymnasium" in caps.env_families
    offered = offered_envs()
    assert {"CartPole-v1", "Pendulum-v1", "Taxi-v3"} <= set(offered["gymnasium"])
    assert set(offered) <= set(caps.env_families)


def test_discrete_observations_are_encoded_and_the_module_id_is_rllibs():
    from ray.rllib.core import DEFAULT_MODULE_ID

    from ray_worker.config import RayWorkerConfig
    from ray_worker.policies import SINGLE_AGENT_MODULE, prepare

    assert SINGLE_AGENT_MODULE == DEFAULT_MODULE_ID
    config = RayWorkerConfig.from_dict({"run_id": "r", "algorithm": "dqn",
                                        "environment": {"family": "gymnasium", "env_id": "Taxi-v3"}})
    factory, info, layout = prepare(config)
    assert info.single_agent and info.agents == ("agent_0",) and info.encodings == {"agent_0": "one-hot(500)"}
    assert info.observation_spaces["agent_0"].shape == (500,)
    assert layout.agent_to_module == {"agent_0": DEFAULT_MODULE_ID}
    env = factory(None)  # what RLlib gets: a plain gymnasium.Env, no MultiAgentEnv wrapper
    try:
        from ray.rllib.env.multi_agent_env import MultiAgentEnv

        assert not isinstance(env, MultiAgentEnv)
        obs, _ = env.reset(seed=0)
        assert obs.shape == (500,) and obs.sum() == 1.0
    finally:
        env.close()
