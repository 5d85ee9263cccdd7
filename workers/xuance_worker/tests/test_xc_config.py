"""The XuanCe worker's config: XuanCe's yaml as the schema, clear errors for what cannot work."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml


def shipped_yaml(home, *parts: str) -> dict:
    site = next((home.env / "lib").glob("python3*/site-packages"))
    return yaml.safe_load((site / "xuance" / "configs" / "/".join(parts)).read_text())


@pytest.mark.parametrize("fields,field,words", [
    ({"algorithm": "mapo"}, "algorithm", "'mapo' is not one of"),
    ({"algo_params": {"clip_rnage": 0.1}}, "algo_params.clip_rnage", "did you mean 'clip_range'?"),
    ({"algo_params": {"clip_range": "wide"}}, "algo_params.clip_range", "'wide' is not allowed for XuanCe's clip_range "
                                                                                    "(default 0.2); allowed: a number >= 0"),
    ({"algo_params": {"parallels": 4}}, "algo_params.parallels", "set the top-level 'num_envs' instead"),
    # bounds the worker knows (XuanCe checks none), and the values XuanCe has for a string option
    ({"algo_params": {"n_epochs": -3}}, "algo_params.n_epochs", "allowed: an integer >= 1"),
    ({"algo_params": {"activation": "nosuch"}}, "algo_params.activation",
     "'nosuch' is not allowed for XuanCe's activation (default 'relu'); allowed: relu, leaky_relu, tanh"),
    ({"algo_params": {"vectorize": "SubprocVecMultiAgentEnv"}}, "algo_params.vectorize", "envs run in-process"),
    ({"backend": "tensorflow"}, "backend", "'tensorflow' is not one of"),
    ({"environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "AEC"}},
     "environment.api_type", "AEC: simple_spread_v3 has a parallel API, which XuanCe steps with every agent at once; "
                             "allowed: PARALLEL (or leave it out)"),
    ({"environment": {"family": "classic", "env_id": "tictactoe_v3", "api_type": "PARALLEL"}},
     "environment.api_type", "PARALLEL: tictactoe_v3 is turn-based (PettingZoo offers it as an AEC env only): the "
                             "worker plays it in turns; allowed: AEC (or leave it out)"),
    ({"environment": {"family": "classic", "env_id": "tictactoe_v3"}, "algo_params": {"use_actions_mask": False}},
     "algo_params.use_actions_mask", "tictactoe_v3 is turn-based: the worker plays it in turns through action masks"),
    ({"total_timesteps": 100, "batch_size": 400}, "total_timesteps", "less than one update"),
    ({"algorithm": "qmix", "total_timesteps": 500}, "algo_params.start_training", "nothing would be learned"),
    ({"algorithm": "maddpg", "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
                                            "env_kwargs": {"continuous_actions": False}}},
     "environment", "maddpg acts in box action spaces; simple_spread_v3 has discrete; for MPE set "
                    "environment.env_kwargs.continuous_actions to true"),
    ({"algorithm": "qmix", "environment": {"family": "sisl", "env_id": "waterworld_v4", "api_type": "PARALLEL"}},
     "environment", "qmix acts in discrete action spaces; waterworld_v4 has box"),
    ({"environment": {"family": "mpe", "env_id": "simple_sprad_v3", "api_type": "PARALLEL"}},
     "environment.env_id", "did you mean 'simple_spread_v3'?"),
])
def test_bad_configs_are_one_line_errors_naming_the_field(home, fields, field, words):
    home.check_refused(fields, field, words)


def test_the_schema_is_xuances_shipped_yaml(home):
    schema = json.loads(subprocess.run([home.python, "-m", "xuance_worker.cli", "--schema", "mappo"],
                                       capture_output=True, text=True, timeout=300, check=True).stdout)
    shipped = {**shipped_yaml(home, "basic.yaml"), **shipped_yaml(home, "mappo", "mpe", "simple_spread_v3.yaml")}
    props = schema["properties"]
    cnn = ("filters", "kernels", "strides")  # from the image settings, mappo/atari.yaml (tested below)
    assert {k: v["default"] for k, v in props.items() if k not in cnn} == {
        k: v for k, v in shipped.items() if k in props}
    for owned in ("seed", "parallels", "running_steps", "vectorize", "policy"):
        assert owned not in props  # set by MOSAIC's own fields
    # XuanCe's own names of the shared hyperparameters stay open (one or the other: test_shared_... below)
    assert props["learning_rate"]["default"] == shipped["learning_rate"] and "gamma" in props
    assert props["clip_range"]["type"] == "number" and props["use_parameter_sharing"]["type"] == "boolean"
    assert "Ratio clip range" in props["clip_range"]["description"]


@pytest.mark.parametrize("algorithm,kind,policy,batch_key", [
    ("mappo", "discrete", "Categorical_MAAC_Policy", "buffer_size"),
    ("ippo", "discrete", "Categorical_MAAC_Policy", "buffer_size"),
    ("qmix", "discrete", "Mixing_Q_network", "batch_size"),
    ("maddpg", "box", "MADDPG_Policy", "batch_size"),
])
def test_dry_run_shows_xuances_arguments_as_the_run_builds_them(home, algorithm, kind, policy, batch_key):
    config = home.config("dry", algorithm=algorithm, num_envs=3, batch_size=96, learning_rate=0.001, gamma=0.9)
    proc = home.cli("run", "--dry-run", str(config))
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)
    args = shown["xuance_arguments"]
    assert shown["env"]["action_kind"] == kind and args["policy"] == policy
    assert args["continuous_action"] is (kind == "box")
    assert args["parallels"] == 3 and args[batch_key] == 96 and args["learning_rate"] == 0.001
    assert args["gamma"] == 0.9 and args["vectorize"] == "DummyVecMultiAgentEnv"
    assert shown["xuance_yaml"].endswith(f"{algorithm}/mpe/simple_spread_v3.yaml")
    assert home.runs() == []


PONG = {"family": "butterfly", "env_id": "cooperative_pong_v5", "api_type": "PARALLEL", "env_kwargs": {"render_ratio": 8}}
PISTONBALL = {"family": "butterfly", "env_id": "pistonball_v6", "api_type": "PARALLEL", "env_kwargs": {"n_pistons": 2}}
#: What XuanCe's CNN path cannot take, each refused naming its field (checked in one process of the worker's environment).
IMAGE_REFUSALS = [
    ({"algorithm": "maddpg", "environment": PISTONBALL}, "algorithm",
     "maddpg: XuanCe ships no settings for image observations (no maddpg/atari.yaml)"),
    ({"algorithm": "qmix", "environment": PONG}, "algorithm",
     "XuanCe's QMIX mixer reads the global state as a flat vector; cooperative_pong_v5's global state is an image"),
    ({"environment": PONG, "algo_params": {"use_global_state": True}}, "algo_params.use_global_state",
     "XuanCe's MAPPO critic reads the global state as a flat vector"),
    ({"environment": PONG, "algo_params": {"representation": "Basic_MLP"}}, "algo_params.representation",
     "'Basic_MLP' takes flat vectors; cooperative_pong_v5 observes images"),
    ({"environment": PONG, "algo_params": {"kernels": [8, 8, 8, 8], "strides": [4, 4, 4, 4]}}, "algo_params.kernels",
     "cooperative_pong_v5's 70x120 images shrink to nothing at CNN layer 4"),
    ({"environment": PONG, "algo_params": {"filters": [32, 64]}}, "algo_params.filters",
     "need one entry per CNN layer; given 2 filters, 4 kernels, 4 strides"),
    ({"environment": PONG, "algo_params": {"img_size": [84, 84]}}, "algo_params.img_size",
     "an option of XuanCe's own Atari env, which this worker does not use"),
    ({"algo_params": {"filters": [16]}}, "algo_params.filters",
     "applies to image observations only (XuanCe's Basic_CNN); simple_spread_v3 observes no images"),
    ({"algorithm": "iql", "environment": PONG, "algo_params": {"buffer_size": 10 ** 8}}, "algo_params.buffer_size",
     "100000000 transitions of cooperative_pong_v5's observations take 37551 GiB in XuanCe's replay buffer"),
]

REFUSE_ALL = """
import json, sys
from mosaic.errors import ConfigError
from xuance_worker.config import XuanCeConfig
from xuance_worker.runtime import probe_env, quiet_xuance
quiet_xuance()
out = []
for fields in json.loads(sys.argv[1]):
    try:
        probe_env(XuanCeConfig.from_dict({"run_id": "check", **fields}))
        out.append(None)
    except ConfigError as exc:
        out.append([exc.field, str(exc)])
print(json.dumps(out))
"""


def test_what_xuances_cnn_path_and_loop_cannot_take_is_refused_naming_the_field(home):
    checked = subprocess.run([home.python, "-c", REFUSE_ALL, json.dumps([f for f, _, _ in IMAGE_REFUSALS])],
                             capture_output=True, text=True, timeout=600, check=True)
    verdicts = json.loads(checked.stdout.strip().splitlines()[-1])
    for (fields, field, words), verdict in zip(IMAGE_REFUSALS, verdicts):
        assert verdict is not None, fields
        assert verdict[0] == field and words in verdict[1], (fields, verdict)


def test_the_schema_offers_xuances_cnn_layers_from_its_image_settings(home):
    schema = json.loads(subprocess.run([home.python, "-m", "xuance_worker.cli", "--schema", "ippo"],
                                       capture_output=True, text=True, timeout=300, check=True).stdout)
    image = shipped_yaml(home, "ippo", "atari.yaml")
    for name in ("filters", "kernels", "strides"):
        option = schema["properties"][name]
        assert option["default"] == image[name] and option["type"] == "array"
        assert option["description"].startswith("image observations only")
    assert "use_cnn" not in schema["properties"] and "ippo/atari.yaml" in schema["title"]


def test_the_worker_offers_every_butterfly_id_and_the_classic_games_that_import(home):
    described = json.loads(subprocess.run([home.python, "-m", "xuance_worker.cli", "--describe"],
                                          capture_output=True, text=True, timeout=300, check=True).stdout)
    offered = described["envs"]
    assert {"pistonball_v6", "cooperative_pong_v5", "knights_archers_zombies_v10"} <= set(offered["butterfly"])
    # rps is simultaneous; tictactoe, connect_four and go are turn-based (played in turns); chess and the card
    # games need packages the worker's environment does not have
    assert offered["classic"] == ["connect_four_v3", "go_v5", "rps_v2", "tictactoe_v3"]
    assert "image" in described["capabilities"]["observation_spaces"]


def validate(home, config: dict, *flags: str) -> subprocess.CompletedProcess:
    """``python -m xuance_worker.cli --validate --config -`` (or other flags) in the worker's environment."""
    return subprocess.run([home.python, "-m", "xuance_worker.cli", *(flags or ("--validate",)), "--config", "-"],
                          input=json.dumps(config), capture_output=True, text=True, timeout=300)


def test_the_specifications_example_validates_as_written_and_its_batch_size_is_the_minibatch(home):
    example = {"worker": "xuance", "algorithm": "mappo", "learning_rate": 5e-4, "batch_size": 256, "backend": "torch"}
    proc = validate(home, example)
    assert proc.returncode == 0, proc.stderr
    assert {k: json.loads(proc.stdout)[k] for k in example} == example
    # on-policy, XuanCe's minibatch is buffer_size // n_minibatch: batch_size sets buffer_size to batch_size x it
    shown = json.loads(validate(home, example, "--dry-run").stdout)["xuance_arguments"]
    assert shown["buffer_size"] // shown["n_minibatch"] == 256 and shown["learning_rate"] == 5e-4
    shown = json.loads(validate(home, {**example, "algo_params": {"n_minibatch": 4}}, "--dry-run").stdout)
    assert shown["xuance_arguments"]["buffer_size"] == 1024 and shown["xuance_arguments"]["n_minibatch"] == 4


def test_xuances_spelling_of_the_algorithm_is_accepted_and_normalised(home):
    proc = validate(home, {"algorithm": "MAPPO"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["algorithm"] == "mappo"


# Each refused shared field exiting 2 by name: tests/test_run_fields.py walks every worker's.


@pytest.mark.parametrize("fields,named", [
    ({"learning_rate": 0.001, "algo_params": {"learning_rate": 0.002}}, ("learning_rate", "algo_params.learning_rate")),
    ({"gamma": 0.9, "algo_params": {"gamma": 0.8}}, ("gamma", "algo_params.gamma")),
    ({"batch_size": 200, "algo_params": {"buffer_size": 400}}, ("batch_size", "algo_params.buffer_size")),
    ({"algorithm": "qmix", "batch_size": 32, "algo_params": {"batch_size": 64}}, ("batch_size", "algo_params.batch_size")),
])
def test_a_shared_hyperparameter_and_xuances_own_name_for_it_at_once_are_refused_naming_both(home, fields, named):
    line = home.check_refused(fields, named[0], "both set XuanCe's")
    assert named[1] in line


def fake_checkpoint(folder, algorithm="iql", env_id="simple_spread_v3", model=True):
    """What validation reads of a XuanCe checkpoint: MOSAIC's state file (and the model file's presence)."""
    folder.mkdir(parents=True)
    state = {"format": "mosaic-xuance-worker/1", "iteration": 1, "timesteps_total": 400, "episodes": 16,
             "algorithm": algorithm, "model_file": "xuance_model.pth",
             "environment": {"family": "mpe", "env_id": env_id}}
    (folder / "mosaic_state.json").write_text(json.dumps(state))
    if model:
        (folder / "xuance_model.pth").write_bytes(b"weights")
    return str(folder)


def test_restore_from_is_checked_before_any_run_folder_exists(home, tmp_path):
    """A path that does not exist, a run folder, a folder that is no checkpoint, another algorithm's or env's
    checkpoint: `mosaic run` and `--dry-run` exit 2 naming checkpoint.restore_from, and no run folder is made."""
    run = tmp_path / "runs" / "earlier"
    fake_checkpoint(run / "checkpoints" / "checkpoint_000001")
    (run / "telemetry.jsonl").write_text("")
    (run / "analytics.json").write_text("{}")
    cases = [(str(tmp_path / "nowhere"), "does not exist"),
             (str(run), "is a run folder, not a checkpoint"),
             (str(tmp_path), "is not a checkpoint (no mosaic_state.json in it)"),
             (fake_checkpoint(tmp_path / "vdn", algorithm="vdn"),
              "was trained with algorithm vdn; this config has algorithm iql"),
             (fake_checkpoint(tmp_path / "tag", env_id="simple_tag_v3"),
              "was trained with env mpe/simple_tag_v3; this config has env mpe/simple_spread_v3"),
             (fake_checkpoint(tmp_path / "nomodel", model=False), "has no XuanCe model file")]
    for path, words in cases:
        fields = {"algorithm": "iql", "checkpoint": {"restore_from": path}}
        home.check_refused(fields, "checkpoint.restore_from", words)
        dry = home.cli("run", "--dry-run", str(home.config("dry", **fields)))
        assert dry.returncode == 2 and "checkpoint.restore_from: " in dry.stderr and words in dry.stderr, dry.stderr
    assert home.runs() == []
    good = fake_checkpoint(tmp_path / "iql")
    assert validate(home, {"algorithm": "iql", "checkpoint": {"restore_from": good}}).returncode == 0
