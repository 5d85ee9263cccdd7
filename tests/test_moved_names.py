"""A name a user brings from a library or the design documents is refused pointing at the field that carries its
meaning in MOSAIC's run vocabulary (mosaic.configkit.moved_names), not at the closest spelling: ``env_id`` at the top is
``environment.env_id`` (not ``run_id``), ``report_every_timesteps`` is ``reporting.every_timesteps`` (not
Tianshou's ``test_every_timesteps``), Jumanji's ``total_batch_size`` is ``num_envs`` (not ``batch_size``, which
the Jumanji worker refuses). Each row of the table through ``mosaic run CONFIG --dry-run`` (the real command
line; the worker's own environment; nothing runs), on the worker whose library the name comes from.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mosaic.configkit.moved_names import MOVED
from mosaic.testing import worker_env_for_tests
from mosaic.testing.worker_homes import WorkerHome

from cli_support import REPO, run_cli

#: table row -> (worker, the value given, what the refusal says)
CASES = {
    "lr": ("ray", 0.001, "RLlib's lr is learning_rate here"),
    "num_workers": ("xuance", 4, "RLlib's num_workers is num_envs here (envs stepped side by side"),
    "num_envs_per_worker": ("tianshou", 4, "RLlib's num_envs_per_worker is num_envs here"),
    "train_batch_size": ("jumanji", 512, "RLlib's train_batch_size has no field of its own in this worker's "
                                             "config; its library's own names go under algo_params"),
    "num_gpus": ("cleanrl", 1, "RLlib's num_gpus is resources.gpus here"),
    "env-id": ("cleanrl", "CartPole-v1", "CleanRL's env-id is environment.env_id here"),
    "total-timesteps": ("cleanrl", 1000, "CleanRL's total-timesteps is total_timesteps here (env steps)"),
    "running_steps": ("xuance", 1000, "XuanCe's running_steps is total_timesteps here"),
    "parallels": ("xuance", 4, "XuanCe's parallels is num_envs here"),
    "total_batch_size": ("jumanji", 8, "Jumanji's total_batch_size is num_envs here"),
    "epoch": ("tianshou", 10, "Tianshou's epoch is total_timesteps here (the whole budget in env steps"),
    "step_per_epoch": ("tianshou", 500, "Tianshou's step_per_epoch is test_every_timesteps here"),
    "training": ("random", {"total_timesteps": 100}, "the design documents' training section is gone: its "
                                                         "fields are top-level fields"),
    "resources.num_workers": ("ray", 2, "the design documents' resources.num_workers is "
                                            "rllib.num_env_runners here"),
    "resources.num_gpus": ("tianshou", 1, "the design documents' resources.num_gpus is resources.gpus here"),
    "resources.num_cpus": ("random", 1, "the design documents' resources.num_cpus is resources.cpus here"),
    "env_id": ("random", "simple_spread_v3", "a top-level env_id is environment.env_id here"),
    "env_family": ("random", "mpe", "a top-level env_family is environment.family here"),
    "env_kwargs": ("random", {"N": 2}, "a top-level env_kwargs is environment.env_kwargs here"),
    "tasks": ("balrog", ["BabyAI-GoToObj-v0"], "BALROG's tasks is environment.env_ids here"),
    "episodes_per_task": ("balrog", 2, "BALROG's episodes_per_task is episodes here"),
    "heartbeat_interval_s": ("random", 1.0, "a top-level heartbeat_interval_s is "
                                                "reporting.heartbeat_interval_s here"),
    "report_every_timesteps": ("tianshou", 100, "a top-level report_every_timesteps is "
                                                    "reporting.every_timesteps here"),
    "checkpoint_every_timesteps": ("random", 100, "a top-level checkpoint_every_timesteps is "
                                                      "checkpoint.every_timesteps here"),
}
#: Rows whose name reads another way on another worker: (row, worker, what the refusal says).
ELSEWHERE = (
    ("train_batch_size", "ray", "RLlib's train_batch_size is algo_params.train_batch_size_per_learner here"),
    ("train_batch_size", "xuance", "RLlib's train_batch_size is batch_size here (samples per gradient update"),
    ("step_per_epoch", "random", "Tianshou's step_per_epoch is reporting.every_timesteps here"),
    ("resources.num_workers", "jumanji", "the design documents' resources.num_workers is num_envs here"),
)


def test_every_row_of_the_table_is_tested():
    assert sorted(CASES) == sorted(row.name for row in MOVED)


@pytest.fixture(scope="module")
def homes() -> dict[str, Path]:
    return {}


def home_for(worker: str, homes: dict[str, Path], tmp_path_factory) -> Path:
    """The Ray and random workers run in MOSAIC's own environment; the others in their own (``var/envs``, built
    by ``scripts/bootstrap``, or built for the tests)."""
    if worker not in homes:
        root = tmp_path_factory.mktemp(f"home-{worker}")
        if worker not in ("ray", "random"):
            env = worker_env_for_tests(worker, REPO, lambda: tmp_path_factory.mktemp(f"{worker}-env-home"))
            WorkerHome.create(root, worker, env)
        homes[worker] = root
    return homes[worker]


def refusal(home: Path, worker: str, name: str, value) -> str:
    """The one line ``mosaic run --dry-run`` refuses ``worker``'s config with ``name: value`` with (exit 2)."""
    data: dict = {"worker": worker}
    section, _, key = name.rpartition(".")
    (data.setdefault(section, {}) if section else data)[key] = value
    config = home / f"{worker}-{name}.json"
    config.write_text(json.dumps(data))
    proc = run_cli("run", str(config), "--dry-run", home=home, timeout=900)
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-2000:])
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("mosaic: error: ") and "Traceback" not in proc.stderr, line
    assert not (home / "trainer" / "runs").exists()
    return line.removeprefix("mosaic: error: ")


@pytest.mark.parametrize("name", list(CASES))
def test_a_moved_name_is_refused_naming_where_it_moved(name, homes, tmp_path_factory):
    worker, value, said = CASES[name]
    line = refusal(home_for(worker, homes, tmp_path_factory), worker, name, value)
    assert line.startswith(f"{name}: unknown field; {said}"), line
    assert "did you mean" not in line, line
    assert "; allowed: " in line, line


@pytest.mark.parametrize(("name", "worker", "said"), ELSEWHERE)
def test_a_moved_name_is_said_where_this_worker_has_it(name, worker, said, homes, tmp_path_factory):
    value = CASES[name][1]
    line = refusal(home_for(worker, homes, tmp_path_factory), worker, name, value)
    assert line.startswith(f"{name}: unknown field; {said}"), line


#: A library's own name among its options (algo_params) that a shared field sets: (worker, name, what is said).
LIBRARY_OPTIONS = (
    ("jumanji", "total_batch_size", "is not an option of Jumanji's a2c on tsp; Jumanji's total_batch_size is "
                                    "num_envs here"),
    ("tianshou", "step_per_epoch", "is not an option of Tianshou's dqn; Tianshou's step_per_epoch is "
                                   "test_every_timesteps here"),
    ("ray", "num_gpus", "is not an option of RLlib's PPO; RLlib's num_gpus is resources.gpus here"),
    ("ray", "num_workers", "is not an option of RLlib's PPO; RLlib's num_workers is rllib.num_env_runners here"),
)


@pytest.mark.parametrize(("worker", "name", "said"), LIBRARY_OPTIONS)
def test_a_librarys_name_among_its_options_is_said_where_it_is_set(worker, name, said, homes, tmp_path_factory):
    line = refusal(home_for(worker, homes, tmp_path_factory), worker, f"algo_params.{name}", 8)
    assert line.startswith(f"algo_params.{name}: {said}"), line
    assert "did you mean" not in line, line


def test_a_name_not_in_the_table_still_gets_the_closest_spelling(homes, tmp_path_factory):
    line = refusal(home_for("random", homes, tmp_path_factory), "random", "total_timestep", 100)
    assert line.startswith("total_timestep: unknown field (did you mean 'total_timesteps'?); allowed: "), line
    line = refusal(home_for("ray", homes, tmp_path_factory), "ray", "algo_params.lrr", 0.1)
    assert line.startswith("algo_params.lrr: is not an option of RLlib's PPO (did you mean 'lr'?)"), line


def test_the_run_vocabulary_page_lists_every_row():
    page = (REPO / "docs" / "worker-contract.md").read_text()
    table = page.split("### Names from the libraries", 1)[1].split("###", 1)[0]
    for row in MOVED:
        assert f"`{row.name}`" in table, row.name
