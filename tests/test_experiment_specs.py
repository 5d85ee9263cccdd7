"""The experiment specs shipped under ``examples/experiments/``: each is planned by its workers, and the
cross-library one holds every setting it states once at the same value in both libraries.

Planning is the real CLI (``mosaic experiment plan SPEC --json``) as a subprocess, against a home with the
XuanCe and BenchMARL workers' environments linked in (the Ray worker lives in MOSAIC's own). Each worker checks and
normalises its cells there (``--validate-many``), so what is compared below is what the runs would be
given, with the workers' defaults filled in. Nothing is run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_support import REPO, run_cli
from mosaic.experiments.spec import read_spec

pytestmark = pytest.mark.xdist_group("experiments")

SPEC_DIR = REPO / "examples" / "experiments"
SPECS = sorted(p for p in SPEC_DIR.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
EQUAL = SPEC_DIR / "spread_mappo_ippo_equal.yaml"
SMOKE = SPEC_DIR / "spread_mappo_ippo_smoke.yaml"
EQUAL_300K = SPEC_DIR / "spread_mappo_ippo_equal_300k.yaml"
#: The libraries the cross-library specs compare (each such spec at least two of them), and each one's word for
#: the same algorithm.
LIBRARIES = ("ray", "xuance", "benchmarl")
SAME_ALGORITHM = {"mappo": {"ray": "SHARED_VALUE_FUNCTION", "xuance": "mappo", "benchmarl": "mappo"},
                  "ippo": {"ray": "INDEPENDENT", "xuance": "ippo", "benchmarl": "ippo"}}


@pytest.fixture(scope="module")
def spec_home(tmp_path_factory):
    """A home whose ``envs/xuance`` and ``envs/benchmarl`` are up-to-date worker environments."""
    from mosaic.testing import worker_env_for_tests

    home = tmp_path_factory.mktemp("experiment-specs") / "home"
    (home / "envs").mkdir(parents=True)
    for worker in ("xuance", "benchmarl"):
        env = worker_env_for_tests(worker, REPO, lambda: tmp_path_factory.mktemp(f"{worker}-env"))
        (home / "envs" / worker).symlink_to(env, target_is_directory=True)
    return home


@pytest.fixture(scope="module")
def plans(spec_home):
    """Each spec's plan, made once: spec path -> the completed process (its stdout is the plan's JSON)."""
    made: dict[Path, Any] = {}

    def plan(spec: Path):
        if spec not in made:
            planned = spec
            if read_spec(spec).continue_from:  # planned without the earlier experiment's runs (none here): the
                source = json.loads(json.dumps(read_spec(spec).source))  # same cells, without their checkpoints
                source.pop("continue_from")
                planned = spec_home.parent / f"without-continue-{spec.stem}.json"
                planned.write_text(json.dumps(source))
            made[spec] = run_cli("experiment", "plan", str(planned), "--json", home=spec_home, timeout=600)
        return made[spec]

    return plan


def _planned(plans, spec: Path) -> dict[str, Any]:
    proc = plans(spec)
    assert proc.returncode == 0, f"{spec.name}: {proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


def _at(config: dict[str, Any], path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        assert isinstance(node, dict) and part in node, f"{path}: no {part!r} in the normalised config"
        node = node[part]
    return node


def _holds(value: Any, stated: Any) -> bool:
    """``value`` is what was stated; an object may hold more fields than were stated (the worker's defaults)."""
    if isinstance(stated, dict):
        return isinstance(value, dict) and all(k in value and _holds(value[k], v) for k, v in stated.items())
    if isinstance(stated, list):
        return isinstance(value, list) and len(value) == len(stated) and all(map(_holds, value, stated))
    return value == stated and isinstance(value, bool) == isinstance(stated, bool)


def test_the_specs_are_found():
    assert EQUAL in SPECS and SMOKE in SPECS, [p.name for p in SPECS]


@pytest.mark.parametrize("spec", SPECS, ids=[p.name for p in SPECS])
def test_every_cell_of_every_spec_is_accepted_by_its_worker(spec, plans):
    plan = _planned(plans, spec)  # a refused cell makes the plan exit 2, naming it
    grid = read_spec(spec).cells()
    assert plan["name"] == read_spec(spec).name
    assert [c["cell_id"] for c in plan["cells"]] == [c.cell_id for c in grid]
    for cell, expected in zip(plan["cells"], grid):
        assert cell["worker"] == expected.worker and cell["config"]["worker"] == expected.worker
        assert cell["config"]["seed"] == expected.seed


def test_a_spec_that_continues_another_names_one_shipped_here_with_the_same_cells():
    names = {read_spec(p).name: p for p in SPECS}
    for spec in SPECS:
        parsed = read_spec(spec)
        if parsed.continue_from:
            assert parsed.continue_from in names, f"{spec.name}: continue_from {parsed.continue_from!r}"
            earlier = read_spec(names[parsed.continue_from])
            key = [(c.worker, c.configuration, c.env, c.seed) for c in parsed.cells()]
            assert key == [(c.worker, c.configuration, c.env, c.seed) for c in earlier.cells()], spec.name


def _libraries(spec: Path) -> list[str]:
    workers = {c.worker for c in read_spec(spec).cells()} | set(read_spec(spec).axes.get("worker", []))
    return [lib for lib in LIBRARIES if lib in workers]


def _cross_library_specs() -> list[Path]:
    return [p for p in SPECS if len(_libraries(p)) >= 2 and read_spec(p).study is None]  # a study: below


def _derived(parsed, name: str, worker: str) -> bool:
    entry = parsed.translate.get(name, {}).get(worker)
    return isinstance(entry, dict) and bool(entry.get("derive"))


def _minibatch(cell: dict[str, Any]) -> tuple[int, int, int]:
    """(env steps per update, env steps per minibatch, minibatches per epoch) of a planned cell, from its
    library's own fields. RLlib takes the size (rows per module, one module per agent), XuanCe the count (its
    minibatch is buffer_size // n_minibatch env steps), BenchMARL the size (frames: an env step of all the
    agents) and makes ceil(collected / size) gradient steps a pass."""
    params = cell["config"]["algo_params"]
    if cell["worker"] == "ray":
        rollout, size = params["train_batch_size_per_learner"], params["minibatch_size"]
        return rollout, size, rollout // size
    if cell["worker"] == "xuance":
        rollout, count = params["buffer_size"], params["n_minibatch"]
        return rollout, rollout // count, count
    rollout, size = params["on_policy_collected_frames_per_batch"], params["on_policy_minibatch_size"]
    return rollout, size, -(-rollout // size)


@pytest.mark.parametrize("spec", _cross_library_specs(), ids=lambda p: p.name)
def test_each_setting_stated_once_holds_the_same_value_in_every_library(spec, plans):
    parsed, libraries = read_spec(spec), _libraries(spec)
    cells = _planned(plans, spec)["cells"]
    assert parsed.settings, "a cross-library spec states its settings once, under settings"
    for name, stated in parsed.settings.items():
        mapping = parsed.translate.get(name, {})
        assert set(libraries) <= set(mapping), f"settings.{name}: not translated for each of {libraries}"
        seen: dict[str, list[Any]] = {lib: [] for lib in libraries}
        for cell in cells:
            path = parsed.path_for(name, cell["worker"], cell["cell_id"])
            value = _at(cell["config"], path)
            seen.setdefault(cell["worker"], []).append(value)
            if _derived(parsed, name, cell["worker"]):
                continue  # checked below, through the minibatch rule
            expected = parsed.value_for(name, cell["worker"], stated)  # in the library's words
            assert _holds(value, expected), (f"{cell['cell_id']} ({cell['worker']}): {name} is {value!r} at "
                                             f"{path}, stated {stated!r}")
        assert all(seen[lib] for lib in libraries), f"{name}: no cell of some library: {seen}"

    # The minibatch: the same number of env steps in every library, and the rollout a whole number of them.
    rollout, count = parsed.settings["rollout_env_steps"], parsed.settings.get("minibatches")  # older specs: in
    shapes = {_minibatch(c) for c in cells}                                                      # each base
    assert len(shapes) == 1, f"the libraries' minibatches differ: {shapes}"
    ((in_rollout, size, minibatches),) = shapes
    assert in_rollout == rollout and size * minibatches == rollout and count in (None, minibatches), shapes
    # BenchMARL's passes: on_policy_n_minibatch_iters passes of ceil(rollout / size) minibatches, drawn without
    # replacement (TorchRL's SamplerWithoutReplacement), see every env step `epochs` times.
    epochs = parsed.settings["epochs"]
    for cell in cells:
        if cell["worker"] == "benchmarl":
            params = cell["config"]["algo_params"]
            _, size, count = _minibatch(cell)
            assert params["on_policy_n_minibatch_iters"] * count * size == epochs * rollout, (cell["cell_id"],
                                                                                               params)

    # One actor per agent in every library, so a minibatch row is one agent's step in each.
    for cell in cells:
        config = cell["config"]
        if cell["worker"] == "ray":
            assert config["algorithm"] == "ppo" and config["ctde"]["actors"] == "per_agent"
        elif cell["worker"] == "xuance":
            assert config["algo_params"]["use_parameter_sharing"] is False
        else:
            assert config["algo_params"]["share_policy_params"] is False
            assert config["algo_params"]["share_param_critic"] is False

    # Each configuration runs on every library, with the same seeds.
    by_algorithm: dict[tuple[str, str], list[int]] = {}
    for cell in cells:
        algorithm = cell["settings"]["algorithm"]
        own = cell["config"]["policy_configuration"] if cell["worker"] == "ray" else cell["config"]["algorithm"]
        assert own == SAME_ALGORITHM[algorithm][cell["worker"]], (cell["cell_id"], algorithm, own)
        by_algorithm.setdefault((algorithm, cell["worker"]), []).append(cell["seed"])
    for algorithm in SAME_ALGORITHM:
        assert len({tuple(by_algorithm[(algorithm, lib)]) for lib in libraries}) == 1, by_algorithm


def test_the_300k_comparison_has_benchmarl_as_a_third_library_on_an_equal_budget(plans):
    """30 cells, 10 a library; the budget a whole number of every library's updates (BenchMARL rounds up to whole
    collections, so it would otherwise train more)."""
    parsed = read_spec(EQUAL_300K)
    cells = _planned(plans, EQUAL_300K)["cells"]
    assert len(cells) == 30 and _libraries(EQUAL_300K) == list(LIBRARIES)
    budgets = {c["worker"]: set() for c in cells}
    for cell in cells:
        budgets[cell["worker"]].add(cell["config"]["total_timesteps"])
    assert budgets == {lib: {parsed.settings["total_timesteps"]} for lib in LIBRARIES}
    assert parsed.settings["total_timesteps"] % parsed.settings["rollout_env_steps"] == 0


def test_benchmarls_own_config_values_hold_the_300k_comparisons_settings(plans, spec_home, tmp_path):
    """The worker's --dry-run (BenchMARL's ExperimentConfig, MappoConfig, TaskConfig and MlpConfig values as the
    run builds them) of the spec's first BenchMARL cell: each setting under BenchMARL's own name."""
    parsed = read_spec(EQUAL_300K)
    cell = next(c for c in _planned(plans, EQUAL_300K)["cells"] if c["worker"] == "benchmarl")
    path = tmp_path / "cell.json"
    path.write_text(json.dumps({**cell["config"], "run_id": "dry"}))
    proc = run_cli("run", str(path), "--dry-run", home=spec_home, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    dry = json.loads(proc.stdout)
    experiment, algorithm, task = dry["experiment_config"], dry["algorithm_config"], dry["task_config"]
    own = {**experiment, **algorithm}
    settings = parsed.settings
    assert task == {"task": "simple_spread_v3", **settings["env_kwargs"]} and dry["task"]["actions"] == "discrete"
    assert dry["task"]["groups"] == {"agent": ["agent_0", "agent_1", "agent_2"]}
    assert (experiment["max_n_frames"], experiment["on_policy_n_envs_per_worker"], experiment["lr"],
            experiment["gamma"]) == (settings["total_timesteps"], settings["num_envs"], settings["learning_rate"],
                                     settings["gamma"])
    assert (own["on_policy_collected_frames_per_batch"], own["on_policy_n_minibatch_iters"],
            own["on_policy_minibatch_size"]) == (settings["rollout_env_steps"], settings["epochs"],
                                                 settings["rollout_env_steps"] // settings["minibatches"])
    assert (own["lmbda"], own["clip_epsilon"], own["entropy_coef"], own["critic_coef"], own["clip_grad_val"]) == (
        settings["gae_lambda"], settings["clip_range"], settings["entropy_coef"], settings["value_loss_coef"],
        settings["grad_clip_norm"])
    assert own["clip_grad_norm"] is True and own["loss_critic_type"] == "l2" and own["minibatch_advantage"] is False
    assert own["share_policy_params"] is False and own["share_param_critic"] is False
    mlp = {"num_cells": settings["hidden_layers"], "activation_class": "torch.nn.ReLU"}
    assert settings["activation"] == "relu" and dry["model_config"] == dry["critic_model_config"] == mlp
    assert dry["iterations"] * settings["rollout_env_steps"] == settings["total_timesteps"]  # no rounding up


def test_the_smoke_spec_is_the_equal_spec_with_a_budget_of_one_update():
    equal, smoke = read_spec(EQUAL), read_spec(SMOKE)
    assert (smoke.base, smoke.translate, smoke.axes, smoke.combine) == (equal.base, equal.translate, equal.axes,
                                                                         equal.combine)
    budget = {k: v for k, v in smoke.settings.items() if k != "total_timesteps"}
    assert budget == {k: v for k, v in equal.settings.items() if k != "total_timesteps"}
    assert smoke.settings["total_timesteps"] == smoke.settings["rollout_env_steps"]
    assert equal.settings["total_timesteps"] % equal.settings["rollout_env_steps"] == 0
    assert len(smoke.seeds) == 1 and len(equal.seeds) == 5


def _study_specs() -> list[Path]:
    return [p for p in SPECS if read_spec(p).study is not None]


def test_the_tuned_comparison_is_shipped_as_a_study():
    assert any(p.name == "spread_ippo_tuned_300k.yaml" for p in _study_specs()), [p.name for p in SPECS]


@pytest.mark.parametrize("spec", _study_specs(), ids=lambda p: p.name)
def test_a_study_gives_both_libraries_each_setting_and_each_sampled_value(spec, plans):
    """A study's plan holds each contender's sample cell (the space's middle point) as its worker normalised it:
    every setting stated once, and every tuned name at the sample point, is there under each library's own path;
    RLlib's minibatch size, derived from the number of minibatches, times XuanCe's number is the rollout."""
    parsed = read_spec(spec)
    plan = _planned(plans, spec)
    contenders = plan["study"]["contenders"]
    assert {c["worker"] for c in contenders} == {"ray", "xuance"}
    for contender in contenders:
        point = contender["sample_point"]
        for name, stated in {**parsed.settings, **point}.items():
            entry = parsed.translate.get(name, {}).get(contender["worker"])
            if isinstance(entry, dict) and entry.get("derive"):
                continue  # checked below, through the minibatch rule
            path = parsed.path_for(name, contender["worker"], contender["label"])
            value = _at(contender["sample"], path)
            expected = parsed.value_for(name, contender["worker"], stated)  # in the library's words
            assert _holds(value, expected), f"{contender['label']}: {name} is {value!r} at {path}, stated {stated!r}"
    ray = next(c for c in contenders if c["worker"] == "ray")
    xuance = next(c for c in contenders if c["worker"] == "xuance")
    size, count = ray["sample"]["algo_params"]["minibatch_size"], xuance["sample"]["algo_params"]["n_minibatch"]
    assert count == xuance["sample_point"]["minibatches"] == ray["sample_point"]["minibatches"]
    assert size * count == parsed.settings["rollout_env_steps"]
