"""Per-worker environments: real uv, real venvs, a worker whose numpy conflicts with MOSAIC's.

The test worker (tests/fixtures/numpy1_worker) pins numpy 1.26.4 while MOSAIC's own
environment has numpy 2. Each test works on its own copy of it, so pins can be
edited; uv's shared cache keeps every build after the first at a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy
import pytest

from cli_support import run_cli
from envs_support import PINNED, WORKER, Lab, assert_one_line_error, build_ok, make_lab
from mosaic.host import environments as worker_envs
from mosaic.host.discovery import DiscoveredWorker
from mosaic.errors import ConfigError, UserError
from mosaic.host.launcher import WorkerProcess
from mosaic.runs import RunDir, RunStore



@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Lab:
    """One environment built once, only read by the tests that use it."""
    lab = make_lab(tmp_path_factory.mktemp("envs"))
    proc = build_ok(lab)
    assert f"{WORKER}: built at {lab.env}" in proc.stdout
    return lab


@pytest.fixture
def lab(tmp_path, monkeypatch) -> Lab:
    """A fresh copy with its environment built; in-process calls see it too."""
    lab = make_lab(tmp_path)
    monkeypatch.setenv("MOSAIC_WORKER_PATH", str(lab.workers))
    build_ok(lab)
    return lab


def test_build_gives_the_worker_its_own_numpy(built):
    assert int(numpy.__version__.split(".")[0]) >= 2  # MOSAIC's own environment
    assert built.env_numpy() == PINNED

    record = built.record()
    assert record["worker"] == WORKER and record["package"] == "numpy1_worker"
    assert record["interpreter"] == str(worker_envs.python_in(built.env))
    assert record["base_interpreter"] == sys.executable
    assert record["python_version"] == ".".join(map(str, sys.version_info[:3]))
    assert record["requirements"] == [f"numpy=={PINNED}"]
    assert record["pins_digest"].startswith("sha256:")
    assert record["packages"]["numpy"] == PINNED
    assert {"mosaic-marl", "mosaic-numpy1-worker"} <= set(record["packages"])
    assert f"numpy=={PINNED}" in record["freeze"]
    assert record["built_at"] > 0 and record["build_seconds"] > 0
    assert (built.env / worker_envs.LOCK_NAME).is_file()
    assert not [p for p in (built.home / "envs").iterdir() if p.name.startswith((".build-", ".old-"))]
    # bytecode is compiled at build time, where the environment lives (uv writes none, pip does)
    compiled = list(built.env.glob("lib/python*/site-packages/numpy/__pycache__/__init__.*.pyc"))
    assert compiled, "no bytecode compiled for the environment's numpy"
    import marshal

    code = marshal.loads(compiled[0].read_bytes()[16:])
    assert Path(code.co_filename).parent.parent == next(built.env.glob("lib/python*/site-packages")), code.co_filename

    rows = built.listed()
    assert rows[WORKER]["status"] == "ok", rows[WORKER]
    assert rows[WORKER]["interpreter"] == record["interpreter"]
    assert rows[WORKER]["built_at"] == record["built_at"]
    for name in ("random", "ray"):  # installed workers without a declaration share MOSAIC's interpreter
        assert rows[name]["status"] == "shared" and rows[name]["interpreter"] == sys.executable


def test_second_build_is_a_no_op(built):
    before = (built.env / worker_envs.RECORD_NAME).read_bytes()
    inode = built.env.stat().st_ino
    proc = build_ok(built)
    assert f"{WORKER}: up to date" in proc.stdout
    assert (built.env / worker_envs.RECORD_NAME).read_bytes() == before
    assert built.env.stat().st_ino == inode


def test_worker_runs_in_its_environment_through_the_launcher(built, monkeypatch):
    monkeypatch.setenv("MOSAIC_WORKER_PATH", str(built.workers))
    python = worker_envs.interpreter_for(WORKER, built.home)
    assert python == built.record()["interpreter"]
    assert worker_envs.interpreter_for("random", built.home) is None  # runs in MOSAIC's interpreter

    monkeypatch.syspath_prepend(str(built.tree))  # its metadata needs only MOSAIC
    from numpy1_worker import get_worker_metadata

    worker = DiscoveredWorker(WORKER, "numpy1_worker:get_worker_metadata", *get_worker_metadata())
    run = RunStore(built.home).create("numpy1-run", {"worker": WORKER, "run_id": "numpy1-run", "seed": 3,
                                                      "total_timesteps": 300, "steps_per_iteration": 100},
                                      {"worker": WORKER, "status": "created"})
    outcome = WorkerProcess(worker, run, python=python).follow()
    assert outcome.status == "completed", outcome.terminal

    events = list(run.iter_events())
    started = [e for e in events if e["type"] == "run_started"]
    metrics = [e for e in events if e["type"] == "metrics"]
    assert started[0]["versions"]["numpy"] == PINNED and started[0]["numpy_version"] == PINNED
    assert [m["timesteps_total"] for m in metrics] == [100, 200, 300]
    assert {m["numpy_version"] for m in metrics} == {PINNED}
    assert outcome.terminal["summary"]["numpy_version"] == PINNED


BAD_PINS = {
    "unsatisfiable": ('["numpy==1.26.4", "numpy>=2"]', "cannot be resolved"),
    "not a requirement": ('["numpy=<<1.26.4"]', "cannot be resolved"),
    "CUDA torch": ('["numpy==1.26.4", "torch"]', "not a +cpu build"),
    "pip option": ('["--index-url=https://example.invalid/simple"]', "is not a requirement"),
    "not a list": ('"numpy==1.26.4"', "must be a list"),
}


def test_changed_pins_make_it_stale_and_bad_pins_leave_it_untouched(lab):
    record = lab.record()
    lab.set_pins('["numpy>=1.26,<2"]')
    row = lab.listed()[WORKER]
    assert row["status"] == "stale" and "pins changed" in row["reason"]
    with pytest.raises(UserError, match=f"stale.*`mosaic envs build {WORKER}`"):
        worker_envs.interpreter_for(WORKER, lab.home)

    for name, (pins, message) in BAD_PINS.items():
        lab.set_pins(pins)
        proc = lab.cli("build", WORKER)
        line = assert_one_line_error(proc, 2, "tool.mosaic.environment.requirements", message)
        assert str(lab.tree / "pyproject.toml") in line, name
        assert lab.record() == record, name  # the previous environment is untouched …
        assert lab.env_numpy() == PINNED, name  # … and still works
        assert not [p.name for p in (lab.home / "envs").iterdir() if p.name.startswith((".build-", ".old-"))]

    lab.set_pins('["numpy>=1.26,<2"]')  # valid again, but changed: a real rebuild
    proc = build_ok(lab)
    assert "rebuilding (stale" in proc.stderr and f"{WORKER}: built at" in proc.stdout
    assert lab.record()["built_at"] > record["built_at"]
    assert lab.record()["requirements"] == ["numpy>=1.26,<2"]
    assert lab.listed()[WORKER]["status"] == "ok"
    assert worker_envs.interpreter_for(WORKER, lab.home) == str(worker_envs.python_in(lab.env))


def test_broken_environments_are_reported_rebuilt_and_removed(lab):
    site = next((lab.env / "lib").glob("python3*/site-packages"))
    for hook in site.glob("*numpy1_worker*.pth"):  # the worker's editable install
        hook.unlink()
    row = lab.listed()[WORKER]
    assert row["status"] == "broken" and "numpy1_worker:get_worker_metadata is not importable there" in row["reason"]
    with pytest.raises(UserError, match=f"broken.*`mosaic envs build {WORKER}`"):
        worker_envs.interpreter_for(WORKER, lab.home)
    proc = build_ok(lab)  # broken is not up to date: no --force needed
    assert "rebuilding (broken" in proc.stderr
    assert lab.listed()[WORKER]["status"] == "ok"

    python = worker_envs.python_in(lab.env)
    python.unlink()
    python.symlink_to(lab.home / "no-such-python")
    row = lab.listed()[WORKER]
    assert row["status"] == "broken" and "interpreter gone" in row["reason"]
    build_ok(lab, "--force")
    assert lab.env_numpy() == PINNED

    proc = lab.cli("remove", WORKER)
    assert proc.returncode == 0 and f"removed {lab.env}" in proc.stdout
    assert not lab.env.exists()
    assert lab.listed()[WORKER]["status"] == "missing"
    with pytest.raises(UserError, match=f"missing.*`mosaic envs build {WORKER}`"):
        worker_envs.interpreter_for(WORKER, lab.home)
    assert lab.cli("remove", WORKER).returncode == 0  # nothing left to remove is no error


def test_unknown_and_undeclared_workers_are_clear_errors(tmp_path):
    lab = make_lab(tmp_path)
    for args in (("build", "nosuch"), ("remove", "nosuch")):
        assert_one_line_error(lab.cli(*args), 2, "worker: 'nosuch' is not one of", "numpy1", "random", "ray")
    assert_one_line_error(lab.cli("build", "random"), 2, "'random' declares no environment")
    assert_one_line_error(lab.cli("build"), 2, "name one WORKER, or pass --all")
    assert not (lab.home / "envs").exists()  # nothing half-written


def test_resolution_picks_cpu_torch_and_rejects_a_cuda_one(tmp_path, monkeypatch):
    lab = make_lab(tmp_path)
    monkeypatch.setenv("MOSAIC_WORKER_PATH", str(lab.workers))
    tree, sources = worker_envs.mosaic_source_tree(), worker_envs.pip_sources()

    lab.set_pins('["torch==2.13.0"]')
    source = worker_envs.scan().get(WORKER)
    versions = worker_envs.resolve(source, tree, sources, Path(sys.executable), tmp_path / "cpu.lock")
    assert versions["torch"] == "2.13.0+cpu"
    assert not [name for name in versions if name.startswith("nvidia-")]

    lab.set_pins('["torch"]')
    source = worker_envs.scan().get(WORKER)
    with pytest.raises(ConfigError, match=r"torch resolved to .*, not a \+cpu build"):
        worker_envs.resolve(source, tree, sources, Path(sys.executable), tmp_path / "cuda.lock")


PIP_SETTINGS = {  # pip's environment variable -> (its value, the uv options it must become)
    "PIP_INDEX_URL": ("file:///srv/main/simple", [["--default-index", "file:///srv/main/simple"]]),
    "PIP_EXTRA_INDEX_URL": ("file:///srv/a/simple file:///srv/b/simple",
                            [["--index", "file:///srv/a/simple"], ["--index", "file:///srv/b/simple"]]),
    "PIP_FIND_LINKS": ("/srv/wheels", [["--find-links", "/srv/wheels"]]),
    "PIP_CONSTRAINT": ("/srv/constraints.txt", [["--constraint", "/srv/constraints.txt"]]),
    "PIP_TRUSTED_HOST": ("mirror.test", [["--allow-insecure-host", "mirror.test"]]),
    "PIP_NO_INDEX": ("1", [["--no-index"]]),
}


def _contains(args: list[str], run: list[str]) -> bool:
    return any(args[i:i + len(run)] == run for i in range(len(args)))


@pytest.mark.parametrize("variable", sorted(PIP_SETTINGS))
def test_uv_gets_the_sources_pip_is_configured_with(variable, monkeypatch):
    value, expected = PIP_SETTINGS[variable]
    monkeypatch.setenv(variable, value)
    args = worker_envs.pip_sources().uv_args()  # asks the real pip
    for run in [["--index-strategy", "unsafe-best-match"], *expected]:
        assert _contains(args, run), (run, args)


def test_pip_config_files_are_read_and_environment_variables_win(tmp_path, monkeypatch):
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nextra-index-url = file:///srv/x/simple\n    file:///srv/y/simple\n"
                    "cert = /srv/ca.pem\nfind-links = /srv/global-wheels\n"
                    "[install]\nfind-links = /srv/install-wheels\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    for name in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_CERT"):
        monkeypatch.delenv(name, raising=False)
    sources = worker_envs.pip_sources()
    assert sources.extra_index_urls == ("file:///srv/x/simple", "file:///srv/y/simple")
    assert sources.find_links == ("/srv/install-wheels",)  # [install] beats [global]
    assert sources.uv_env()["SSL_CERT_FILE"] == "/srv/ca.pem"
    monkeypatch.setenv("PIP_FIND_LINKS", "/srv/env-wheels")
    assert worker_envs.pip_sources().find_links == ("/srv/env-wheels",)


# -- discovery, `mosaic run` and the catalog with a worker MOSAIC cannot import ----------
def test_discovery_describes_it_with_its_own_interpreter(built, monkeypatch, tmp_path):
    from mosaic.host import describe_cache
    from mosaic.workerkit import describe
    from mosaic.host.discovery import discover_workers

    monkeypatch.setenv("MOSAIC_WORKER_PATH", str(built.workers))
    monkeypatch.setenv("MOSAIC_HOME", str(built.home))
    monkeypatch.setenv(describe_cache.CACHE_VAR, str(tmp_path / "cache"))
    assert subprocess.run([sys.executable, "-c", "import numpy1_worker"],  # MOSAIC's interpreter cannot …
                          capture_output=True).returncode != 0
    found = discover_workers()
    worker = found.get(WORKER)  # … yet discovery knows it, from its own environment
    assert worker.python == built.record()["interpreter"]
    assert worker.metadata.upstream_library == "numpy" and worker.metadata.upstream_version == PINNED
    assert worker.capabilities.algorithms == ("random_walk",)
    assert describe.problems(dict(worker.description)) == []
    assert worker.description["versions"]["numpy"] == PINNED
    assert worker.description["python"] == worker.python
    assert worker.description["envs"] == {"walk": ["gaussian_walk_v0"]}
    assert {"random", "ray"} <= set(found.names())  # the others are still there, in MOSAIC's interpreter
    assert found.get("random").python is None
    cached = list((tmp_path / "cache" / "describe").glob("*.json"))
    assert len(cached) == 1  # described once; the next discovery reads the cache
    assert discover_workers().get(WORKER).description == worker.description

    proc = run_cli("workers", "--json", home=built.home,
                   env={"MOSAIC_WORKER_PATH": str(built.workers), describe_cache.CACHE_VAR: str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr
    row = next(w for w in json.loads(proc.stdout)["workers"] if w["name"] == WORKER)
    assert row["own_environment"] and row["python"] == worker.python
    assert row["metadata"]["upstream_version"] == PINNED


def test_mosaic_run_runs_it_in_its_own_environment(built, tmp_path):
    config = tmp_path / "numpy1.json"
    config.write_text(json.dumps({"worker": WORKER, "seed": 5, "total_timesteps": 200, "steps_per_iteration": 100}))
    env = {"MOSAIC_WORKER_PATH": str(built.workers)}
    dry = run_cli("run", str(config), "--dry-run", home=built.home, env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["config"]["total_timesteps"] == 200
    proc = run_cli("run", str(config), "--run-id", "np1", home=built.home, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    run = RunDir(RunStore(built.home).path_for("np1"))
    events = list(run.iter_events())
    assert {e["numpy_version"] for e in events if e["type"] == "metrics"} == {PINNED}
    assert run.read_manifest()["python"] == built.record()["interpreter"]
    assert run.read_manifest()["status"] == "completed"


def test_a_missing_environment_is_a_broken_worker_naming_the_build_command(tmp_path):
    from mosaic.host.discovery import discover_workers

    lab = make_lab(tmp_path)  # not built
    env = {"MOSAIC_WORKER_PATH": str(lab.workers)}
    proc = run_cli("workers", home=lab.home, env=env)
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(f"broken: {WORKER} "))
    assert "missing" in line and f"`mosaic envs build {WORKER}`" in line
    assert any(ln.startswith("random ") for ln in proc.stdout.splitlines())  # the others still work
    config = tmp_path / "numpy1.json"
    config.write_text(json.dumps({"worker": WORKER}))
    proc = run_cli("run", str(config), home=lab.home, env=env)
    assert_one_line_error(proc, 2, f"{WORKER!r} is installed but broken", f"`mosaic envs build {WORKER}`")
    assert not (lab.home / "runs").exists() or not list((lab.home / "runs").iterdir())


def test_an_environment_without_the_workers_library_is_a_broken_worker(lab, monkeypatch, tmp_path):
    from mosaic.host import describe_cache
    from mosaic.host.discovery import discover_workers

    monkeypatch.setenv(describe_cache.CACHE_VAR, str(tmp_path / "cache"))
    monkeypatch.setenv("MOSAIC_HOME", str(lab.home))
    python = worker_envs.python_in(lab.env)
    proc = subprocess.run([worker_envs.uv_binary(), "pip", "uninstall", "--python", str(python), "numpy"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    found = discover_workers()
    reason = next(b.reason for b in found.broken if b.name == WORKER)
    assert "numpy is not installed" in reason and str(python) in reason
    assert f"mosaic envs build {WORKER} --force" in reason
    assert "random" in found.names()
    with pytest.raises(UserError, match="installed but broken"):
        found.get(WORKER)


NO_DEPS_TREE = """\
[project]
name = "mosaic-nodeps-worker"
dependencies = ["mosaic-marl"]

[project.entry-points."mosaic.workers"]
nodeps = "nodeps_worker:get_worker_metadata"

[tool.mosaic.environment]
requirements = ["numpy==1.26.4"]
{extra}
"""


@pytest.mark.parametrize("extra, field, message", [
    ('no_deps = ["cleanrl>=1.2"]', "tool.mosaic.environment.no_deps[0]", "must pin one version exactly"),
    ('no_deps = "cleanrl==1.2.0"', "tool.mosaic.environment.no_deps", "must be a list"),
    ('no_deps = ["-e ."]', "tool.mosaic.environment.no_deps[0]", "is not a requirement"),
    ('extras = ["x"]', "tool.mosaic.environment.extras", "requirements, no_deps, overlays"),
])
def test_no_deps_pins_are_exact_and_checked(tmp_path, extra, field, message):
    (tmp_path / "pyproject.toml").write_text(NO_DEPS_TREE.format(extra=extra))
    sources, invalid = worker_envs.read_tree(tmp_path)
    assert sources == [] and field in invalid["nodeps"] and message in invalid["nodeps"], invalid


def test_no_deps_pins_are_part_of_what_the_environment_is_built_from(tmp_path):
    (tmp_path / "pyproject.toml").write_text(NO_DEPS_TREE.format(extra='no_deps = ["cleanrl==1.2.0"]'))
    (with_pins,), _ = worker_envs.read_tree(tmp_path)
    (tmp_path / "pyproject.toml").write_text(NO_DEPS_TREE.format(extra=""))
    (without,), _ = worker_envs.read_tree(tmp_path)
    assert with_pins.no_deps == ("cleanrl==1.2.0",) and without.no_deps == ()
    assert with_pins.distribution == "mosaic-nodeps-worker"
    assert with_pins.pins_digest != without.pins_digest  # adding one makes a built environment stale


@pytest.mark.parametrize("extra, field, message", [
    ('overlays = ["stable-baselines3==1.2.0"]', "tool.mosaic.environment.overlays", "must be a table"),
    ('overlays = {sb3 = "stable-baselines3==1.2.0"}', "tool.mosaic.environment.overlays.sb3", "must be a list"),
    ('overlays = {sb3 = ["stable-baselines3>=1"]}', "tool.mosaic.environment.overlays.sb3[0]",
     "must pin one version exactly"),
    ('overlays = {sb3 = ["--target=/tmp"]}', "tool.mosaic.environment.overlays.sb3[0]", "is not a requirement"),
    ('overlays = {sb3 = []}', "tool.mosaic.environment.overlays.sb3", "is empty"),
    ('overlays = {"../up" = ["stable-baselines3==1.2.0"]}', "tool.mosaic.environment.overlays.../up",
     "cannot name an overlay folder"),
])
def test_overlays_are_a_table_of_exact_pins_and_checked(tmp_path, extra, field, message):
    (tmp_path / "pyproject.toml").write_text(NO_DEPS_TREE.format(extra=extra))
    sources, invalid = worker_envs.read_tree(tmp_path)
    assert sources == [] and f"{field}:" in invalid["nodeps"] and message in invalid["nodeps"], invalid


def test_overlays_are_part_of_what_the_environment_is_built_from(tmp_path):
    digests = []
    for extra in ("", 'overlays = {sb3 = ["stable-baselines3==1.2.0"]}',
                  'overlays = {sb3 = ["stable-baselines3==1.2.1"]}', 'overlays = {other = ["stable-baselines3==1.2.1"]}'):
        (tmp_path / "pyproject.toml").write_text(NO_DEPS_TREE.format(extra=extra))
        (source,), invalid = worker_envs.read_tree(tmp_path)
        assert not invalid
        digests.append(source.pins_digest)
    assert source.overlays == (("other", ("stable-baselines3==1.2.1",)),)
    assert len(set(digests)) == 4  # adding, changing or renaming an overlay makes a built environment stale
