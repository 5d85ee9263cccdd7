"""The tree shows the architecture, and the imports keep to it.

``mosaic.workerkit`` is what a worker imports; ``mosaic.host`` hosts runs (discovery, worker
environments, launcher, daemon); ``mosaic.experiments`` runs grids of runs on a host and reports them;
``mosaic.clients`` are the CLI and the GUI; ``mosaic.testing`` is the kit for tests. Shared pieces
below them (``fastlane``, ``llm``, ``configkit``, ``runs``, ``scoring``, ``errors``, ...) import none
of those five. Read from the source with ``ast``: lazy imports
inside functions count, imports only for type checkers do not. Scoring (intervals, curves, statistics,
ratings) is one package, ``mosaic.scoring``, with one interval type. The experiment report is a package of
small modules, one per seam; a tournament's standings are computed once (``mosaic.arena.standings``), for its
report and for the GUI's arena view, which only shows them.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
WORKERS = sorted(p for p in (ROOT / "workers").iterdir() if (p / "pyproject.toml").is_file())
#: layer -> the layers it must not import
ABOVE_SHARED = ("mosaic.workerkit", "mosaic.host", "mosaic.experiments", "mosaic.arena", "mosaic.clients",
                "mosaic.testing")
FORBIDDEN = {
    "mosaic.workerkit": ("mosaic.host", "mosaic.experiments", "mosaic.arena", "mosaic.clients", "mosaic.testing"),
    "mosaic.host": ("mosaic.experiments", "mosaic.arena", "mosaic.clients", "mosaic.testing"),
    "mosaic.experiments": ("mosaic.arena", "mosaic.clients", "mosaic.testing"),
    "mosaic.arena": ("mosaic.clients", "mosaic.testing"),
    "mosaic.fastlane": ABOVE_SHARED,
    "mosaic.llm": ABOVE_SHARED,
}
#: shared modules, and packages (a package's modules with it)
SHARED_MODULES = ("mosaic.configkit", "mosaic.errors", "mosaic.runs", "mosaic.run_status", "mosaic.pids",
                  "mosaic.diskcache", "mosaic.provenance", "mosaic.scoring")


def module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_nodes(tree: ast.AST) -> set[ast.AST]:
    """The nodes inside an ``if TYPE_CHECKING:`` block (imports there are only for type checkers)."""
    guarded: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:  # an ``else:`` branch runs
                guarded.update(ast.walk(child))
    return guarded


def imports_of(path: Path, name: str) -> set[str]:
    """Every module ``path`` imports (absolute dotted names), lazy ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    guarded = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if node in guarded:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join([*base, node.module] if node.module else base)
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names)  # `from pkg import module`
    return found


@functools.lru_cache(maxsize=1)
def _core_graph() -> dict[str, frozenset[str]]:
    modules = {module_name(p, SRC): p for p in (SRC / "mosaic").rglob("*.py") if "proto" not in p.parts}
    graph = {}
    for name, path in modules.items():
        graph[name] = frozenset(m for m in imports_of(path, name) if m in modules and m != name)
    return graph


def core_graph() -> dict[str, set[str]]:
    """Module -> the core modules it imports, read once a session (a fresh copy for each caller)."""
    return {name: set(targets) for name, targets in _core_graph().items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_imports_are_read_with_lazy_ones_and_without_those_for_type_checkers(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import a.b\nfrom typing import TYPE_CHECKING\nfrom . import sibling\n"
                      "if TYPE_CHECKING:\n    import only.typed\nelse:\n    import at.runtime\n"
                      "def f():\n    from c import d\n", encoding="utf-8")
    assert imports_of(source, "pkg.m") == {"a.b", "typing", "typing.TYPE_CHECKING", "pkg", "pkg.sibling",
                                           "at.runtime", "c", "c.d"}


def test_no_import_circle_inside_the_core():
    graph = core_graph()
    # a package's __init__ re-exporting its own modules is not a circle of concepts
    for name in graph:
        graph[name] = {m for m in graph[name] if not (name.startswith(m + ".") and m in graph)}
    assert cycles(graph) == [], "modules that import each other (directly or round a circle)"


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_each_layer_imports_only_what_is_below_it(layer):
    graph = core_graph()
    bad = sorted((m, i) for m, targets in graph.items() if m == layer or m.startswith(layer + ".")
                 for i in targets if any(i == f or i.startswith(f + ".") for f in FORBIDDEN[layer]))
    assert bad == [], f"{layer} must not import {', '.join(FORBIDDEN[layer])}"


def test_shared_modules_import_no_layer_above_them():
    graph = core_graph()
    shared = [m for m in graph if any(m == s or m.startswith(s + ".") for s in SHARED_MODULES)]
    assert "mosaic.scoring.stats" in shared
    bad = sorted((m, i) for m in shared for i in graph[m] if i.startswith(ABOVE_SHARED))
    assert bad == []


def test_the_core_has_few_top_level_modules():
    """A newcomer reads the architecture from the packages, not from a flat list of modules."""
    top = sorted(p.stem for p in (SRC / "mosaic").glob("*.py") if p.stem not in ("__init__", "__main__"))
    assert set(top) <= {m.split(".")[1] for m in SHARED_MODULES}, top


#: Exceptions to be removed, never widened (none now: the LLM worker plays other workers' checkpoints through
#: the player protocol of the contract, mosaic.workerkit.player).
KNOWN_CROSS_IMPORTS: set[tuple[str, str]] = set()


@pytest.mark.parametrize("worker", WORKERS, ids=[w.name for w in WORKERS])
def test_no_worker_imports_another_worker(worker):
    packages = {next(p.name for p in w.iterdir() if p.is_dir() and (p / "__init__.py").is_file()): w
                for w in WORKERS}
    own = next(name for name, w in packages.items() if w == worker)
    bad = []
    for path in (worker / own).rglob("*.py"):
        for module in imports_of(path, module_name(path, worker)):
            root = module.split(".")[0]
            if root in packages and root != own and (own, root) not in KNOWN_CROSS_IMPORTS:
                bad.append(f"{path.relative_to(ROOT)} imports {module}")
    assert bad == [], "a worker uses another only through the contract"


def test_the_known_cross_import_is_still_there():
    """When the exception above is gone, its entry must go too (the list only shrinks)."""
    found = set()
    for own, other in KNOWN_CROSS_IMPORTS:
        folder = ROOT / "workers" / own / own
        for path in folder.rglob("*.py"):
            if any(m.split(".")[0] == other for m in imports_of(path, module_name(path, folder.parent))):
                found.add((own, other))
    assert found == KNOWN_CROSS_IMPORTS, f"no longer imported: {KNOWN_CROSS_IMPORTS - found}; remove it from the list"


# -- one interval type ---------------------------------------------------------------------------------------
def _interval_like(node: ast.ClassDef) -> bool:
    """A class named like an interval or a band, or one with both ends of an interval among its fields."""
    fields = {item.target.id for item in node.body
              if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)}
    named = any(word in node.name.lower() for word in ("interval", "band"))
    return named or {"low", "high"} <= fields or {"lower", "upper"} <= fields or {"lo", "hi"} <= fields


def interval_classes(base: Path, folder: Path) -> list[str]:
    """``module.Class`` for every interval-like class defined under ``folder``."""
    found = []
    for path in sorted(folder.rglob("*.py")):
        if "proto" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        found += [f"{module_name(path, base)}.{node.name}" for node in ast.walk(tree)
                  if isinstance(node, ast.ClassDef) and _interval_like(node)]
    return found


def test_the_scoring_package_replaces_the_modules_it_gathered():
    for gone in ("stats", "curves", "ratings"):
        assert not (SRC / "mosaic" / f"{gone}.py").exists(), f"mosaic.{gone} is mosaic.scoring.{gone} now"
    assert sorted(p.stem for p in (SRC / "mosaic" / "scoring").glob("*.py")) == \
        ["__init__", "curves", "expected_best", "interval", "ratings", "stats"]


SEARCH_SPACE_RANGES = ("mosaic.experiments.study.space.Param", "mosaic.experiments.study.space.Dimension")


def test_one_interval_type_and_it_lives_in_scoring():
    """A point estimate with its interval (a number's, or a curve's band) is mosaic.scoring.interval.Interval,
    everywhere: no second class for the same idea, in the core or in a worker."""
    from mosaic.scoring import ratings, stats
    from mosaic.scoring.interval import Interval

    # a search space's dimension has a low and a high too: the range values are sampled from, not an estimate's
    found = [c for c in interval_classes(SRC, SRC / "mosaic") if c not in SEARCH_SPACE_RANGES]
    for worker in WORKERS:
        package = next(p for p in worker.iterdir() if p.is_dir() and (p / "__init__.py").is_file())
        found += interval_classes(worker, package)
    assert found == ["mosaic.scoring.interval.Interval"]
    assert stats.Interval is Interval and ratings.Interval is Interval  # what they return, not a copy


def test_the_interval_scan_sees_a_second_interval_class(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "m.py").write_text("from dataclasses import dataclass\n\n@dataclass\nclass Spread:\n"
                                  "    low: float\n    high: float\n\nclass Band: ...\n\nclass Game:\n"
                                  "    a: str\n", encoding="utf-8")
    assert interval_classes(tmp_path, package) == ["pkg.m.Spread", "pkg.m.Band"]


# -- the experiment report, one module per seam --------------------------------------------------------------
#: The most lines a module of the experiment report's package may have.
REPORT_MODULE_LINES = 350


def test_the_experiment_report_is_a_package_of_small_modules():
    """Numbers, report.md, data files, figures and the folder each have a module of their own; what reads an
    experiment's cells for the report is mosaic.experiments.collect, not a second module named like the report."""
    experiments = SRC / "mosaic" / "experiments"
    assert not (experiments / "report.py").exists() and not (experiments / "reporting.py").exists()
    modules = {p.stem: len(p.read_text(encoding="utf-8").splitlines()) for p in (experiments / "report").glob("*.py")}
    assert {"analysis", "tables", "exports", "plots", "write"} <= set(modules)
    assert {m: n for m, n in modules.items() if n > REPORT_MODULE_LINES} == {}


# -- the arena's standings: computed once, outside Qt ---------------------------------------------------------
ARENA_VIEW = SRC / "mosaic" / "clients" / "gui" / "arena_view.py"
RATINGS = SRC / "mosaic" / "scoring" / "ratings.py"


def rating_work(path: Path, base: Path = SRC) -> list[str]:
    """What in ``path`` rates games itself: an import from ``mosaic.scoring.ratings``, a call of one of its
    functions or of any fit or bootstrap, or a ``SimpleNamespace`` posing as something else."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = {n.name for n in ast.parse(RATINGS.read_text(encoding="utf-8")).body if isinstance(n, ast.FunctionDef)}
    found = [f"imports {m}" for m in sorted(imports_of(path, module_name(path, base)))
             if m == "mosaic.scoring.ratings" or m.startswith("mosaic.scoring.ratings.")
             or m.endswith("SimpleNamespace")]
    for node in ast.walk(tree):
        name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
        if name == "SimpleNamespace":
            found.append(f"line {node.lineno}: SimpleNamespace")
        if isinstance(node, ast.Call):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            words = called.lower().split("_")
            if called in functions or "fit" in words or "bootstrap" in words:
                found.append(f"line {node.lineno}: calls {called}")
    return found


def test_the_rating_scan_sees_each_kind_of_rating_work(tmp_path):
    source = tmp_path / "view.py"
    source.write_text("from types import SimpleNamespace\nfrom mosaic.scoring import ratings\n"
                      "from mosaic.scoring.ratings import crosstable\n"
                      "def f(games):\n    crosstable(games)\n    ratings.rating_bootstrap(games)\n"
                      "    fit_bradley_terry(games)\n    x = SimpleNamespace(games=games)\n"
                      "    table.resizeColumnsToContents()\n", encoding="utf-8")
    found = rating_work(source, tmp_path)
    assert "imports mosaic.scoring.ratings" in found and "imports mosaic.scoring.ratings.crosstable" in found
    assert "imports types.SimpleNamespace" in found and "line 8: SimpleNamespace" in found
    assert {"line 5: calls crosstable", "line 6: calls rating_bootstrap", "line 7: calls fit_bradley_terry"} \
        <= set(found)
    assert not any("resizeColumnsToContents" in f for f in found)


def test_the_arena_view_only_shows_the_standings():
    """The GUI's arena view rates nothing: its standings, crosstable and first-move line come from
    mosaic.arena.standings, as the arena report's do."""
    assert rating_work(ARENA_VIEW) == []
    for user in (ARENA_VIEW, SRC / "mosaic" / "arena" / "report.py"):
        assert "mosaic.arena.standings" in imports_of(user, module_name(user, SRC)), user
