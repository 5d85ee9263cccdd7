"""Configs: schemas read from the scripts' own parsers, field-named errors, every env id checked."""

from __future__ import annotations

import json
import os
import subprocess


from crl_support import TINY

ALGORITHMS = ["ppo", "dqn", "c51", "sac", "td3", "ddpg"]


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
            "type": "number", "default": default_lr, "description": "the learning rate of the optimizer"}
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
    ({"algorithm": "a2c"}, "algorithm", "ppo, dqn, c51, sac, td3, ddpg"),
    ({"algorithm": "ppo", "algo_params": {"learnin_rate": 0.1}}, "algo_params.learnin_rate", "learning_rate"),
    ({"algorithm": "ppo", "algo_params": {"num_envs": "four"}}, "algo_params.num_envs", "integer"),
    ({"algorithm": "ppo", "algo_params": {"num_envs": True}}, "algo_params.num_envs", "integer"),
    ({"algorithm": "sac", "algo_params": {"autotune": 1}}, "algo_params.autotune", "boolean"),
    ({"algorithm": "dqn", "algo_params": {"seed": 3}}, "algo_params.seed", "top-level"),
    ({"algorithm": "ppo", "algo_params": {"track": True}}, "algo_params.track", "not wired"),
    ({"algorithm": "sac", "env_id": "CartPole-v1"}, "env_id", "Pendulum-v1"),
    ({"algorithm": "ppo", "env_id": "Pendulum-v1"}, "env_id", "use sac, td3, ddpg"),
    ({"algorithm": "ppo", "total_timesteps": 100}, "total_timesteps", "rollout"),
    ({"algorithm": "dqn", "total_timesteps": 500, "algo_params": {"learning_starts": 500}},
     "algo_params.learning_starts", "nothing would be learned"),
    ({"algorithm": "ppo", "torch_num_threads": 0}, "torch_num_threads", "below the minimum 1"),
    ({"algorithm": "ppo", "checkpoint_every_timesteps": -1}, "checkpoint_every_timesteps", "below the minimum 0"),
]


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
    """The claim is the list in algorithms.ENV_IDS: each id is made by each script's env API."""
    check = """
import json
from cleanrl_worker import algorithms, cli
from cleanrl_worker.config import CleanRLConfig
done = []
for name, algo in algorithms.ALGORITHMS.items():
    for env_id in algorithms.env_ids_for(algo):
        config = CleanRLConfig.from_dict({"run_id": "x", "algorithm": name, "env_id": env_id})
        shown = cli.dry_run(config, cli.deep_validate(config))
        assert shown["command"][shown["command"].index("--env-id") + 1] == env_id
        assert ("Discrete" in shown["env"]["action_space"]) == (algo.action_space == "discrete")
        done.append([name, env_id])
print(json.dumps(done))
"""
    proc = subprocess.run([home.python, "-c", check], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    done = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(done) == 3 * 3 + 3 * 2


def test_dry_run_through_mosaic_shows_the_command(home):
    proc = home.cli("run", "--dry-run", str(home.config("dry", algorithm="td3", torch_num_threads=1,
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
