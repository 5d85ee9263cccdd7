"""The Jumanji worker's config: Jumanji's own yaml as the vocabulary, clear errors for what cannot work."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("fields,field,words", [
    ({"environment": "tspp"}, "environment", "did you mean 'tsp'? 'tspp' is not one of bin_pack"),
    ({"network": {"transformer_num_block": 1}}, "network.transformer_num_block",
     "did you mean 'transformer_num_blocks'? allowed: mean_cities_in_query"),
    ({"network": {"transformer_num_blocks": 1.5}}, "network.transformer_num_blocks",
     "1.5 is not of the kind of Jumanji's default 2"),
    ({"algorithm": "random", "learning_rate": 0.1}, "learning_rate", "the random agent learns nothing"),
])
def test_bad_configs_are_one_line_errors_naming_the_field(home, fields, field, words):
    home.check_refused(fields, field, words)


def test_dry_run_shows_the_hydra_config_jumanji_composes(home):
    proc = home.cli("run", "--dry-run", str(home.config(
        "dry", environment="bin_pack", total_timesteps=10_000, n_steps=10, total_batch_size=16,
        num_learner_steps_per_epoch=5, learning_rate=0.001, network={"num_transformer_layers": 1},
        algo_params={"l_en": 0.01})))
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    assert shown["env_id"] == "BinPack-v2" and shown["steps_per_epoch"] == 800 and shown["epochs"] == 13
    composed = shown["jumanji_config"]
    assert composed["agent"] == "a2c" and composed["env"]["name"] == "bin_pack"
    assert composed["env"]["training"] == {"num_epochs": 13, "num_learner_steps_per_epoch": 5, "n_steps": 10,
                                           "total_batch_size": 16}
    assert composed["env"]["a2c"]["learning_rate"] == 0.001 and composed["env"]["a2c"]["l_en"] == 0.01
    assert composed["env"]["network"]["num_transformer_layers"] == 1
    assert composed["env"]["network"]["transformer_num_heads"] == 8  # the yaml's, untouched
    assert "env.network.num_transformer_layers=1" in shown["hydra_overrides"] and home.runs() == []
