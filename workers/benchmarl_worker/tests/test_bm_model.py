"""BenchMARL's MLP (``model``, ``critic_model``: fields of ``benchmarl.models.MlpConfig``): what ``--dry-run`` says
the run builds, and bad values refused before anything is created."""

from __future__ import annotations

import json

#: Bad model configs: (fields, the field the one error line names, words it says).
BAD = [
    ({"model": {"activation_class": "relu"}}, "model.activation_class",
     "'relu' is not an activation module of the installed torch (did you mean 'torch.nn.ReLU'?); allowed: "
     "torch.nn.ReLU, "),
    ({"critic_model": {"activation_class": "torch.nn.Threshold"}}, "critic_model.activation_class",
     "allowed: torch.nn.ReLU, "),  # Threshold takes required arguments, which a model config cannot give
    ({"model": {"num_cells": [64, 0]}}, "model.num_cells[1]", "allowed: a layer width: an integer >= 1"),
    ({"model": {"num_cells": 64}}, "model.num_cells", "must be an array"),
    ({"model": {"num_cell": [64]}}, "model.num_cell", "allowed: num_cells, activation_class"),
]


def test_bad_model_configs_exit_2_naming_the_field_and_create_nothing(home):
    for fields, field, words in BAD:
        home.check_refused(fields, field, words)


def test_the_dry_run_shows_the_actor_and_critic_mlps_with_benchmarls_yaml_filling_the_rest(home):
    def dry(**fields):
        proc = home.cli("run", str(home.config("dry", **fields)), "--dry-run")
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    # nothing given: BenchMARL's conf/model/layers/mlp.yaml for both, and the normalised config says so
    default = dry()
    assert default["model_config"] == default["critic_model_config"] == {"num_cells": [256, 256],
                                                                          "activation_class": "torch.nn.Tanh"}
    assert default["config"]["model"] == default["model_config"] and default["config"]["critic_model"] is None
    # the actor's given: the critic's is the same (BenchMARL's rule); a critic field left out takes the model's
    given = dry(model={"num_cells": [64, 64], "activation_class": "torch.nn.ReLU"},
                critic_model={"num_cells": [32]})
    assert given["model_config"] == {"num_cells": [64, 64], "activation_class": "torch.nn.ReLU"}
    assert given["critic_model_config"] == {"num_cells": [32], "activation_class": "torch.nn.ReLU"}
