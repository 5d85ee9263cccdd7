"""Every env id the installed packages offer trains (or is refused with a documented reason).

The list is computed from the installed packages (``mosaic.workerkit.envs``), never written
by hand: a new PettingZoo release with a new env id adds a case here. Each case
is one tiny PPO iteration in this module's Ray session; envs whose agents
differ in spaces also train with one module per agent (INDEPENDENT).
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mosaic.workerkit.envs import ENV_FAMILIES, available_env_ids, load_env_module, make_env, supported_api_types
from mosaic.errors import ConfigError
from ray_support import train

DOC = Path(__file__).resolve().parents[3] / "docs" / "ray-worker.md"

#: Size knobs that shrink an env where its constructor takes them (episode length, board, team size).
SHRINK = {"max_cycles": 30, "board_size": 5, "n_pistons": 4}
#: Envs MOSAIC refuses at validation, with the reason docs/ray-worker.md lists (none today).
REFUSED: dict[str, str] = {}


def _api(family: str, env_id: str) -> str:
    return "PARALLEL" if "PARALLEL" in supported_api_types(load_env_module(family, env_id)) else "AEC"


def _accepts(family: str, env_id: str, kwargs: dict) -> bool:
    try:
        make_env(family, env_id, _api(family, env_id), kwargs).close()
        return True
    except ConfigError:
        return False


def small_kwargs(family: str, env_id: str) -> dict:
    """Every :data:`SHRINK` knob the env's constructor accepts (its signature, else a trial build)."""
    module = load_env_module(family, env_id)
    params = inspect.signature(module.raw_env).parameters if hasattr(module, "raw_env") else {}
    named = not any(p.kind is p.VAR_KEYWORD for p in params.values())
    return {k: v for k, v in SHRINK.items()
            if (k in params if named else _accepts(family, env_id, {k: v}))}


def _differs(family: str, env_id: str, kwargs: dict) -> bool:
    env = make_env(family, env_id, _api(family, env_id), kwargs)
    spaces = {(str(env.observation_space(a)), str(env.action_space(a))) for a in env.possible_agents}
    env.close()
    return len(spaces) > 1


def _cases() -> list:
    cases = []
    for family in ENV_FAMILIES:
        for env_id in available_env_ids(family):
            kwargs = small_kwargs(family, env_id)
            configs = ["PARAMETER_SHARING"] + (["INDEPENDENT"] if _differs(family, env_id, kwargs) else [])
            cases += [pytest.param(family, env_id, kwargs, pc, id=f"{family}/{env_id}/{pc}") for pc in configs]
    return cases


CASES = _cases()


def tiny_config(family: str, env_id: str, kwargs: dict, policy_configuration: str) -> dict:
    return {"policy_configuration": policy_configuration, "rllib": {"num_env_runners": 0},
            "environment": {"family": family, "env_id": env_id, "api_type": _api(family, env_id),
                            "env_kwargs": kwargs,
                            "preprocessing": {"resize": [16, 16], "frame_stack": 1}},
            "algorithm": "ppo", "total_timesteps": 64,
                         "algo_params": {"train_batch_size_per_learner": 64, "minibatch_size": 32,
                                         "num_epochs": 1, "fcnet_hiddens": [16]},
            "checkpoint": {"every_timesteps": 0},
            "tensorboard": False}


def test_the_catalog_covers_every_family():
    families = {p.values[0] for p in CASES}
    assert families == set(ENV_FAMILIES)
    assert len({p.values[:2] for p in CASES}) == sum(len(available_env_ids(f)) for f in ENV_FAMILIES)


@pytest.mark.parametrize("family,env_id,kwargs,policy_configuration", CASES)
def test_every_env_id_trains_one_tiny_ppo_iteration(ray_session, tmp_path, family, env_id, kwargs,
                                                    policy_configuration):
    override = tiny_config(family, env_id, kwargs, policy_configuration)
    if env_id in REFUSED:
        from ray_worker.cli import deep_validate
        from ray_worker.config import RayWorkerConfig

        with pytest.raises(ConfigError) as err:
            deep_validate(RayWorkerConfig.from_dict({**override, "run_id": "refused"}))
        assert REFUSED[env_id] in str(err.value) and REFUSED[env_id] in DOC.read_text()
        return
    run = train(tmp_path, override, tiny=False)
    metrics = run.of_type("metrics")
    assert metrics and metrics[-1]["timesteps_total"] >= 64
    assert any(m["learner"] for m in metrics), "no learner results"
    started = run.events[0]
    assert started["type"] == "run_started"
    modules = started["modules"]["modules"]
    agents = sorted(a for members in modules.values() for a in members)
    assert agents == sorted(make_env(family, env_id, _api(family, env_id), kwargs).possible_agents)
    if policy_configuration == "INDEPENDENT":
        assert all(len(members) == 1 for members in modules.values())
    assert run.of_type("checkpoint_saved"), "the final checkpoint is missing"


def _encoded(config: dict) -> dict:
    from ray_worker.cli import deep_validate
    from ray_worker.config import RayWorkerConfig

    info, _ = deep_validate(RayWorkerConfig.from_dict({**config, "run_id": "x"}))
    return info.to_dict()


@pytest.mark.parametrize("family,env_id,encoding", [
    ("classic", "rps_v2", "one-hot(4)"),
    ("butterfly", "knights_archers_zombies_v10", "flatten(27x5)"),
    ("sisl", "pursuit_v4", "flatten(7x7x3)"),
])
def test_non_vector_observations_are_encoded_for_every_agent_in_both_apis(family, env_id, encoding):
    from mosaic.workerkit.spaces import encoded_space

    raw = make_env(family, env_id, "PARALLEL")
    size = encoded_space(raw.observation_space(raw.possible_agents[0])).shape[0]
    for api in ("PARALLEL", "AEC"):
        info = _encoded({"environment": {"family": family, "env_id": env_id, "api_type": api}})
        assert info["observation_encodings"] == {a: encoding for a in raw.possible_agents}
        assert set(info["observation_spaces"].values()) == {f"Box(({size},), float32)"}


def test_vector_image_and_masked_observations_are_not_re_encoded():
    assert _encoded({"environment": {"family": "mpe", "env_id": "simple_spread_v3"}})["observation_encodings"] == {}
    masked = _encoded({"environment": {"family": "classic", "env_id": "connect_four_v3", "api_type": "AEC"}})
    assert masked["observation_encodings"] == {}
    assert set(masked["observation_spaces"]["player_0"]) == {"observation", "action_mask"}
    image = _encoded({"environment": {"family": "butterfly", "env_id": "cooperative_pong_v5"}})
    assert image["observation_encodings"] == {} and image["preprocessed"] is True


def test_dry_run_prints_the_encoded_spaces_and_encodings(tmp_path):
    path = tmp_path / "rps.json"
    path.write_text(json.dumps({"run_id": "dry", "environment": {"family": "classic", "env_id": "rps_v2"}}))
    out = subprocess.run([sys.executable, "-m", "ray_worker.cli", "--dry-run", "--config", str(path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    env = json.loads(out.stdout)["env"]
    assert env["observation_encodings"] == {"player_0": "one-hot(4)", "player_1": "one-hot(4)"}
    assert env["observation_spaces"] == {"player_0": "Box((4,), float32)", "player_1": "Box((4,), float32)"}


def test_a_checkpoint_of_an_encoded_env_evaluates_with_policy_actors(ray_session, tmp_path):
    from ray_worker import EvaluationConfig, RayPolicyConfig, RayPolicyController, create_ray_actor, run_evaluation

    override = tiny_config("classic", "rps_v2", {"max_cycles": 10}, "PARAMETER_SHARING")
    run = train(tmp_path, override, tiny=False)
    ckpt = run.of_type("checkpoint_saved")[-1]["path"]
    actors = {a: create_ray_actor(RayPolicyConfig(checkpoint_path=ckpt, agent_id=a)) for a in ("player_0", "player_1")}
    results = run_evaluation(EvaluationConfig(controller=RayPolicyController(actors), num_episodes=3, save=False))
    assert len(results.episodes) == 3
    assert all(e.length == 10 for e in results.episodes)  # rps: max_cycles rounds, never an early end
    assert set(results.per_agent) == {"player_0", "player_1"}
