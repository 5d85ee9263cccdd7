"""The experiment specs shipped under ``examples/experiments/``: each is planned by its workers, and the
cross-library one holds every setting it states once at the same value in both libraries.

Planning is the real CLI (``mosaic experiment plan SPEC --json``) as a subprocess, against a home with the
XuanCe worker's environment linked in (the Ray worker lives in MOSAIC's own). Each worker checks and
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
#: The libraries the cross-library specs compare, and each one's word for the same algorithm.
LIBRARIES = ("ray", "xuance")
SAME_ALGORITHM = {"mappo": {"ray": "SHARED_VALUE_FUNCTION", "xuance": "mappo"},
                  "ippo": {"ray": "INDEPENDENT", "xuance": "ippo"}}


@pytest.fixture(scope="module")
def spec_home(tmp_path_factory):
    """A home whose ``envs/xuance`` is an up-to-date XuanCe worker environment."""
    from mosaic.testing import worker_env_for_tests

    home = tmp_path_factory.mktemp("experiment-specs") / "home"
    (home / "envs").mkdir(parents=True)
    env = worker_env_for_tests("xuance", REPO, lambda: tmp_path_factory.mktemp("xuance-env"))
    (home / "envs" / "xuance").symlink_to(env, target_is_directory=True)
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


def _cross_library_specs() -> list[Path]:
    return [p for p in SPECS if set(LIBRARIES) <= {c.worker for c in read_spec(p).cells()}]


@pytest.mark.parametrize("spec", _cross_library_specs(), ids=lambda p: p.name)
def test_each_setting_stated_once_holds_the_same_value_in_both_libraries(spec, plans):
    parsed = read_spec(spec)
    cells = _planned(plans, spec)["cells"]
    assert parsed.settings, "a cross-library spec states its settings once, under settings"
    for name, stated in parsed.settings.items():
        mapping = parsed.translate.get(name, {})
        assert set(LIBRARIES) <= set(mapping), f"settings.{name}: not translated for each of {LIBRARIES}"
        seen: dict[str, list[Any]] = {lib: [] for lib in LIBRARIES}
        for cell in cells:
            path = parsed.path_for(name, cell["worker"], cell["cell_id"])
            value = _at(cell["config"], path)
            assert _holds(value, stated), (f"{cell['cell_id']} ({cell['worker']}): {name} is {value!r} at "
                                           f"{path}, stated {stated!r}")
            seen.setdefault(cell["worker"], []).append(value)
        assert all(seen[lib] for lib in LIBRARIES), f"{name}: no cell of some library: {seen}"

    # The minibatch: RLlib takes its size (rows per module, one module per agent), XuanCe the count
    # (its minibatch is buffer_size // n_minibatch env steps, each one row per agent).
    sizes = {c["config"]["algo_params"]["minibatch_size"] for c in cells if c["worker"] == "ray"}
    counts = {c["config"]["algo_params"]["n_minibatch"] for c in cells if c["worker"] == "xuance"}
    assert len(sizes) == 1 and len(counts) == 1, (sizes, counts)
    (size,), (count,), rollout = sizes, counts, parsed.settings["rollout_env_steps"]
    assert size * count == rollout, f"RLlib's minibatch of {size} x XuanCe's {count} minibatches != {rollout}"

    # One actor per agent on both sides, so a minibatch row is one agent's step in both libraries.
    for cell in cells:
        config = cell["config"]
        if cell["worker"] == "ray":
            assert config["algorithm"] == "ppo" and config["ctde"]["actors"] == "per_agent"
        else:
            assert config["algo_params"]["use_parameter_sharing"] is False

    # Each configuration runs on both libraries, with the same seeds.
    by_algorithm: dict[tuple[str, str], list[int]] = {}
    for cell in cells:
        algorithm = cell["settings"]["algorithm"]
        own = cell["config"]["policy_configuration"] if cell["worker"] == "ray" else cell["config"]["algorithm"]
        assert own == SAME_ALGORITHM[algorithm][cell["worker"]], (cell["cell_id"], algorithm, own)
        by_algorithm.setdefault((algorithm, cell["worker"]), []).append(cell["seed"])
    for algorithm in SAME_ALGORITHM:
        assert by_algorithm[(algorithm, "ray")] == by_algorithm[(algorithm, "xuance")], by_algorithm


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
    assert {c["worker"] for c in contenders} == set(LIBRARIES)
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
