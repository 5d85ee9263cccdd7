"""The Jumanji worker's config: the shared run fields, Jumanji's own yaml as the vocabulary, clear errors for
what cannot work."""

from __future__ import annotations

import json
import subprocess

import pytest

TSP = {"family": "jumanji", "env_id": "tsp"}


@pytest.mark.parametrize("fields,field,words", [
    ({"environment": {"family": "jumanji", "env_id": "tspp"}}, "environment.env_id",
     "did you mean 'tsp'? 'tspp' is not one of bin_pack"),
    ({"environment": "tsp"}, "environment", 'allowed: an object, {"family": "jumanji", "env_id": "tsp"}'),
    ({"environment": {"family": "mpe", "env_id": "tsp"}}, "environment.family", "'mpe' is not one of jumanji"),
    ({"network": {"transformer_num_block": 1}}, "network.transformer_num_block",
     "is not an option of Jumanji's tsp network (did you mean 'transformer_num_blocks'?); allowed: "
     "mean_cities_in_query"),
    ({"network": {"transformer_num_blocks": 1.5}}, "network.transformer_num_blocks",
     "1.5 is not allowed for Jumanji's transformer_num_blocks (default 2); allowed: an integer"),
    ({"algorithm": "random", "learning_rate": 0.1}, "learning_rate", "the random agent learns nothing"),
    ({"algorithm": "random", "gamma": 0.9}, "gamma", "the random agent learns nothing"),
    ({"algorithm": "dqn"}, "algorithm", "'dqn' is not one of a2c, ppo, random"),
])
def test_bad_configs_are_one_line_errors_naming_the_field(home, fields, field, words):
    home.check_refused(fields, field, words)


def test_dry_run_shows_the_hydra_config_jumanji_composes(home):
    proc = home.cli("run", "--dry-run", str(home.config(
        "dry", environment={"family": "jumanji", "env_id": "bin_pack"}, total_timesteps=10_000, n_steps=10,
        num_envs=16, num_learner_steps_per_epoch=5, learning_rate=0.001, gamma=0.99,
        network={"num_transformer_layers": 1}, algo_params={"l_en": 0.01})))
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["env_id"] == "BinPack-v2" and shown["steps_per_epoch"] == 800 and shown["epochs"] == 13
    composed = shown["jumanji_config"]
    assert composed["agent"] == "a2c" and composed["env"]["name"] == "bin_pack"
    assert composed["env"]["training"] == {"num_epochs": 13, "num_learner_steps_per_epoch": 5, "n_steps": 10,
                                           "total_batch_size": 16}  # num_envs
    a2c = composed["env"]["a2c"]
    assert a2c["learning_rate"] == 0.001 and a2c["discount_factor"] == 0.99 and a2c["l_en"] == 0.01
    assert composed["env"]["network"]["num_transformer_layers"] == 1
    assert composed["env"]["network"]["transformer_num_heads"] == 8  # the yaml's, untouched
    assert "env.network.num_transformer_layers=1" in shown["hydra_overrides"] and home.runs() == []


def validate(home, config: dict) -> subprocess.CompletedProcess:
    """``python -m jumanji_worker.cli --validate --config -`` in the worker's environment."""
    return subprocess.run([home.python, "-m", "jumanji_worker.cli", "--validate", "--config", "-"],
                          input=json.dumps(config), capture_output=True, text=True, timeout=300)


def test_jumanjis_spelling_of_the_algorithm_is_accepted_and_normalised(home):
    proc = validate(home, {"algorithm": "A2C", "environment": TSP})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["algorithm"] == "a2c"


# Each refused shared field exiting 2 by name: tests/test_run_fields.py walks every worker's.


@pytest.mark.parametrize("fields,named", [
    ({"learning_rate": 0.001, "algo_params": {"learning_rate": 0.002}}, ("learning_rate", "algo_params.learning_rate")),
    ({"gamma": 0.9, "algo_params": {"discount_factor": 0.8}}, ("gamma", "algo_params.discount_factor")),
])
def test_a_shared_hyperparameter_and_jumanjis_own_name_for_it_at_once_are_refused_naming_both(home, fields, named):
    line = home.check_refused(fields, named[0], "both set Jumanji's")
    assert named[1] in line


@pytest.mark.parametrize("fields,field,words", [
    ({"algo_params": {"discount_factor": 5.0}}, "algo_params.discount_factor", "allowed: a number from 0 to 1"),
    ({"algorithm": "ppo", "algo_params": {"bootstrapping_factor": -0.5}}, "algo_params.bootstrapping_factor",
     "allowed: a number from 0 to 1"),
    ({"algo_params": {"l_en": -1.0}}, "algo_params.l_en", "allowed: a number >= 0"),
])
def test_a_value_out_of_its_keys_range_is_refused(home, fields, field, words):
    """Jumanji takes any number for these keys; values outside their meaning are refused before any run."""
    home.check_refused({"environment": TSP, **fields}, field, words)


def fake_checkpoint(folder, algorithm="a2c", env="tsp"):
    """What validation reads of a Jumanji checkpoint: MOSAIC's state file with the config that trained it."""
    folder.mkdir(parents=True)
    config = {"worker": "jumanji", "algorithm": algorithm, "environment": {"family": "jumanji", "env_id": env}}
    state = {"format": "mosaic-jumanji-worker/1", "iteration": 1, "timesteps_total": 80, "episodes": 0,
             "algorithm": algorithm, "environment": env, "state_file": "training_state.pkl", "config": config}
    (folder / "mosaic_state.json").write_text(json.dumps(state))
    return str(folder)


def test_restore_from_is_checked_before_any_run_folder_exists(home, tmp_path):
    """A path that does not exist, a run folder, a folder that is no checkpoint, another agent's or env's
    checkpoint: `mosaic run` and `--dry-run` exit 2 naming checkpoint.restore_from, and no run folder is made."""
    run = tmp_path / "runs" / "earlier"
    fake_checkpoint(run / "checkpoints" / "checkpoint_000001")
    (run / "telemetry.jsonl").write_text("")
    (run / "analytics.json").write_text("{}")
    cases = [(str(tmp_path / "nowhere"), "does not exist"),
             (str(run), "is a run folder, not a checkpoint"),
             (str(tmp_path), "is not a checkpoint (no mosaic_state.json in it)"),
             (fake_checkpoint(tmp_path / "random", algorithm="random"),
              "was trained with algorithm random; this config has algorithm a2c"),
             (fake_checkpoint(tmp_path / "cvrp", env="cvrp"), "was trained with env cvrp; this config has env tsp")]
    for path, words in cases:
        fields = {"environment": TSP, "total_timesteps": 1000, "checkpoint": {"restore_from": path}}
        home.check_refused(fields, "checkpoint.restore_from", words)
        dry = home.cli("run", "--dry-run", str(home.config("dry", **fields)))
        assert dry.returncode == 2 and "checkpoint.restore_from: " in dry.stderr and words in dry.stderr, dry.stderr
    assert home.runs() == []
