"""The host's structure, read from the source with ``ast``: states are enums, not strings.

A cell's, an attempt's and an arena shard's state is a :class:`mosaic.run_status.JobState`; a run's is a
:class:`~mosaic.run_status.RunState`. The modules that name those states say them through the enums, so
no spelling of one lives outside :mod:`mosaic.run_status`.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from mosaic.run_status import JobState

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

#: The modules that name cell, attempt or shard states: the experiments package (the coordinator, its backends,
#: the store, the study driver, the reports), the arena package, the cluster's cell launcher and the GUI's
#: experiment grid, runs table and study panel.
STATE_MODULES = sorted([
    *(SRC / "mosaic/experiments").rglob("*.py"),
    *(SRC / "mosaic/arena").rglob("*.py"),
    SRC / "mosaic/host/cell_launcher.py",
    SRC / "mosaic/clients/gui/experiments_view.py",
    SRC / "mosaic/clients/gui/runs_view.py",
    SRC / "mosaic/clients/gui/study_panel.py",
])
_OPTUNA_COUNTS = "counts of Optuna trials by their state (optuna.trial.TrialState), not of cells or runs"
#: (module, string) pairs that use a state's word for something else, each with its reason.
STATE_WORD_ALLOWED: dict[tuple[str, str], str] = {
    # ``environments.status(...).status``: a worker environment that is not built, not a run's state
    ("mosaic/host/cell_launcher.py", "missing"): "a worker environment's status (mosaic.host.environments)",
    # ``t.state.name == "RUNNING"``: an Optuna trial's state (optuna.trial.TrialState), not a cell's or run's
    ("mosaic/experiments/study/driver.py", "RUNNING"): "an Optuna trial's state name",
    # the study report's budget table and `mosaic experiment status`'s study block count a study's trials
    **{("mosaic/experiments/report/study.py", w): _OPTUNA_COUNTS
       for w in ("RUNNING", "running", "completed", "failed")},
    **{("mosaic/experiments/study/describe.py", w): _OPTUNA_COUNTS
       for w in ("RUNNING", "running", "completed", "failed")},
    **{("mosaic/clients/gui/study_panel.py", w): _OPTUNA_COUNTS
       for w in ("RUNNING", "running", "completed", "failed")},
    # the grid's count buckets (done, running, waiting, failed, cancelled): words shown, several states to one
    **{("mosaic/clients/gui/experiments_view.py", w): "the grid's count buckets, not states"
       for w in ("running", "failed", "cancelled")},
}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def bare_state_strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant in ``path`` that spells a :class:`JobState` (docstrings aside)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    values = {s.value for s in JobState} | {s.value.upper() for s in JobState}
    docs = _docstrings(tree)
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in values
            and id(node) not in docs]


def test_the_state_modules_are_found() -> None:
    assert all(p.is_file() for p in STATE_MODULES)
    assert len(STATE_MODULES) >= 20
    assert SRC / "mosaic/experiments/store.py" in STATE_MODULES


@pytest.mark.parametrize("path", STATE_MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_bare_state_string(path: Path) -> None:
    rel = str(path.relative_to(SRC))
    found = [(line, word) for line, word in bare_state_strings(path) if (rel, word) not in STATE_WORD_ALLOWED]
    assert not found, f"{rel}: state words as strings (use mosaic.run_status.JobState / RunState): {found}"


def test_the_check_sees_a_bare_state(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""docstring: running"""\nx = "running"\ny = f"{x} failed"\nz = "FAILED"\n')
    assert bare_state_strings(sample) == [(2, "running"), (4, "FAILED")]


def test_allowed_words_are_still_used() -> None:
    for (rel, word), _reason in STATE_WORD_ALLOWED.items():
        assert word in {w for _line, w in bare_state_strings(SRC / rel)}, f"{rel}: {word!r} no longer used"


def test_every_run_state_maps_to_a_job_state() -> None:
    from mosaic.run_status import RUN_TO_JOB, RunState

    assert set(RUN_TO_JOB) == set(RunState)
    assert JobState.from_run(RunState.STARTING) is JobState.QUEUED  # the local backend's: no step yet
    assert JobState.from_run("paused") is JobState.RUNNING  # holds its resources
    assert JobState.from_run("RUNNING") is JobState.RUNNING
    assert JobState.from_run("RUN_STATE_UNSPECIFIED") is JobState.QUEUED
    for state in RunState:
        if state.terminal:  # a run's end is its cell's, spelled the same in the manifest and the journal
            assert JobState.from_run(state).value == state.manifest


def test_a_job_state_is_spelled_as_journals_store_it() -> None:
    import json

    assert json.dumps({"state": JobState.FAILED}) == '{"state": "failed"}'
    assert f"{JobState.CANCELLED}" == str(JobState.CANCELLED) == "cancelled"
    assert JobState("missing") is JobState.MISSING and "completed" == JobState.COMPLETED


#: (module, file name) pairs that spell one of a run folder's file names, each with its reason: every other
#: module of MOSAIC (src/mosaic) and of the workers' packages names them through mosaic.runs (the constants or
#: RunDir's paths).
RUN_FILE_NAME_ALLOWED: dict[tuple[str, str], str] = {
    ("mosaic.llm.backends", "config.json"): "a Hugging Face model folder's config.json, not a run folder's",
}


def run_file_names(path: Path) -> list[tuple[int, str]]:
    """Every string in ``path`` (docstrings aside) that is a run folder's file name or a path ending in one
    (``"<run>/analytics.json"``); f-strings' pieces count."""
    from mosaic.runs import RUN_FILES, WORKER_LOG

    names = {*RUN_FILES, WORKER_LOG, WORKER_LOG.rpartition("/")[2]}
    tree = _tree(path)
    docs = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            name = next((n for n in names if node.value == n or node.value.endswith("/" + n)), None)
            if name is not None:
                found.append((node.lineno, name))
    return sorted(found)


def test_run_folder_files_are_named_once() -> None:
    modules = _modules()
    assert {"mosaic.clients.gui.run_view", "mosaic.testing.conformance", "cleanrl_worker.cli"} <= set(modules)
    found = [f"{name}:{line}: {word!r}" for name, path in sorted(modules.items()) if name != "mosaic.runs"
             for line, word in run_file_names(path) if (name, word) not in RUN_FILE_NAME_ALLOWED]
    assert not found, "a run folder's file named again (use mosaic.runs' constants or RunDir):\n" + "\n".join(found)


def test_allowed_run_file_names_are_still_spelled() -> None:
    modules = _modules()
    stale = [key for key in RUN_FILE_NAME_ALLOWED if key[1] not in {w for _l, w in run_file_names(modules[key[0]])}]
    assert not stale, f"no longer spell the name: take them off RUN_FILE_NAME_ALLOWED: {stale}"


def test_the_file_name_check_sees_a_spelled_name(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text('"""the manifest: analytics.json"""\nimport json\n'
                      'm = json.loads((run / "analytics.json").read_text())\np = f"{run}/telemetry.jsonl"\n'
                      'log = run / "logs" / "worker.log"\nhelp = "see config.json."\n')
    assert run_file_names(sample) == [(3, "analytics.json"), (4, "telemetry.jsonl"), (5, "worker.log")]


def test_the_manifest_fields_of_a_run_s_life(tmp_path: Path) -> None:
    """The fields each writer asks for, written through a real run folder."""
    from mosaic.run_status import RunState
    from mosaic.runs import MANIFEST_FILE, ManifestFields, RunStore

    run = RunStore(tmp_path).create("r1", {"run_id": "r1"}, ManifestFields.created("w", RunState.CREATED, {"a": 1}))
    assert run.manifest_path.name == MANIFEST_FILE
    assert run.read_manifest()["status"] == "created" and run.read_manifest()["run"] == {"a": 1}
    run.update_manifest(**ManifestFields.starting(42, ["python", "-m", "w"]))
    events = [{"type": "run_started", "ts": 1.0, "seed": 3, "versions": {"x": "1"}},
              {"type": "checkpoint_saved", "path": "checkpoints/c1", "iteration": 1, "timesteps_total": 10},
              {"type": "paused"},
              {"type": "checkpoint_saved", "path": "checkpoints/c2", "iteration": 2, "timesteps_total": 20},
              {"type": "resumed"},
              {"type": "run_failed", "ts": 2.0, "error_type": "E", "message": "boom"}]
    for event in events:
        run.update_manifest(**ManifestFields.for_event(event, run.read_manifest))
    run.update_manifest(**ManifestFields.exited(-9, "SIGKILL"))
    m = run.read_manifest()
    assert (m["status"], m["pid"], m["seed"], m["started_at"], m["ended_at"]) == ("failed", 42, 3, 1.0, 2.0)
    assert [c["path"] for c in m["checkpoints"]] == ["checkpoints/c1", "checkpoints/c2"]
    assert m["latest_checkpoint"] == "checkpoints/c2" and m["failure"] == {"error_type": "E", "message": "boom"}
    assert (m["exit_code"], m["exit_signal"]) == (-9, "SIGKILL")
    with pytest.raises(ValueError, match="status: 'done' is not a run state"):
        ManifestFields.created("w", "done", {})


# -- no import circle among MOSAIC's own modules ----------------------------------------------------------------

WORKER_PACKAGES = sorted(p / p.name.replace("-", "_") for p in (ROOT / "workers").iterdir()
                         if (p / "pyproject.toml").is_file() and (p / p.name.replace("-", "_")).is_dir())
#: Import circles known and being removed elsewhere, each named once here: (the modules of the circle, why).
#: (workerkit's cli.py <-> describe.py circle is gone: describe imports workerkit.program instead; arena's
#: standings <-> tournament circle too: both read the journal's games through mosaic.arena.games.)
KNOWN_CIRCLES: list[tuple[frozenset[str], str]] = []


@functools.lru_cache(maxsize=None)
def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"))


@functools.lru_cache(maxsize=1)
def _modules() -> dict[str, Path]:
    """Every module of MOSAIC (src/mosaic) and of its workers (workers/*/PACKAGE), by dotted name."""
    out = {}
    for base, top in [(SRC, SRC / "mosaic"), *((pkg.parent, pkg) for pkg in WORKER_PACKAGES)]:
        for path in top.rglob("*.py"):
            if "tests" in path.relative_to(base).parts:
                continue
            parts = list(path.relative_to(base).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module → the modules of ``modules`` it imports: every import statement, inside functions and under
    ``TYPE_CHECKING`` too (``from pkg import mod`` is an import of ``pkg.mod``)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")
                    anchor = anchor[:len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, *([base] if base else [])])
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                           for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:  # ``import a.b.c`` of a name inside a module
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add(target)
        graph[name] = edges
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.add(top)
                    if top == node:
                        break
                if len(component) > 1:
                    circles.append(frozenset(component))
    return circles


def test_no_import_circle() -> None:
    modules = _modules()
    assert "mosaic.host.launcher" in modules and "ray_worker.environment" in modules
    circles = import_circles(import_graph(modules))
    known = {circle for circle, _why in KNOWN_CIRCLES}
    unknown = [sorted(c) for c in circles if c not in known]
    assert not unknown, f"import circles (lazy and TYPE_CHECKING imports count): {unknown}"


def test_the_circle_check_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from pkg.b import g\n")
    (pkg / "b.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import a\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    modules = {"pkg": pkg / "__init__.py", **{f"pkg.{n}": pkg / f"{n}.py" for n in "abc"}}
    graph = import_graph(modules)
    assert graph["pkg.a"] == {"pkg.b"} and graph["pkg.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a"}
    assert import_circles(graph) == [frozenset({"pkg.a", "pkg.b"})]


def test_the_daemon_client_loads_neither_server_nor_servicer() -> None:
    import subprocess
    import sys

    code = ("import sys, mosaic.host.daemon.client, mosaic.host.daemon.aio_client; "
            "print(sorted(m for m in sys.modules if m.startswith('mosaic.host')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    for heavy in ("mosaic.host.daemon.server", "mosaic.host.daemon.service", "mosaic.host.daemon.supervisor"):
        assert f"'{heavy}'" not in loaded, loaded


# -- one host module ----------------------------------------------------------------------------------------------

#: ``from x import _name`` across modules that other engineers' packages still do, each with its place.
#: The host (mosaic.host, the experiment backends) has none.
KNOWN_PRIVATE_IMPORTS: dict[str, str] = {
    "mosaic.experiments.report.study": "the report's seams (tables, plots) share their helpers",
    "mosaic.scoring.expected_best": "scoring.stats' percentile helper",
    "mosaic.scoring.population.bootstrap": "the population methods' inner steps, resampled",
    "mosaic.clients.gui.schema_form": "the form's field helpers",
    "mosaic.clients.cli.arena": "the CLI's table printer (clients.cli.common)",
    "mosaic.clients.cli.workers": "the CLI's table printer (clients.cli.common)",
    "mosaic.clients.cli.fastlane": "the CLI's table printer (clients.cli.common)",
    "mosaic.clients.cli.experiment": "the CLI's table printer (clients.cli.common)",
    "mosaic.clients.cli.envs": "the CLI's table printer (clients.cli.common)",
    "mosaic.clients.cli.runs": "the CLI's shared helpers (clients.cli.common, clients.cli.daemon)",
    "mosaic.clients.cli.daemon": "the CLI's shared helpers (clients.cli.common)",
    "mosaic.host.environments.build": "the uv helper of mosaic.host.environments.uv",
    "mosaic.host.match": "workerkit.evaluation's episode statistics (workerkit is another engineer's)",
    "mosaic.host.environments": "worker environments: the package re-exports its modules' helpers",
    "mosaic.host.environments.uv": "worker environments: the layout's lock name",
    "mosaic.host.environments.sources": "worker environments: the layout's names",
    "ray_worker.player": "the Ray worker's observation encoding helpers",
}


def private_imports(modules: dict[str, Path]) -> dict[str, list[str]]:
    """module → the private names it imports from another of ``modules`` (``from x import _name``)."""
    roots = {m.split(".")[0] for m in modules}
    out: dict[str, list[str]] = {}
    for name in modules:
        for node in ast.walk(_tree(modules[name])):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in roots):
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    out.setdefault(name, []).extend(f"{node.module}.{n}" for n in private)
    return out


def test_no_private_name_imported_from_another_module() -> None:
    found = private_imports(_modules())
    unknown = {m: names for m, names in found.items() if m not in KNOWN_PRIVATE_IMPORTS}
    assert not unknown, f"private names imported across modules (make them public where they belong): {unknown}"
    assert not [m for m in found if m.startswith("mosaic.host.") and m not in KNOWN_PRIVATE_IMPORTS]


def test_known_private_imports_are_still_there() -> None:
    found = private_imports(_modules())
    stale = [m for m in KNOWN_PRIVATE_IMPORTS if m not in found]
    assert not stale, f"no longer import private names: take them off KNOWN_PRIVATE_IMPORTS: {stale}"


#: The one module that starts worker commands.
HOST_MODULE = "mosaic.host.hosting"
#: Other processes MOSAIC starts, none of them a worker command hosted for a run, each with its reason.
OTHER_SPAWNS: dict[str, str] = {
    "mosaic.experiments.backends.local": "starts the trainer daemon (`mosaic daemon`), detached",
    "mosaic.host.daemon.aio_client": "starts the trainer daemon (`mosaic daemon`) for the GUI",
    "mosaic.testing.daemon": "the test kit starts a daemon for a test's home",
    "mosaic.testing.waiting": "the test kit starts `mosaic run` as a user would",
    "mosaic.workerkit.script_runtime": "inside a worker: the library's own training script",
    "mosaic.workerkit.player": "a policy player for a match (its own stdin/stdout protocol), not a run",
}
SPAWN_CALLS = ("Popen", "create_subprocess_exec", "create_subprocess_shell")


def spawns(modules: dict[str, Path]) -> dict[str, list[int]]:
    """module → the lines that call ``subprocess.Popen`` / ``asyncio.create_subprocess_*``."""
    out: dict[str, list[int]] = {}
    for name, path in modules.items():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in SPAWN_CALLS:
                    out.setdefault(name, []).append(node.lineno)
    return out


def test_only_the_host_module_spawns_worker_commands() -> None:
    found = spawns(_modules())
    assert HOST_MODULE in found
    others = {m: lines for m, lines in found.items() if m != HOST_MODULE and m not in OTHER_SPAWNS}
    assert not others, f"processes started outside {HOST_MODULE} (start worker commands there): {others}"
    stale = [m for m in OTHER_SPAWNS if m not in found]
    assert not stale, f"no longer start a process: take them off OTHER_SPAWNS: {stale}"


def test_the_host_layers_start_workers_through_the_host_module() -> None:
    modules = _modules()
    graph = import_graph(modules)
    for layer in ("mosaic.host.launcher", "mosaic.host.daemon.process", "mosaic.host.cell_launcher"):
        assert HOST_MODULE in graph[layer], layer
