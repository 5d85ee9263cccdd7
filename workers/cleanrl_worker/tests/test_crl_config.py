"""Configs: schemas read from the scripts' own parsers, field-named errors, every env id checked."""

from __future__ import annotations

import json
import os
import subprocess


from crl_support import TINY

ALGORITHMS = ["ppo", "dqn", "c51", "sac", "td3", "ddpg", "dqn_atari", "ppo_atari", "c51_atari", "ppo_continuous_action",
              "ppo_atari_envpool"]


def test_schema_of_each_algorithm_follows_its_script(home):
    """--schema is the script's parser: defaults and types as CleanRL 1.2.0 declares them."""
    check = """
import argparse, importlib, json, sys
from cleanrl_worker import algorithms, config
out = {}
for name, algo in algorithms.ALGORITHMS.items():
    module = importlib.import_module(algo.module)
    seen = {}
    original = argparse.ArgumentParser.add_argument
    def spy(self, *flags, **kw):
        if flags[0] != "-h":  # argparse's own --help
            seen[flags[0]] = kw.get("default")
        return original(self, *flags, **kw)
    argparse.ArgumentParser.add_argument = spy
    try:
        params = config.read_script_params(name)
    finally:
        argparse.ArgumentParser.add_argument = original
    out[name] = {"flags": sorted(seen), "params": sorted(p.flag for p in params.values()),
                 "defaults": {p.flag: p.default for p in params.values()}, "seen": seen}
print(json.dumps(out))
"""
    proc = subprocess.run([home.python, "-c", check], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    for name in ALGORITHMS:
        assert found[name]["params"] == found[name]["flags"], name  # every option, no more
        assert found[name]["defaults"] == found[name]["seen"], name

    for name, default_lr in (("ppo", 2.5e-4), ("dqn", 2.5e-4), ("c51", 2.5e-4)):
        schema = json.loads(subprocess.run([home.python, "-m", "cleanrl_worker.cli", "--schema", name],
                                           capture_output=True, text=True, timeout=300).stdout)
        assert schema["properties"]["learning_rate"] == {
            "type": "number", "default": default_lr, "minimum": 0,  # a rate: not negative (BOUNDS)
            "description": "the learning rate of the optimizer"}
        assert "seed" not in schema["properties"] and schema["additionalProperties"] is False
    sac = json.loads(subprocess.run([home.python, "-m", "cleanrl_worker.cli", "--schema", "sac"],
                                    capture_output=True, text=True, timeout=300).stdout)
    assert sac["properties"]["autotune"]["type"] == "boolean"


def test_script_options_are_read_once_then_without_importing_the_script(home, tmp_path):
    """Reading a parser imports the script and torch (seconds); after the first time the cache answers."""
    check = """
import dataclasses, json, sys
from cleanrl_worker import algorithms, config
params = {name: [dataclasses.astuple(p) for p in config.script_params(name).values()]
          for name in algorithms.ALGORITHMS}
print(json.dumps({"params": params, "torch_imported": "torch" in sys.modules}))
"""
    env = {**os.environ, "MOSAIC_CACHE_DIR": str(tmp_path / "cache")}
    runs = [json.loads(subprocess.run([home.python, "-c", check], capture_output=True, text=True, timeout=300,
                                      env=env, check=True).stdout.strip().splitlines()[-1]) for _ in range(2)]
    assert runs[0]["torch_imported"] and not runs[1]["torch_imported"]
    assert runs[0]["params"] == runs[1]["params"] and sorted(runs[0]["params"]) == sorted(ALGORITHMS)
    assert len(list((tmp_path / "cache" / "cleanrl-script-params").glob("*.json"))) == len(ALGORITHMS)


BAD = [
    ({"algorithm": "a2c"}, "algorithm", "ppo, dqn, c51, sac, td3, ddpg, dqn_atari, ppo_atari, c51_atari, "
                                        "ppo_continuous_action"),
    ({"algorithm": "ppo", "algo_params": {"learnin_rate": 0.1}}, "algo_params.learnin_rate", "learning_rate"),
    ({"algorithm": "ppo", "algo_params": {"num_envs": "four"}}, "algo_params.num_envs", "integer"),
    ({"algorithm": "ppo", "algo_params": {"num_envs": True}}, "algo_params.num_envs", "integer"),
    ({"algorithm": "sac", "algo_params": {"autotune": 1}}, "algo_params.autotune", "allowed: true or false"),
    ({"algorithm": "dqn", "algo_params": {"seed": 3}}, "algo_params.seed", "top-level"),
    ({"algorithm": "ppo", "algo_params": {"env_id": "Acrobot-v1"}}, "algo_params.env_id", "environment.env_id"),
    # W&B: the shared top-level fields set the script's --track and --wandb-project-name
    ({"algorithm": "ppo", "algo_params": {"track": True}}, "algo_params.track", "top-level 'wandb'"),
    ({"algorithm": "ppo", "algo_params": {"track": False}}, "algo_params.track", "top-level 'wandb'"),
    ({"algorithm": "dqn", "algo_params": {"wandb_project_name": "p"}}, "algo_params.wandb_project_name",
     "top-level 'wandb_project'"),
    # listed nowhere as allowed, so refused whatever the value, with the reason
    ({"algorithm": "ppo", "algo_params": {"wandb_entity": "me"}}, "algo_params.wandb_entity", "entity"),
    ({"algorithm": "ppo", "wandb_mode": "disabled"}, "wandb_mode", "offline, online"),
    ({"algorithm": "dqn", "algo_params": {"upload_model": False}}, "algo_params.upload_model", "Hugging Face"),
    ({"algorithm": "sac", "environment": {"env_id": "CartPole-v1"}}, "environment.env_id", "Pendulum-v1"),
    ({"algorithm": "ppo", "environment": {"env_id": "Pendulum-v1"}}, "environment.env_id", "use sac, td3, ddpg"),
    ({"algorithm": "ppo", "environment": {"family": "classic"}}, "environment.family",
     "allowed: gymnasium, atari, mujoco"),
    # counts the scripts divide by or loop over (their parsers set no bounds): 0 failed the dry run with a
    # ZeroDivisionError traceback, and a run after its folder was made
    ({"algorithm": "ppo", "algo_params": {"num_steps": 0}}, "algo_params.num_steps", "allowed: an integer >= 1"),
    ({"algorithm": "ppo", "algo_params": {"update_epochs": -3}}, "algo_params.update_epochs", ">= 1"),
    ({"algorithm": "ppo", "algo_params": {"num_minibatches": 100000}}, "algo_params.num_minibatches",
     "allowed: 1 to 512"),
    ({"algorithm": "dqn", "algo_params": {"buffer_size": 0}}, "algo_params.buffer_size", ">= 1"),
    ({"algorithm": "dqn", "algo_params": {"train_frequency": 0}}, "algo_params.train_frequency", ">= 1"),
    ({"algorithm": "c51", "algo_params": {"n_atoms": 1}}, "algo_params.n_atoms", "allowed: an integer >= 2"),
    ({"algorithm": "ppo", "total_timesteps": 100}, "total_timesteps", "rollout"),
    ({"algorithm": "ppo", "total_timesteps": 1000, "num_envs": 8}, "total_timesteps", "rollout"),
    ({"algorithm": "dqn", "total_timesteps": 500, "algo_params": {"learning_starts": 500}},
     "algo_params.learning_starts", "nothing would be learned"),
    ({"algorithm": "ppo", "resources": {"threads": 0}}, "resources.threads", "below the minimum 1"),
    ({"algorithm": "ppo", "checkpoint": {"every_timesteps": -1}}, "checkpoint.every_timesteps",
     "below the minimum 0"),
    # the shared hyperparameters: onto the script's own options, where it has them
    ({"algorithm": "ppo", "batch_size": 64}, "batch_size", "algo_params.num_minibatches"),
    ({"algorithm": "sac", "learning_rate": 1e-3}, "learning_rate", "algo_params.policy_lr"),
    ({"algorithm": "c51", "num_envs": 2}, "num_envs", "no --num-envs"),
    ({"algorithm": "td3", "num_envs": 2}, "num_envs", "no --num-envs"),
    ({"algorithm": "dqn", "num_envs": 2}, "num_envs", "asserts a single env"),
    ({"algorithm": "dqn", "gamma": 0.9, "algo_params": {"gamma": 0.8}}, "algo_params.gamma", "top-level 'gamma'"),
    ({"algorithm": "ppo", "num_envs": 2, "algo_params": {"num_envs": 2}}, "algo_params.num_envs",
     "top-level 'num_envs'"),
    ({"algorithm": "dqn", "learning_rate": 1e-3, "algo_params": {"learning_rate": 1e-3}},
     "algo_params.learning_rate", "top-level 'learning_rate'"),
    ({"algorithm": "td3", "batch_size": 32, "algo_params": {"batch_size": 32}}, "algo_params.batch_size",
     "top-level 'batch_size'"),
    ({"algorithm": "dqn", "learning_rate": -1.0}, "learning_rate", "below the minimum"),
    # the old spellings are gone
    ({"algorithm": "ppo", "env_id": "CartPole-v1"}, "env_id", ""),
    ({"algorithm": "ppo", "torch_num_threads": 1}, "torch_num_threads", ""),
]

#: Shared fields the cleanrl worker refuses (its FieldMap), each with a value that is not the default.
REFUSED = [
    ("environment.env_ids", {"environment": {"env_ids": ["CartPole-v1", "Acrobot-v1"]}}),
    ("environment.env_kwargs", {"environment": {"env_kwargs": {"sutton_barto_reward": True}}}),
    ("episodes", {"episodes": 5}),
    ("checkpoint.keep", {"checkpoint": {"keep": 2}}),
    ("checkpoint.restore_from", {"checkpoint": {"restore_from": "/tmp"}}),
    ("reporting.every_timesteps", {"reporting": {"every_timesteps": 1000}}),
]


def _validate(home, configs: list[dict]) -> list[tuple[int, str, str]]:
    """``python -m cleanrl_worker.cli --validate --config -`` of each config: (exit code, stdout, stderr)."""
    out = []
    for config in configs:
        proc = subprocess.run([home.python, "-m", "cleanrl_worker.cli", "--validate", "--config", "-"],
                              input=json.dumps(config), capture_output=True, text=True, timeout=300)
        out.append((proc.returncode, proc.stdout, proc.stderr.strip()))
    return out


def _field_map(home) -> dict:
    check = ("import json; from cleanrl_worker.config import CleanRLConfig; "
             "print(json.dumps(CleanRLConfig.FIELDS.to_dict()))")
    proc = subprocess.run([home.python, "-c", check], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_field_map_covers_every_shared_field(home):
    from mosaic.workerkit.run_fields import SHARED_PATHS

    fields = _field_map(home)
    assert sorted([*fields["honoured"], *fields["refused"]]) == sorted(SHARED_PATHS)
    assert not set(fields["honoured"]) & set(fields["refused"])
    assert {path for path, _ in REFUSED} == set(fields["refused"])


def test_refused_shared_fields_are_refused_by_name(home):
    """Each field the FieldMap refuses: exit 2, one line naming it with the FieldMap's reason."""
    refused = _field_map(home)["refused"]
    results = _validate(home, [{"worker": "cleanrl", "algorithm": "ppo", **fields} for _, fields in REFUSED])
    for (path, _), (code, _, message) in zip(REFUSED, results):
        assert code == 2, (path, message)
        assert message.startswith(f"mosaic: error: {path}: ") and len(message.splitlines()) == 1, message
        assert refused[path] in message, message


def test_the_specification_example_validates_and_library_spellings_normalise(home):
    """The specification's CleanRL example, as written; ``PPO`` is ``ppo``; the shared fields reach the script."""
    spec = {"worker": "cleanrl", "algorithm": "ppo", "learning_rate": 3e-4, "total_timesteps": 1000000,
            "num_envs": 4, "capture_video": True}
    upper = {"worker": "cleanrl", "algorithm": "PPO", "gamma": 0.98}
    dqn = {"worker": "cleanrl", "algorithm": "DQN", "batch_size": 32, "learning_rate": 1e-3, "num_envs": 1}
    results = _validate(home, [spec, upper, dqn])
    assert all(code == 0 for code, _, _ in results), results
    checked = [json.loads(out[out.index("{"):]) for _, out, _ in results]
    assert checked[0]["algorithm"] == "ppo" and checked[0]["environment"]["family"] == "gymnasium"
    assert checked[0]["num_envs"] == 4 and checked[0]["capture_video"] is True
    assert checked[1]["algorithm"] == "ppo" and checked[1]["gamma"] == 0.98
    assert checked[2]["algorithm"] == "dqn"
    check = """
import json
from cleanrl_worker.config import CleanRLConfig
spec = CleanRLConfig.from_dict({"run_id": "x", "algorithm": "ppo", "learning_rate": 3e-4,
                                "total_timesteps": 1000000, "num_envs": 4, "capture_video": True})
dqn = CleanRLConfig.from_dict({"run_id": "x", "algorithm": "DQN", "batch_size": 32, "gamma": 0.9})
print(json.dumps([spec.argv(), dqn.argv()]))
"""
    proc = subprocess.run([home.python, "-c", check], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    spec_argv, dqn_argv = json.loads(proc.stdout.strip().splitlines()[-1])
    pairs = dict(zip(spec_argv[::2], spec_argv[1::2]))
    assert pairs["--learning-rate"] == "0.0003" and pairs["--num-envs"] == "4"
    assert pairs["--capture-video"] == "True" and pairs["--total-timesteps"] == "1000000"
    pairs = dict(zip(dqn_argv[::2], dqn_argv[1::2]))
    assert pairs["--batch-size"] == "32" and pairs["--gamma"] == "0.9"


def test_options_refused_when_given_are_not_in_the_schema(home):
    """track (the top-level wandb) and upload_model are refused whenever given: no schema lists them."""
    for name in ALGORITHMS:
        schema = json.loads(subprocess.run([home.python, "-m", "cleanrl_worker.cli", "--schema", name],
                                           capture_output=True, text=True, timeout=300).stdout)
        assert not {"track", "upload_model", "wandb_project_name", "wandb_entity"} & set(schema["properties"]), name


def test_dry_run_says_how_many_env_steps_the_script_runs(home):
    """ppo runs whole rollouts: 3000 env steps of 4 × 128-step rollouts are 5 iterations, 2560 env steps."""
    shown = []
    for data in ({"algorithm": "ppo", "total_timesteps": 3000}, {"algorithm": "ppo", "total_timesteps": 2048},
                 {"algorithm": "dqn", "total_timesteps": 3000, "algo_params": {"learning_starts": 1000}}):
        proc = subprocess.run([home.python, "-m", "cleanrl_worker.cli", "--dry-run", "--config", "-"],
                              input=json.dumps(data), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        shown.append(json.loads(proc.stdout))
    rounded, whole, dqn = shown
    assert rounded["env_steps"] == 2560
    assert len(rounded["warnings"]) == 1 and "5 iterations, 2560 env steps" in rounded["warnings"][0]
    assert whole["env_steps"] == 2048 and "warnings" not in whole
    assert dqn["env_steps"] == 3000 and "warnings" not in dqn


def test_bad_configs_are_one_line_naming_the_field(home, tmp_path):
    """Every case through the worker's own command line (``--validate``), in one interpreter."""
    paths = []
    for i, (fields, _, _) in enumerate(BAD):
        paths.append(str(tmp_path / f"bad{i}.json"))
        (tmp_path / f"bad{i}.json").write_text(json.dumps({"worker": "cleanrl", **fields}))
    check = """
import contextlib, io, json, sys
from cleanrl_worker.cli import main
out = []
for path in sys.argv[1:]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["--validate", "--config", path])
    out.append([code, err.getvalue()])
print(json.dumps(out))
"""
    proc = subprocess.run([home.python, "-c", check, *paths], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    for (fields, field, words), (code, message) in zip(BAD, results):
        message = message.strip()
        assert code == 2, (fields, message)
        assert len(message.splitlines()) == 1 and "Traceback" not in message, message
        assert field in message and words in message, (fields, message)


def test_bad_config_through_mosaic_run_creates_no_run(home):
    proc = home.cli("run", str(home.config("bad", algorithm="ppo", algo_params={"num_envs": "four"})))
    assert proc.returncode == 2, proc.stderr
    message = proc.stderr.strip()
    assert len(message.splitlines()) == 1 and "algo_params.num_envs" in message, message
    runs = home.root / "trainer" / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_every_algorithm_dry_runs_on_every_env_id_it_claims(home):
    """The claim is the lists in algorithms.ENVS: each id is made by each script's env API (Atari and MuJoCo
    ids by gymnasium 0.29.1, with ale-py 0.12.1 and mujoco 2.3.7; ppo_atari's and c51_atari's Atari ids by gym
    0.23.1, through the worker's adapter)."""
    check = """
import json
from cleanrl_worker import algorithms, cli
from cleanrl_worker.config import CleanRLConfig
done = []
for name, algo in algorithms.ALGORITHMS.items():
    for env_id in algorithms.env_ids_for(algo):
        config = CleanRLConfig.from_dict({"run_id": "x", "algorithm": name, "environment": {"env_id": env_id}})
        assert config.environment.family == algorithms.family_of(env_id)
        shown = cli.dry_run(config, cli.deep_validate(config))
        assert shown["command"][shown["command"].index("--env-id") + 1] == env_id
        assert ("Discrete" in shown["env"]["action_space"]) == (algo.action_space == "discrete")
        done.append([name, env_id])
print(json.dumps(done))
"""
    proc = subprocess.run([home.python, "-c", check], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = json.loads(proc.stdout.strip().splitlines()[-1])
    # ppo, dqn, c51: 3 classic; sac, td3: 2 classic; ddpg, ppo_continuous_action: 2 classic + 11 MuJoCo;
    # dqn_atari: 6 Atari games; ppo_atari, c51_atari: the same 6, made by gym 0.23.1 (gym_atari's adapter);
    # ppo_atari_envpool: 6 EnvPool Atari games (made by envpool.make)
    assert len(done) == 3 * 3 + 2 * 2 + 2 * (2 + 11) + 6 + 2 * 6 + 6


def test_dry_run_through_mosaic_shows_the_command(home):
    proc = home.cli("run", "--dry-run", str(home.config("dry", algorithm="td3", resources={"threads": 1},
                                                         **TINY["td3"])))
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert shown["command"][:2] == ["-m", "cleanrl.td3_continuous_action"]
    assert "--learning-starts" in shown["command"] and shown["script_params"]["learning_starts"] == 200
    assert shown["env_api"] == "gym"
    assert shown["thread_variables"] == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def test_its_environment_has_cleanrl_without_cleanrls_own_pins(cleanrl_env):
    """cleanrl 1.2.0 is installed with no_deps: its pygame==2.1.0 (no build for 3.11) is not there."""
    record = json.loads((cleanrl_env / "mosaic-env.json").read_text())
    assert record["no_deps"] == ["cleanrl==1.2.0"]
    packages = record["packages"]
    assert packages["cleanrl"] == "1.2.0" and packages["pygame"] == "2.6.1"
    assert packages["gym"] == "0.23.1" and packages["gymnasium"] == "0.29.1"
    assert packages["numpy"] == "1.26.4" and packages["torch"].endswith("+cpu")
    # Atari and MuJoCo: ROMs inside ale-py's wheel (no AutoROM), MuJoCo's own bindings
    assert packages["ale-py"] == "0.12.1" and packages["mujoco"] == "2.3.7"
    assert packages["opencv-python-headless"] == "4.11.0.86" and "autorom" not in packages
    # EnvPool 0.8.4: its ROMs in its wheel too (1.x ships none)
    assert packages["envpool"] == "0.8.4"
    # ppo_atari and c51_atari's SB3 1.2.0: in an overlay folder of its own, beside the environment's SB3 2.x
    assert packages["stable-baselines3"] == "2.3.2"
    overlay = record["overlays"]["sb3-gym"]
    assert overlay["pins"] == ["stable-baselines3==1.2.0"] and overlay["packages"] == {"stable-baselines3": "1.2.0"}
    assert (cleanrl_env / overlay["path"] / "stable_baselines3-1.2.0.dist-info").is_dir()
