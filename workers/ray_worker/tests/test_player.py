"""A Ray run served as a player (``--player``): raw observations in, the trained module's actions out, the same
actions its policy actor takes on the observations training saw; seated in a match against random play."""

from __future__ import annotations

import numpy as np
import pytest

from ray_support import train

TICTACTOE = {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"}


@pytest.fixture(scope="module")
def tictactoe_run(ray_session, tmp_path_factory):
    trained = train(tmp_path_factory.mktemp("player"), {
        "environment": TICTACTOE, "total_timesteps": 400, "policy_configuration": "INDEPENDENT",
        "algo_params": {"train_batch_size_per_learner": 200, "minibatch_size": 100, "num_epochs": 1,
                        "fcnet_hiddens": [32, 32]}})
    return trained.run.root


def test_the_player_acts_as_the_policy_actor_does_on_trainings_observations(tictactoe_run):
    from mosaic.host.match import open_player
    from mosaic.workerkit.envs import make_env
    from ray_worker.environment import EnvironmentFactory
    from ray_worker.policy_actor import RayPolicyController, environment_config, read_checkpoint

    info = read_checkpoint(tictactoe_run)
    controller = RayPolicyController.from_checkpoint(str(tictactoe_run))
    trained_env, _ = EnvironmentFactory(environment_config(info)).make_pettingzoo()
    raw_env = make_env("classic", "tictactoe_v3", "AEC")
    rng = np.random.default_rng(0)
    compared = 0
    with open_player(str(tictactoe_run)) as player:
        assert player.environment["env_id"] == "tictactoe_v3"
        assert set(player.agents) == {"player_1", "player_2"}
        for game in range(4):
            trained_env.reset(seed=game)
            raw_env.reset(seed=game)
            for agent in raw_env.agent_iter():
                raw_obs, _, term, trunc, _ = raw_env.last()
                seen, *_ = trained_env.last()
                if term or trunc:
                    raw_env.step(None)
                    trained_env.step(None)
                    continue
                served = player.act(agent, raw_obs)
                assert served == controller.actor_for(agent).compute_action(seen), (game, agent)
                compared += 1
                action = served if rng.random() < 0.5 else int(rng.choice(np.flatnonzero(raw_obs["action_mask"])))
                raw_env.step(action)
                trained_env.step(action)
    assert compared >= 20


def test_the_player_plays_a_match_against_random(tictactoe_run):
    from mosaic.host.match import open_player, play_match

    with open_player(str(tictactoe_run)) as trained, open_player("random") as rnd:
        result = play_match(TICTACTOE, [{"player_1": trained, "player_2": rnd}, {"player_1": rnd, "player_2": trained}],
                            games=6, seed=3)
    assert len(result.games) == 6 and all(sum(g.returns.values()) == 0 for g in result.games)
    assert len(result.scores(trained.label)) == 6


def test_a_mappo_run_is_served_acting_as_its_policy_actor_does(ray_session, tmp_path):
    """SHARED_VALUE_FUNCTION: the actors read only the local part of training's {obs, state}; served from raw
    parallel observations, the player picks the actions the policy actor picks on training's observations."""
    from mosaic.host.match import open_player
    from mosaic.workerkit.envs import make_env
    from ray_worker.environment import EnvironmentFactory
    from ray_worker.policy_actor import RayPolicyController, environment_config, read_checkpoint

    kwargs = {"N": 2, "max_cycles": 25}
    run = train(tmp_path, {"policy_configuration": "SHARED_VALUE_FUNCTION",
                           "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
                                           "env_kwargs": kwargs}}).run.root
    info = read_checkpoint(run)
    controller = RayPolicyController.from_checkpoint(str(run))
    trained_env, _ = EnvironmentFactory(environment_config(info), global_state=True).make_pettingzoo()
    raw_env = make_env("mpe", "simple_spread_v3", "PARALLEL", kwargs)
    compared = 0
    with open_player(str(run)) as player:
        for game in range(2):
            seen, _ = trained_env.reset(seed=game)
            raw, _ = raw_env.reset(seed=game)
            while raw_env.agents:
                actions = {}
                for agent in raw_env.agents:
                    served = player.act(agent, raw[agent])
                    assert served == controller.actor_for(agent).compute_action(seen[agent]), (game, agent)
                    actions[agent] = served
                    compared += 1
                seen, *_ = trained_env.step(actions)
                raw, *_ = raw_env.step(actions)
    assert compared >= 2 * 2 * 25


def test_an_image_preprocessed_run_is_refused_as_a_player_naming_why(tmp_path):
    """Through the worker's own command line: exit 2, the reason on one line."""
    import json
    import subprocess

    from mosaic.host.discovery import discover_workers
    from mosaic.host.launcher import worker_command

    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint_000001"
    checkpoint.mkdir(parents=True)
    (checkpoint / "mosaic_state.json").write_text(json.dumps({
        "format": "mosaic-ray-worker/1", "iteration": 1, "timesteps_total": 100, "episodes": 2,
        "policy_configuration": "PARAMETER_SHARING",
        "environment": {"family": "butterfly", "env_id": "pistonball_v6", "preprocessing": {"enabled": True}}}))
    worker = discover_workers(only="ray").get("ray")
    proc = subprocess.run([*worker_command(worker), "--player", str(checkpoint)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, (proc.stdout[-500:], proc.stderr[-800:])
    assert "--player: " in proc.stderr and "preprocessed images" in proc.stderr, proc.stderr
