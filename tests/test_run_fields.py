"""The shared run vocabulary: one meaning per field, for every worker, and everything above reads it.

The walk over installed workers runs each one's real ``--describe`` in its own interpreter.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

from mosaic import configkit
from mosaic.configkit import json_types
from mosaic.host.discovery import discover_workers
from mosaic.errors import ConfigError
from mosaic.host.launcher import validate_config, worker_command
from mosaic.workerkit.run_fields import (SHARED_FIELDS, SHARED_PATHS, FieldMap, RunConfig,
                                         canonical_algorithm, check_restore_from, summarize)
from mosaic.runs import RunStore

WORKERS = discover_workers()
CORE_SCHEMA = configkit.json_schema(RunConfig)


# -- the core's own pieces -----------------------------------------------------------
@dataclass
class ToyConfig(RunConfig):
    FIELDS = FieldMap(honoured={"learning_rate": "the toy's lr"},
                      refused={"gamma": "the toy has no discount", "checkpoint.keep": "the toy keeps all"})
    ALGORITHM_ALIASES = {"DeepQ": "dqn"}

    @classmethod
    def algorithms(cls):
        return ("ppo", "dqn")


def test_the_algorithm_is_normalised_from_any_case_and_the_librarys_spelling():
    assert ToyConfig.from_dict({"run_id": "r", "algorithm": "PPO"}).algorithm == "ppo"
    assert ToyConfig.from_dict({"run_id": "r", "algorithm": "deepq"}).algorithm == "dqn"
    with pytest.raises(ConfigError) as err:
        ToyConfig.from_dict({"run_id": "r", "algorithm": "sac"})
    assert str(err.value) == "algorithm: 'sac' is not one of ppo, dqn"
    assert canonical_algorithm("Mappo", ["mappo"]) == "mappo"


def test_a_refused_shared_field_is_refused_by_name_with_the_allowed_value():
    with pytest.raises(ConfigError) as err:
        ToyConfig.from_dict({"run_id": "r", "algorithm": "ppo", "gamma": 0.9})
    assert str(err.value).startswith("gamma: 0.9 is not supported") and "the toy has no discount" in str(err.value)
    assert str(err.value).endswith("allowed: null (the default)")
    with pytest.raises(ConfigError) as err:
        ToyConfig.from_dict({"run_id": "r", "algorithm": "ppo", "checkpoint": {"keep": 2}})
    assert err.value.field == "checkpoint.keep"
    assert ToyConfig.from_dict({"run_id": "r", "algorithm": "ppo", "learning_rate": 0.1}).learning_rate == 0.1


def test_restore_from_must_be_an_existing_checkpoint_not_a_run_folder(tmp_path):
    with pytest.raises(ConfigError) as err:
        check_restore_from(str(tmp_path / "nope"))
    assert err.value.field == "checkpoint.restore_from" and "does not exist" in str(err.value)
    run = RunStore(tmp_path / "home").create("r1", {"worker": "toy"}, {"worker": "toy"})
    (run.root / "checkpoints" / "iter_000001").mkdir(parents=True)
    with pytest.raises(ConfigError) as err:
        check_restore_from(str(run.root))
    assert "is a run folder" in str(err.value) and str(run.root / "checkpoints" / "iter_000001") in str(err.value)
    assert check_restore_from(str(run.root / "checkpoints" / "iter_000001")) == \
        str((run.root / "checkpoints" / "iter_000001").resolve())


def test_summaries_read_the_shared_fields_and_run_folders_written_before_them():
    new = summarize({"worker": "xuance", "algorithm": "mappo", "seed": 2, "total_timesteps": 30_000,
                     "environment": {"family": "mpe", "env_id": "simple_spread_v3"}})
    assert (new.worker, new.algorithm, new.env_id, new.seed, new.budget, new.budget_unit) == \
        ("xuance", "mappo", "simple_spread_v3", 2, 30_000, "env steps")
    tasks = summarize({"worker": "balrog", "algorithm": "llm", "episodes": 20,
                       "environment": {"family": "babyai", "env_ids": ["BabyAI-GoToObj-v0", "BabyAI-OpenDoor-v0"]}})
    assert tasks.env_id == "BabyAI-GoToObj-v0 +1" and tasks.budget_unit == "episodes"
    # the shapes of run folders written before the shared vocabulary
    assert summarize({"training": {"algorithm": "PPO", "total_timesteps": 5},
                      "environment": {"family": "mpe", "env_id": "simple_tag_v3"}}).algorithm == "PPO"
    assert summarize({"algorithm": "dqn", "env_id": "CartPole-v1"}).env_id == "CartPole-v1"
    assert summarize({"algorithm": "a2c", "environment": "tsp"}).env_id == "tsp"
    assert summarize({"tasks": ["BabyAI-GoToObj-v0"], "episodes_per_task": 3}).budget == 3


# -- every installed worker ------------------------------------------------------------
def _leaf(schema: dict, path: str) -> dict | None:
    node = schema
    for part in path.split("."):
        node = (node.get("properties") or {}).get(part)
        if node is None:
            return None
    return node


@pytest.mark.parametrize("name", WORKERS.names())
def test_every_worker_declares_the_shared_fields_with_the_cores_types(name, documents):
    """Each worker's config schema has every shared field, each leaf with the core's JSON types."""
    schema = documents[name]["config_schema"]
    for field in SHARED_FIELDS:
        assert field in schema["properties"], f"{name}: the shared field {field!r} is missing from its config"
    for path in SHARED_PATHS:
        ours, theirs = _leaf(CORE_SCHEMA, path), _leaf(schema, path)
        assert theirs is not None, f"{name}: the shared field {path!r} is missing from its config"
        assert json_types(theirs) == json_types(ours), \
            f"{name}: {path} must have the core's types {sorted(json_types(ours))}, has {sorted(json_types(theirs))}"


@pytest.mark.parametrize("name", WORKERS.names())
def test_every_shared_field_is_either_honoured_or_refused_with_a_reason(name, documents):
    shared = documents[name].get("shared_fields")
    assert shared is not None, f"{name}: its config class is not a mosaic.workerkit.run_fields.RunConfig"
    honoured, refused = shared["honoured"], shared["refused"]
    assert not set(honoured) & set(refused), f"{name}: both honoured and refused: {set(honoured) & set(refused)}"
    missing = [p for p in SHARED_PATHS if p not in honoured and p not in refused]
    assert not missing, f"{name}: says nothing of the shared fields {missing}"
    unknown = [p for p in [*honoured, *refused] if p not in SHARED_PATHS]
    assert not unknown, f"{name}: {unknown} are not shared fields"
    assert all(text.strip() for text in [*honoured.values(), *refused.values()])


@pytest.mark.parametrize("name", WORKERS.names())
def test_algorithms_are_canonical_lower_case_and_the_default_uses_one(name, documents):
    document = documents[name]
    algorithms = document["capabilities"]["algorithms"]
    assert algorithms and all(a == a.lower() for a in algorithms), algorithms
    assert document["default_config"].get("algorithm", algorithms[0]) in algorithms


@pytest.mark.parametrize("name", WORKERS.names())
def test_the_algorithm_fields_help_names_every_algorithm_the_worker_offers(name, documents):
    """`mosaic workers show NAME`, the GUI's tooltip and the config reference print the field's help: it must not
    leave out an algorithm the worker offers (Tianshou's once lacked bcq and cql, CleanRL's two Atari scripts)."""
    document = documents[name]
    text = document["config_schema"]["properties"]["algorithm"]["description"]
    named = set(re.findall(r"[a-z][a-z0-9_]*", text))
    missing = [a for a in document["capabilities"]["algorithms"] if a not in named]
    assert not missing, f"{name}: the algorithm field's help leaves out {missing}: {text!r}"


@pytest.mark.parametrize("name", WORKERS.names())
def test_every_algo_params_default_lies_within_the_bounds_its_schema_states(name, documents):
    """Bounds and choices a worker adds to its library's options (counts, fractions, XuanCe's activations) must
    admit the library's own defaults, or a run with no algo_params at all would be refused."""
    for algorithm, schema in documents[name]["algo_params_schemas"].items():
        for key, prop in schema.get("properties", {}).items():
            default = prop.get("default")
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                assert prop.get("minimum", default) <= default <= prop.get("maximum", default), (algorithm, key)
                assert default > prop.get("exclusiveMinimum", default - 1), (algorithm, key)
            if "enum" in prop and default is not None:
                assert default in prop["enum"], (algorithm, key, default, prop["enum"])


@pytest.mark.parametrize("name", WORKERS.names())
def test_listings_show_env_and_algorithm_for_every_worker_from_its_config(name, documents, tmp_path,
                                                                          monkeypatch):
    """`mosaic runs` and the daemon read the shared fields: a run of every worker that never reached
    run_started (its worker died at once) still lists with its worker, env, algorithm and seed."""
    from mosaic.host.daemon.supervisor import _config_summary
    from mosaic.testing.stub_llm_server import StubServer, pointed_at

    worker = WORKERS.get(name)
    data = {**documents[name]["default_config"], "run_id": "listed"}
    monkeypatch.setenv("OPENAI_API_KEY", "local")  # defaults that name a hosted model's key variable
    monkeypatch.setenv("MOSAIC_TEST_KEY", "local")
    with StubServer(["ACTION: done"]) as server:
        # an evaluator's endpoint: a local one stands in for it
        config = validate_config(worker, pointed_at(data, server, "MOSAIC_TEST_KEY"))
    algorithm, env_id = _config_summary(config)
    assert algorithm and env_id, (name, config)
    home = tmp_path / "home"
    RunStore(home).create("listed", config, {"worker": name, "status": "failed"})
    proc = subprocess.run([sys.executable, "-m", "mosaic", "runs"], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MOSAIC_HOME": str(home)})
    assert proc.returncode == 0, proc.stderr
    row = proc.stdout.splitlines()[-1].split()
    assert row[:5] == ["listed", "failed", name, env_id.split()[0], algorithm], proc.stdout


@pytest.mark.parametrize("name", WORKERS.names())
def test_mosaic_workers_show_prints_each_workers_description(name, documents):
    """Algorithms, env families, capabilities, the shared-field map and every config field, for a person;
    --json gives the describe document itself."""
    env = {**os.environ}
    proc = subprocess.run([sys.executable, "-m", "mosaic", "workers", "show", name], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr
    document = documents[name]
    assert proc.stdout.startswith(f"{name} {document['metadata']['version']}: ")
    assert f"algorithms: {', '.join(document['capabilities']['algorithms'])}" in proc.stdout
    for family in document["envs"]:
        assert f"\n  {family}: " in proc.stdout
    for path in SHARED_PATHS:
        assert f"\n  {path}: " in proc.stdout, path  # honoured or refused, with what or why
    for field in ("seed", "total_timesteps", "checkpoint.every_timesteps", "resources.gpus"):
        assert f"\n  {field} = " in proc.stdout
    as_json = subprocess.run([sys.executable, "-m", "mosaic", "workers", "show", name, "--json"],
                             capture_output=True, text=True, timeout=300, env=env)
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["config_schema"] == document["config_schema"]


def test_a_field_taking_a_word_or_a_number_says_both(documents):
    """Tianshou sac's algo_params.alpha is a number or "auto": the listing names the word and the type."""
    if "tianshou" not in documents:
        pytest.skip("the tianshou worker is not installed here")
    proc = subprocess.run([sys.executable, "-m", "mosaic", "workers", "show", "tianshou", "--algorithm", "sac"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("  alpha = ")]
    assert line.startswith("  alpha = 0.2  [one of auto or number]  "), line


def test_mosaic_workers_show_prints_what_the_worker_pages_say_it_prints(documents):
    """The capabilities the pages' "Offers and refuses" sections quote (pause/resume, serving a player), the
    estimate a null resources.cpus reserves, and env lists cut to 8 saying how many more there are."""
    proc = subprocess.run([sys.executable, "-m", "mosaic", "workers", "show", "random"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    caps = documents["random"]["capabilities"]
    assert "; pause/resume: yes; serves a player: no; population training: no; needs a GPU: no" in proc.stdout
    assert (f"  spaces: actions {', '.join(caps['action_spaces'])}; "
            f"observations {', '.join(caps['observation_spaces'])}") in proc.stdout.splitlines()
    estimate = caps["resources"]
    assert (f"a run's estimate (the daemon reserves it when resources.cpus is null): {estimate['cpus']} CPUs, "
            f"{estimate['memory_mb']} MB, {estimate['gpus']} GPUs") in proc.stdout
    mpe = documents["random"]["envs"]["mpe"]
    assert f"  mpe: {', '.join(mpe[:8])}, ... ({len(mpe) - 8} more, {len(mpe)} in all)" in proc.stdout.splitlines()
    # a worker's algorithm without algo_params has none to show, rather than "not one of (none)"
    proc = subprocess.run([sys.executable, "-m", "mosaic", "workers", "show", "random", "--algorithm", "RANDOM"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and proc.stdout.splitlines() == ["algo_params of random random:", "  (none)"], proc


def test_mosaic_workers_show_refuses_an_unknown_worker_naming_the_installed_ones():
    proc = subprocess.run([sys.executable, "-m", "mosaic", "workers", "show", "no_such_worker"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"mosaic: error: worker: 'no_such_worker' is not one of {', '.join(WORKERS.names())}"


def test_the_contracts_new_worker_skeleton_is_a_complete_run_config():
    """docs/worker-contract.md's skeleton runs, and says something of every shared field."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "worker-contract.md").read_text()
    block = text.split("### A new worker on the shared fields", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    import types

    module = types.ModuleType("mosaic_contract_skeleton")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    try:
        exec(compile(block, "worker-contract.md", "exec", dont_inherit=True), module.__dict__)
    finally:
        del sys.modules[module.__name__]
    config_class = module.MyConfig
    fields = config_class.FIELDS
    assert sorted([*fields.honoured, *fields.refused]) == sorted(SHARED_PATHS)
    config = config_class.from_dict({"run_id": "r", "algorithm": "PPO", "environment": {"env_id": "CartPole-v1"}})
    assert config.algorithm == "ppo" and config.seed == 1
    given = config_class.from_dict({"run_id": "r", "algorithm": "ppo", "resources": {"cpus": 1}})
    assert (given.resources.threads, given.resources.cpus) == (1, 1.0)  # the section's own default kept
    with pytest.raises(ConfigError) as err:
        config_class.from_dict({"run_id": "r", "algorithm": "ppo", "batch_size": 64})
    assert err.value.field == "batch_size"


def _other_value(schema: dict, default):
    """A valid value of a shared field's JSON type that is not its default."""
    kinds = json_types(schema)
    if "boolean" in kinds:
        return not default
    if "integer" in kinds:
        return (default or 0) + 3
    if "number" in kinds:
        return 0.5 if default != 0.5 else 0.25
    if "array" in kinds:
        return ["x_v0", "y_v0"]
    if "object" in kinds:
        return {"enabled": True} if "properties" in schema and "enabled" in schema["properties"] else {"lr": 1}
    return "something_else"


@contextlib.contextmanager
def _runnable_default(document: dict, monkeypatch):
    """A worker's default config, an LLM worker's model pointed at a local stub server (up while in use)."""
    from mosaic.testing.stub_llm_server import StubServer, pointed_at

    monkeypatch.setenv("OPENAI_API_KEY", "local")
    with StubServer(["ACTION: done"]) as server:
        yield pointed_at(dict(document["default_config"]), server)


@pytest.mark.parametrize("name", WORKERS.names())
def test_every_refused_shared_field_is_refused_by_name_through_the_worker(name, documents, monkeypatch):
    """For every worker and every field its map refuses: a value other than the default is refused naming the
    field and the reason, before anything runs. The worker checks every case in one process of its own
    interpreter (``--validate-many``, as an experiment's plan does), and the first also alone through
    ``--validate``, which exits 2."""
    from mosaic.host.launcher import validate_configs
    from mosaic.errors import UserError

    worker = WORKERS.get(name)
    document = documents[name]
    refused = document["shared_fields"]["refused"]
    with _runnable_default(document, monkeypatch) as base:
        cases = []
        for path in refused:
            default = _leaf_value(base, path)
            value = _other_value(_leaf(document["config_schema"], path), default)
            config = json.loads(json.dumps(base))
            *parents, leaf = path.split(".")
            node = config
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
            cases.append((path, value, config))
        answers = validate_configs(worker, [base, *(config for _, _, config in cases)])
        assert isinstance(answers[0], dict) and answers[0]["worker"] == name, answers[0]  # the default passes
        for (path, value, _), answer in zip(cases, answers[1:]):
            assert isinstance(answer, UserError), (path, value, answer)
            assert str(answer).startswith(f"{path}: ") and refused[path] in str(answer), (path, str(answer))
        if cases:
            path, value, config = cases[0]
            proc = subprocess.run([*worker_command(worker), "--validate", "--config", "-"], input=json.dumps(config),
                                  capture_output=True, text=True, timeout=300)
            assert proc.returncode == 2, (path, value, proc.stdout[-500:])
            line = proc.stderr.strip().splitlines()[-1]
            assert line.startswith(f"mosaic: error: {path}: ") and refused[path] in line, (path, line)


#: Shared sections whose keys do not depend on each other: a section given in part keeps the worker's defaults for
#: the rest (an env section is not one: its family decides its ids).
INDEPENDENT_SECTIONS = ("resources", "reporting", "checkpoint")
#: The key given alone, by section (another where a worker refuses it): each leaves the interesting keys out.
KEY_GIVEN = {"resources": ("cpus",), "reporting": ("heartbeat_interval_s",), "checkpoint": ("every_timesteps",)}


@pytest.mark.parametrize("name", WORKERS.names())
def test_a_shared_section_given_in_part_keeps_the_workers_defaults_for_the_rest(name, documents, monkeypatch):
    """For every worker and each of its shared sections: one key given alone (``resources: {cpus: 1}``); the
    worker's own interpreter normalises the config, and every other key of the section keeps the section's
    default as the worker describes it (``resources.threads`` stays 1 where the worker makes that its default:
    before, giving ``cpus`` alone gave torch every core)."""
    from mosaic.host.launcher import validate_configs

    document = documents[name]
    refused = set(document["shared_fields"]["refused"])
    properties = document["config_schema"]["properties"]
    with _runnable_default(document, monkeypatch) as base:
        cases = []
        for section in INDEPENDENT_SECTIONS:
            schema = properties.get(section)
            if schema is None or not isinstance(schema.get("default"), dict):
                continue
            keys = [k for k in schema["default"] if f"{section}.{k}" not in refused and k != "restore_from"]
            if not keys:
                continue
            key = next((k for k in KEY_GIVEN[section] if k in keys), keys[0])
            value = _other_value(_leaf(document["config_schema"], f"{section}.{key}"), schema["default"][key])
            config = {k: v for k, v in json.loads(json.dumps(base)).items() if k != section}
            cases.append((section, key, value, {**config, section: {key: value}}))
        assert cases, f"{name} describes none of {INDEPENDENT_SECTIONS}"
        answers = validate_configs(WORKERS.get(name), [config for *_, config in cases])
    for (section, key, value, _), answer in zip(cases, answers):
        assert isinstance(answer, dict), (section, key, value, answer)
        expected = {**properties[section]["default"], key: value}
        assert answer[section] == expected, (section, key, value)


def _leaf_value(config: dict, path: str):
    node = config
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node
