"""Small concepts with one home each, read from the source with ``ast``.

* A folder written all at once (staged under a hidden name, then renamed into place):
  :func:`mosaic.runs.staged_folder`. Every function of the core that renames anything is listed
  below with what it renames, so a new one is a decision, not an accident.
* A dotted config path (``a.b.c``) read or written: :func:`mosaic.configkit.get_path` and
  :func:`mosaic.configkit.set_path`, in the core and in the workers.
* The name of an experiment or a tournament: :data:`mosaic.runs.NAME_PATTERN`.
"""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

import pytest

from mosaic.runs import NAME_PATTERN, staged_folder

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
#: Each worker's own package (workers/NAME/NAME), its tests left out.
WORKER_PACKAGES = sorted(w / w.name for w in (ROOT / "workers").iterdir() if (w / w.name / "__init__.py").is_file())


def _functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Each function of ``tree`` -> its qualified name (``Class.method``, ``outer.inner``)."""
    out: dict[ast.AST, str] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if not isinstance(child, ast.ClassDef):
                    out[child] = prefix + child.name
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return out


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    """The nodes of ``function``'s body, those of functions defined inside it left out (they count as theirs)."""
    found, todo = [], list(ast.iter_child_nodes(function))
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        found.append(node)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _scan(trees: dict[str, ast.AST], finds) -> set[str]:
    """``module.function`` for each function of ``trees`` (module -> parsed source) in which ``finds(nodes)``."""
    return {f"{module}.{name}" for module, tree in trees.items() for function, name in _functions(tree).items()
            if finds(_own_nodes(function))}


def _parsed(base: Path, folder: Path) -> dict[str, ast.AST]:
    out = {}
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = ast.parse(path.read_text(encoding="utf-8"))
    return out


@functools.lru_cache(maxsize=1)
def _core() -> dict[str, ast.AST]:
    """The core's modules, parsed once a session (generated protobuf code left out)."""
    return {m: t for m, t in _parsed(SRC, SRC / "mosaic").items() if "proto" not in m.split(".")}


@functools.lru_cache(maxsize=1)
def _workers() -> dict[str, ast.AST]:
    return {m: t for package in WORKER_PACKAGES for m, t in _parsed(package.parent, package).items()}


# -- a folder written all at once ---------------------------------------------------------------------------
def _renames(nodes: list[ast.AST]) -> bool:
    """A rename: ``os.rename/replace/renames``, ``shutil.move`` or a path's ``.rename(to)``/``.replace(to)``
    (one argument: ``str.replace`` takes two)."""
    for node in nodes:
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner, attr = node.func.value, node.func.attr
        if isinstance(owner, ast.Name) and (owner.id, attr) in {("os", "rename"), ("os", "replace"),
                                                                 ("os", "renames"), ("shutil", "move")}:
            return True
        if attr in ("rename", "replace") and len(node.args) == 1 and not node.keywords:
            return True
    return False


#: The one function that writes a folder under a hidden name and renames it into place (run folders, experiment
#: and arena reports).
FOLDER_STAGER = "mosaic.runs.staged_folder"
#: Functions that rename a file into place (``write_json_atomic`` and its kin) or move one: not folders.
FILE_RENAMERS = {
    "mosaic.runs.write_json_atomic": "a JSON file",
    "mosaic.diskcache.memo": "a cache entry's file",
    "mosaic.fastlane.png.write_png": "a PNG file",
    "mosaic.fastlane.shm.create_segment": "a shared-memory segment's file",
    "mosaic.host.launcher.start_checked": "the worker's log file into its run folder",
    "mosaic.host.cell_launcher.CellLauncher._start": "the worker's log file into its run folder",
}
#: Folders still staged and renamed by their own code. Exceptions to be removed, never widened.
KNOWN_FOLDER_RENAMERS = {
    # an experiment's folder: staged as .NAME.PID.NS with mkdir (mode from the umask, where staged_folder's
    # mkdtemp gives 0o700), renamed into place
    "mosaic.experiments.store.ExperimentStore.create": "an experiment's folder",
    # a worker's environment (a venv): built in .build-WORKER-XXXXXX, swapped in with the old one aside as
    # .old-WORKER-XXXXXX (names its _sweep removes after a killed build)
    "mosaic.host.environments.build._swap_in": "a worker environment, swapped in",
    "mosaic.host.environments.build.remove": "a worker environment, renamed aside to be deleted",
}


def test_the_rename_finder_finds_each_kind_of_rename():
    source = ("import os, shutil\n"
              "def a(s, f):\n    os.rename(s, f)\n"
              "def b(s, f):\n    os.replace(s, f)\n"
              "def c(s, f):\n    s.rename(f)\n"
              "def d(s, f):\n    s.replace(f)\n"
              "def e(s, f):\n    shutil.move(s, f)\n"
              "def f(s):\n    return s.replace('a', 'b')\n"  # str.replace: no rename
              "def g(s, f):\n    def inner():\n        s.rename(f)\n")
    assert _scan({"m": ast.parse(source)}, _renames) == {"m.a", "m.b", "m.c", "m.d", "m.e", "m.g.inner"}


def test_one_function_stages_a_folder_and_renames_it_into_place():
    found = _scan(_core(), _renames)
    assert FOLDER_STAGER in found
    unlisted = found - {FOLDER_STAGER} - set(FILE_RENAMERS) - set(KNOWN_FOLDER_RENAMERS)
    assert unlisted == set(), ("a folder written all at once goes through mosaic.runs.staged_folder; a file through "
                               "mosaic.runs.write_json_atomic or a helper of its kind (then list it in FILE_RENAMERS)")
    gone = (set(FILE_RENAMERS) | set(KNOWN_FOLDER_RENAMERS)) - found
    assert gone == set(), "no longer renames anything: remove it from the lists"


@pytest.mark.parametrize("module, function", [
    ("mosaic.runs", "RunStore.create"),
    ("mosaic.experiments.report.write", "write_report"),
    ("mosaic.arena.report", "write_report"),
    ("mosaic.arena.report", "write_reports"),
])
def test_run_folders_and_reports_are_written_through_the_one_helper(module, function):
    node = next(f for f, name in _functions(_core()[module]).items() if name == function)
    called = {n.func.id for n in _own_nodes(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "staged_folder" in called


def test_a_staged_folder_appears_whole_or_not_at_all(tmp_path):
    final = tmp_path / "deep" / "run"
    with staged_folder(final) as staging:
        assert staging.parent == final.parent and staging.name.startswith(".run.") and not final.exists()
        (staging / "a.txt").write_text("a")
    assert (final / "a.txt").read_text() == "a" and os.listdir(final.parent) == ["run"]
    assert (final.stat().st_mode & 0o777) == 0o700  # mkdtemp's mode: a run folder is its owner's
    with pytest.raises(RuntimeError), staged_folder(tmp_path / "other") as staging:
        (staging / "b.txt").write_text("b")
        raise RuntimeError("half-way")
    assert sorted(os.listdir(tmp_path)) == ["deep"]  # no folder, no staging left
    with pytest.raises(OSError):  # without replace, a folder with files in the way is an error
        with staged_folder(final) as staging:
            (staging / "c.txt").write_text("c")
    assert os.listdir(final) == ["a.txt"] and os.listdir(final.parent) == ["run"]


def test_a_replaced_folder_is_kept_whole_until_the_new_one_is_in_place(tmp_path, monkeypatch):
    out = tmp_path / "report"
    out.mkdir()
    (out / "old.md").write_text("old")
    with pytest.raises(ValueError), staged_folder(out, replace=True, suffix=".tmp") as staging:
        (staging / "new.md").write_text("new")
        raise ValueError("a plot failed")
    assert os.listdir(out) == ["old.md"] and os.listdir(tmp_path) == ["report"]
    real_rename = os.rename

    def rename(src, dst):  # the new folder's rename fails once the old one is aside
        if str(src).endswith(".tmp"):
            raise OSError("no space")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError), staged_folder(out, replace=True, suffix=".tmp") as staging:
        (staging / "new.md").write_text("new")
    assert os.listdir(out) == ["old.md"] and os.listdir(tmp_path) == ["report"]  # put back
    monkeypatch.setattr(os, "rename", real_rename)
    (tmp_path / ".report.killed.tmp").mkdir()  # left by a writer killed mid-write
    with staged_folder(out, replace=True, suffix=".tmp", mode=0o755, sweep=True) as staging:
        (staging / "new.md").write_text("new")
    assert os.listdir(out) == ["new.md"] and os.listdir(tmp_path) == ["report"]
    assert (out.stat().st_mode & 0o777) == 0o755


# -- dotted config paths ------------------------------------------------------------------------------------
def _walks_a_dotted_path(nodes: list[ast.AST]) -> bool:
    """A loop over the parts of a dotted path (``x.split(".")``, or a slice of a name holding one) that steps
    with each part: ``node[part]``, ``node.get(part)``, ``node.setdefault(part, ...)``, ``getattr(node, part)``."""
    def split_dot(expr: ast.AST) -> bool:
        return (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "split"
                and len(expr.args) == 1 and isinstance(expr.args[0], ast.Constant) and expr.args[0].value == ".")

    holders = {t.id for n in nodes if isinstance(n, ast.Assign) and split_dot(n.value)
               for t in n.targets if isinstance(t, ast.Name)}
    for loop in nodes:
        if not isinstance(loop, ast.For) or not isinstance(loop.target, ast.Name):
            continue
        it = loop.iter.value if isinstance(loop.iter, ast.Subscript) else loop.iter
        if not (split_dot(it) or (isinstance(it, ast.Name) and it.id in holders)):
            continue
        part = loop.target.id
        for node in ast.walk(loop):
            uses = (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and node.slice.id == part) \
                or (isinstance(node, ast.Call) and any(isinstance(a, ast.Name) and a.id == part for a in node.args)
                    and ((isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "setdefault"))
                         or (isinstance(node.func, ast.Name) and node.func.id == "getattr")))
            if uses:
                return True
    return False


DOTTED_PATH_HELPERS = {"mosaic.configkit.get_path", "mosaic.configkit.set_path"}
#: Walks of a JSON Schema's ``properties`` by a field's dotted path: a schema, not a config's values.
SCHEMA_WALKS = {"mosaic.clients.gui.schema_paths._default_at", "mosaic.clients.gui.schema_paths._has"}


def test_the_dotted_path_finder_finds_the_shapes_it_replaced():
    source = ('def put(out, path, value):\n    parts = path.split(".")\n    for part in parts[:-1]:\n'
              '        out = out.setdefault(part, {})\n    out[parts[-1]] = value\n'
              'def get(values, path):\n    for part in path.split("."):\n'
              '        if part not in values:\n            return None\n        values = values[part]\n'
              '    return values\n'
              'def attr(obj, path):\n    for part in path.split("."):\n'
              '        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part)\n    return obj\n'
              'def fine(path):\n    return any(not p for p in path.split("."))\n')
    assert _scan({"m": ast.parse(source)}, _walks_a_dotted_path) == {"m.put", "m.get", "m.attr"}


def test_dotted_paths_are_read_and_written_in_one_place():
    found = _scan({**_core(), **_workers()}, _walks_a_dotted_path)
    assert found - DOTTED_PATH_HELPERS - SCHEMA_WALKS == set(), \
        "read a dotted path with mosaic.configkit.get_path, write one with mosaic.configkit.set_path"
    assert DOTTED_PATH_HELPERS | SCHEMA_WALKS <= found


# -- names of experiments and tournaments --------------------------------------------------------------------
def test_the_name_pattern_has_one_home():
    assignments, literals = [], []
    for module, tree in {**_core(), **_workers()}.items():
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
                if isinstance(node, ast.AnnAssign) else []
            assignments += [module for t in targets if isinstance(t, ast.Name) and t.id == "NAME_PATTERN"]
            if isinstance(node, ast.Constant) and node.value == NAME_PATTERN.pattern:
                literals.append(module)
    assert assignments == ["mosaic.runs"] and literals == ["mosaic.runs"]
    from mosaic.arena import tournament
    from mosaic.experiments import spec

    assert spec.NAME_PATTERN is tournament.NAME_PATTERN is NAME_PATTERN


# -- the default MOSAIC_HOME: one home, whatever the current directory ------------------------------------------
def _package_copy(parent: Path) -> Path:
    """A copy of the mosaic package under ``parent`` (so its location decides its default home)."""
    import shutil

    shutil.copytree(SRC / "mosaic", parent / "mosaic", ignore=shutil.ignore_patterns("__pycache__"))
    return parent


def _runs_from(cwd: Path, path: Path, **env: str):
    import subprocess
    import sys

    full = {k: v for k, v in os.environ.items() if k != "MOSAIC_HOME"}
    full.update(PYTHONPATH=str(path), **env)
    return subprocess.run([sys.executable, "-m", "mosaic", "runs"], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=full)


def test_a_checkouts_default_home_is_its_own_var_from_any_directory(tmp_path):
    """Without MOSAIC_HOME, a checkout (the package under src/ beside pyproject.toml) keeps everything in its own
    var/, wherever the command is started; `mosaic runs` names the home it looked in."""
    checkout = tmp_path / "clone"
    (checkout / "src").mkdir(parents=True)
    (checkout / "pyproject.toml").write_text("[project]\nname = 'mosaic-marl'\n")
    _package_copy(checkout / "src")
    elsewhere = tmp_path / "somewhere" / "else"
    elsewhere.mkdir(parents=True)
    for cwd in (checkout, elsewhere, tmp_path):
        proc = _runs_from(cwd, checkout / "src")
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[0] == f"no runs yet in MOSAIC_HOME={checkout / 'var'}", (cwd, proc.stdout)


def test_an_installed_packages_default_home_is_the_users_data_folder(tmp_path):
    site = _package_copy(tmp_path / "site-packages")
    data = tmp_path / "data"
    for cwd in (tmp_path, site):
        proc = _runs_from(cwd, site, XDG_DATA_HOME=str(data))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.splitlines()[0] == f"no runs yet in MOSAIC_HOME={data / 'mosaic'}", proc.stdout


def test_mosaic_home_overrides_and_a_var_folder_here_is_pointed_to(tmp_path):
    """MOSAIC_HOME wins; a ./var holding runs that is not the home is named, with how to list its runs."""
    from cli_support import run_cli

    here = tmp_path / "project"
    (here / "var" / "trainer" / "runs" / "old-run").mkdir(parents=True)
    proc = run_cli("runs", home=tmp_path / "home", cwd=here)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"no runs yet in MOSAIC_HOME={tmp_path / 'home'}",
        f"({here / 'var'} holds runs of another home: `MOSAIC_HOME={here / 'var'} mosaic runs` lists them)"]


def test_the_cli_hands_its_home_to_what_it_starts(tmp_path):
    """A command run without MOSAIC_HOME gives the home it chose to every process it starts (the workers, a
    daemon), so that none of them picks another."""
    import subprocess
    import sys

    code = ("import os, sys\nfrom mosaic.clients.cli import main\nmain(['runs', '--limit', '1'])\n"
            "print(os.environ['MOSAIC_HOME'])")
    env = {k: v for k, v in os.environ.items() if k != "MOSAIC_HOME"}
    site = _package_copy(tmp_path / "site")
    env.update(PYTHONPATH=str(site), XDG_DATA_HOME=str(tmp_path / "data"))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(tmp_path / "data" / "mosaic")


def test_mosaic_workers_names_the_home_it_looked_in(tmp_path):
    from cli_support import run_cli

    proc = run_cli("workers", home=tmp_path / "fresh")
    assert proc.returncode == 0, proc.stderr
    assert f"(worker environments looked for in MOSAIC_HOME={tmp_path / 'fresh'}, under envs/)" in proc.stderr
    assert any(line.startswith("broken: ") for line in proc.stdout.splitlines())  # nothing built in a fresh home
