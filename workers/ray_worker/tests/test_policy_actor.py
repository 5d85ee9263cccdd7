"""Policy actors load modules from checkpoints without Ray and act like training did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ray_support import train

CONFIGS = {
    "shared": {"environment": {"family": "mpe", "env_id": "simple_spread_v3", "env_kwargs": {"N": 2, "max_cycles": 25}}},
    "independent": {"policy_configuration": "INDEPENDENT",
                    "environment": {"family": "sisl", "env_id": "waterworld_v4",
                                    "env_kwargs": {"n_pursuers": 2, "max_cycles": 50}}},
    "masked": {"environment": {"family": "classic", "env_id": "connect_four_v3", "api_type": "AEC"},
               "total_timesteps": 600, "algo_params": {"train_batch_size_per_learner": 300,
                                                                    "minibatch_size": 100, "num_epochs": 1}},
}


@pytest.fixture(scope="module")
def checkpoints(ray_session, tmp_path_factory):
    out = {}
    for name, override in CONFIGS.items():
        run = train(tmp_path_factory.mktemp(name), override)
        out[name] = (run, run.of_type("checkpoint_saved")[-1]["path"])
    return out


def observations(checkpoint: str, n: int = 24) -> dict[str, list]:
    """Real observations per agent from the run's own env (the same preprocessing as training)."""
    from ray_worker.policy_actor import environment_config, read_checkpoint
    from ray_worker.environment import EnvironmentFactory

    env, _ = EnvironmentFactory(environment_config(read_checkpoint(checkpoint))).make_pettingzoo()
    rng = np.random.default_rng(0)
    seen: dict[str, list] = {}
    if hasattr(env, "agent_iter"):
        env.reset(seed=0)
        for agent in env.agent_iter(max_iter=n):
            obs, _, term, trunc, _ = env.last()
            if term or trunc:
                env.step(None)
                continue
            seen.setdefault(agent, []).append(obs)
            env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
    else:
        obs, _ = env.reset(seed=0)
        for _ in range(n // 2):
            for agent, o in obs.items():
                seen.setdefault(agent, []).append(o)
            obs, *_ = env.step({a: env.action_space(a).sample() for a in env.agents})
    env.close()
    return seen


def greedy_training_actions(checkpoint: str, jobs: dict[str, tuple[str, list]]) -> dict[str, list]:
    """What the training modules (restored as an Algorithm, with Ray, once per checkpoint) do greedily, by
    RLlib's own parts: ``jobs`` maps a key to (module id, observations), the answer a key to the actions."""
    from ray.rllib.algorithms.algorithm import Algorithm

    from ray_worker.policy_actor import read_checkpoint

    algo = Algorithm.from_checkpoint(checkpoint)
    try:
        # The learner's weights (off-policy env runners may hold older ones until their next sample).
        algo.env_runner_group.sync_weights(from_worker_or_learner_group=algo.learner_group)
        state = read_checkpoint(checkpoint)
        return {key: _greedy(algo.get_module(module_id), module_id, state, obs)
                for key, (module_id, obs) in jobs.items()}
    finally:
        algo.stop()


def _greedy(module, module_id: str, state: dict, obs: list) -> list:
    """One training module's greedy actions. DQN returns its greedy actions itself. SAC's deterministic action is
    its squashed Gaussian sampled with the spread shrunk to nothing (the mean through the tanh squash); other
    distributions use RLlib's deterministic version. Continuous actions are unsquashed to the bounds by RLlib's
    ``unsquash_action`` (the ``normalize_actions`` connector)."""
    import gymnasium as gym
    import torch
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.distribution.torch.torch_distribution import TorchSquashedGaussian
    from ray.rllib.utils.spaces.space_utils import unsquash_action

    from ray_worker.policy_actor import RayPolicyActor

    batch = RayPolicyActor(module, module_id, state, deterministic=True)._batch(obs)
    with torch.no_grad():
        out = module.forward_inference({Columns.OBS: batch})
        if Columns.ACTIONS in out:
            actions = out[Columns.ACTIONS].numpy()
        else:
            dist_cls = module.get_inference_action_dist_cls()
            logits = out[Columns.ACTION_DIST_INPUTS]
            if isinstance(dist_cls.from_logits(logits), TorchSquashedGaussian):
                mean, _ = logits.chunk(2, dim=-1)
                actions = dist_cls(loc=mean, scale=torch.full_like(mean, 1e-12)).sample().numpy()
            else:
                actions = dist_cls.from_logits(logits).to_deterministic().sample().numpy()
    if isinstance(module.action_space, gym.spaces.Box):
        return [unsquash_action(a, module.action_space) for a in actions]
    return [int(a) for a in actions]


ACTOR_SCRIPT = """
import json, pickle, sys, time
t = time.perf_counter()
from ray_worker import RayPolicyConfig, create_ray_actor
jobs = pickle.load(open(sys.argv[1], "rb"))
out = {}
for key, (ckpt, module_id, obs) in jobs.items():
    actor = create_ray_actor(RayPolicyConfig(checkpoint_path=ckpt, module_id=module_id))
    out[key] = [a.tolist() if hasattr(a, "tolist") else a for a in actor.compute_actions(obs)]
import ray
out["ray_initialized"] = ray.is_initialized()
print(json.dumps(out))
"""


def assert_actor_parity(checkpoints: dict[str, str], tmp_path: Path) -> None:
    """Actors loaded in one subprocess that never starts Ray act like each training module, greedily."""
    import pickle

    jobs, expected = {}, {}
    for name, ckpt in checkpoints.items():
        mine = {}
        agent_to_module = json.loads((Path(ckpt) / "mosaic_state.json").read_text())["agent_to_module"]
        for agent, obs in observations(ckpt).items():
            module_id = agent_to_module[agent]
            key = f"{name}:{agent}"
            jobs[key] = (ckpt, module_id, obs)
            mine[key] = (module_id, obs)
        for key, actions in greedy_training_actions(ckpt, mine).items():  # one restore per checkpoint
            expected[key] = [np.asarray(a).tolist() for a in actions]
    (tmp_path / "jobs.pkl").write_bytes(pickle.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    proc = subprocess.run([sys.executable, "-c", ACTOR_SCRIPT, str(tmp_path / "jobs.pkl")],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got.pop("ray_initialized") is False
    assert "Started a local Ray instance" not in proc.stderr
    assert set(got) == set(expected)
    for key, actions in expected.items():
        assert np.allclose(np.asarray(got[key], dtype=float), np.asarray(actions, dtype=float), atol=1e-5), key


def test_actor_actions_equal_training_module_greedy_actions_without_ray(checkpoints, tmp_path):
    assert_actor_parity({name: ckpt for name, (_, ckpt) in checkpoints.items()}, tmp_path)


def test_connect_four_against_random_reports_outcomes_and_saves_video(checkpoints):
    from ray_worker import EvaluationConfig, RayPolicyController, create_ray_actor, RayPolicyConfig, run_evaluation

    run, ckpt = checkpoints["masked"]
    actor = create_ray_actor(RayPolicyConfig(checkpoint_path=ckpt, agent_id="player_0"))
    results = run_evaluation(EvaluationConfig(controller=RayPolicyController({"player_0": actor}),
                                              num_episodes=10, video_episodes=1))
    outcomes = results.outcomes
    assert set(outcomes) == {"shared", "random"}
    shared = outcomes["shared"]
    assert shared["games"] == 10
    assert shared["win_rate"] + shared["draw_rate"] + shared["loss_rate"] == pytest.approx(1.0)
    folder = Path(results.output_dir)
    assert folder.parent == run.run.root / "eval"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["num_episodes"] == 10 and summary["per_agent_return"]["player_0"]["n"] == 10
    assert len((folder / "episodes.csv").read_text().splitlines()) == 11
    (video,) = results.videos
    assert Path(video).stat().st_size > 1000 and Path(video).read_bytes()[:6] == b"GIF89a"
    manifest = run.run.read_manifest()
    assert manifest["evaluations"][-1]["path"].startswith("eval/")


def test_two_runs_face_each_other(checkpoints, ray_session, tmp_path):
    from ray_worker import EvaluationConfig, RayPolicyConfig, RayPolicyController, create_ray_actor, run_evaluation

    _, ckpt_a = checkpoints["masked"]
    other = train(tmp_path, {**CONFIGS["masked"], "seed": 9})
    ckpt_b = other.of_type("checkpoint_saved")[-1]["path"]
    controller = RayPolicyController({
        "player_0": create_ray_actor(RayPolicyConfig(ckpt_a, agent_id="player_0")),
        "player_1": create_ray_actor(RayPolicyConfig(ckpt_b, agent_id="player_1"))})
    results = run_evaluation(EvaluationConfig(controller=controller, num_episodes=4, seed=3,
                                              output_dir=str(tmp_path / "duel")))
    assert len(results.episodes) == 4 and all(e.length > 0 for e in results.episodes)
    assert (tmp_path / "duel" / "summary.json").exists()


def test_bad_input_names_what_exists(checkpoints, tmp_path):
    from mosaic.errors import UserError
    from ray_worker import EvaluationConfig, RayPolicyConfig, RayPolicyController, create_ray_actor, run_evaluation

    with pytest.raises(UserError, match="does not exist"):
        create_ray_actor(RayPolicyConfig(checkpoint_path=str(tmp_path / "nope")))
    _, ckpt = checkpoints["independent"]
    with pytest.raises(UserError, match="available: pursuer_0, pursuer_1"):
        create_ray_actor(RayPolicyConfig(checkpoint_path=ckpt, module_id="shared"))
    spread = create_ray_actor(RayPolicyConfig(checkpoint_path=checkpoints["shared"][1]))
    connect_four_ckpt = checkpoints["masked"][1]
    four = create_ray_actor(RayPolicyConfig(checkpoint_path=connect_four_ckpt))
    with pytest.raises(UserError, match="expects observations"):
        run_evaluation(EvaluationConfig(controller=RayPolicyController({"player_0": four, "player_1": spread}),
                                        num_episodes=1, save=False))


def test_mosaic_eval_cli(checkpoints):
    run, _ = checkpoints["masked"]
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mosaic", "eval", str(run.run.root), "--episodes", "6",
                           "--opponent", "random"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "win" in proc.stdout and "player_0" in proc.stdout and "saved to" in proc.stdout
    assert time.monotonic() - start < 120
    # the same --seed plays the same episodes (the random opponent included)
    runs = [subprocess.run([sys.executable, "-m", "mosaic", "eval", str(run.run.root), "--episodes", "4",
                            "--opponent", "random", "--seed", "7", "--json"], capture_output=True, text=True,
                           timeout=300) for _ in range(2)]
    assert all(p.returncode == 0 for p in runs), runs[-1].stderr[-2000:]
    first, second = (json.loads(p.stdout[p.stdout.index("{"):]) for p in runs)
    assert [(e["returns"], e["length"]) for e in first["episodes"]] == \
        [(e["returns"], e["length"]) for e in second["episodes"]]


def test_mappo_and_self_play_checkpoints_evaluate(ray_session, tmp_path):
    from ray_worker import EvaluationConfig, RayPolicyController, run_evaluation

    mappo = train(tmp_path / "mappo", {"policy_configuration": "SHARED_VALUE_FUNCTION"})
    controller = RayPolicyController.from_checkpoint(mappo.of_type("checkpoint_saved")[-1]["path"])
    assert {a: act.module_id for a, act in controller.actors.items()} == {"agent_0": "agent_0", "agent_1": "agent_1"}
    results = run_evaluation(EvaluationConfig(controller=controller, num_episodes=2, save=False))
    assert set(results.per_agent) == {"agent_0", "agent_1"}

    game = train(tmp_path / "sp", {"policy_configuration": "SELF_PLAY",
                                   "environment": {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"},
                                   "total_timesteps": 300, "algo_params": {
                                       "train_batch_size_per_learner": 300, "minibatch_size": 100}})
    controller = RayPolicyController.from_checkpoint(game.of_type("checkpoint_saved")[-1]["path"])
    assert {act.module_id for act in controller.actors.values()} == {"main"}
    controller.actors.pop("player_2")  # main against a random player
    results = run_evaluation(EvaluationConfig(controller=controller, num_episodes=4, save=False))
    assert set(results.outcomes) == {"main", "random"}


def test_evaluation_streams_frames_to_fastlane(checkpoints):
    from mosaic.fastlane.registry import last_frame_path
    from ray_worker import EvaluationConfig, RayPolicyConfig, RayPolicyController, create_ray_actor, run_evaluation

    run, ckpt = checkpoints["masked"]
    actor = create_ray_actor(RayPolicyConfig(checkpoint_path=ckpt, agent_id="player_0"))
    run_evaluation(EvaluationConfig(controller=RayPolicyController({"player_0": actor}), num_episodes=2,
                                    fastlane=True, fastlane_fps=0))
    png = last_frame_path(run.run.root, "eval")
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in Path("/dev/shm").glob(f"mosaic_fl.{run.run.run_id}.*")]


def test_alternate_seats_plays_both_sides(checkpoints):
    from ray_worker import EvaluationConfig, RayPolicyConfig, RayPolicyController, create_ray_actor, run_evaluation

    _, ckpt = checkpoints["masked"]
    actor = create_ray_actor(RayPolicyConfig(checkpoint_path=ckpt, agent_id="player_0"))
    results = run_evaluation(EvaluationConfig(controller=RayPolicyController({"player_0": actor}),
                                              num_episodes=4, alternate_seats=True, save=False))
    seats = [next(a for a, p in e.players.items() if p == "shared") for e in results.episodes]
    assert seats == ["player_0", "player_1", "player_0", "player_1"]
    assert results.outcomes["shared"]["games"] == 4


def test_dqn_on_cooperative_pong_evaluates_from_the_command_line_with_parity(ray_session, tmp_path):
    """The reported case: DQN with parameter sharing on pixels; greedy Q actions, no 'action_dist_inputs'."""
    run = train(tmp_path / "run", {
        "environment": {"family": "butterfly", "env_id": "cooperative_pong_v5", "env_kwargs": {"max_cycles": 60}},
        "algorithm": "DQN", "total_timesteps": 200, "algo_params": {
            "train_batch_size_per_learner": 32, "num_steps_sampled_before_learning_starts": 100,
            "rollout_fragment_length": 25, "fcnet_hiddens": [32]}})
    assert run.events[0]["modules"]["modules"] == {"shared": ["paddle_0", "paddle_1"]}
    assert any(m["learner"] for m in run.of_type("metrics")), "DQN never updated"
    assert_actor_parity({"dqn-pong": run.of_type("checkpoint_saved")[-1]["path"]}, tmp_path)
    proc = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--evaluate", str(run.run.root),
                           "--episodes", "1", "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    (episode,) = results["episodes"]
    assert episode["length"] > 0 and set(episode["players"].values()) == {"shared"}
    assert set(episode["returns"]) == {"paddle_0", "paddle_1"}
