"""Worker source trees: where they are found and what each declares in its pyproject."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import unquote, urlparse
from mosaic.workerkit.contract import ENTRY_POINT_GROUP
from mosaic.errors import ConfigError, UserError, one_of

from mosaic.host.environments.layout import TABLE, TABLE_KEYS, WORKER_PATH_VAR, _LOCKED, _NAME


# -- worker source trees -------------------------------------------------------
@dataclass(frozen=True)
class WorkerSource:
    """A worker's source tree and what it declares about its environment."""

    name: str
    root: Path
    package: str  # top-level import package of the entry point
    requirements: tuple[str, ...] | None  # None: no environment declared
    dependencies: tuple[str, ...] = ()  # the worker's [project] dependencies
    entry_point: str = ""  # ``module:function`` as the pyproject declares it
    #: Exact pins installed *without* their dependencies (a release whose own pins are broken).
    no_deps: tuple[str, ...] = ()
    distribution: str = ""  # the worker's [project] name
    #: Overlays: name -> exact pins, each installed without dependencies into a folder of its own
    #: (``<env>/overlays/<name>``) that only the scripts needing it put on their path.
    overlays: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @property
    def declared(self) -> bool:
        return self.requirements is not None

    @property
    def pyproject(self) -> Path:
        return self.root / "pyproject.toml"

    @property
    def pins_digest(self) -> str:
        """What the environment is built from: the table's pins and the worker's dependencies."""
        pins: dict[str, Any] = {"requirements": list(self.requirements or ()),
                                "dependencies": list(self.dependencies)}
        if self.no_deps:
            pins["no_deps"] = list(self.no_deps)
        if self.overlays:
            pins["overlays"] = {name: list(reqs) for name, reqs in self.overlays}
        text = json.dumps(pins, sort_keys=True)
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _load_toml(path: Path) -> dict[str, Any]:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise UserError("reading worker pyproject files needs Python 3.11+ (or `pip install tomli`)") from None
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, ValueError) as exc:
        raise ConfigError(str(path), f"cannot read it: {exc}") from None


def _pin_list(reqs: Any, field: str, where: str, exact: bool) -> tuple[str, ...]:
    """A list of requirement strings (``exact``: each ``name==version``), checked; ConfigError naming ``field``."""
    if not isinstance(reqs, list):
        raise ConfigError(field, f"must be a list of requirement strings "
                          f"such as \"numpy==1.26.4\", got {type(reqs).__name__} ({where})")
    for i, req in enumerate(reqs):
        if not isinstance(req, str) or not req.strip() or "\n" in req or req.lstrip().startswith("-"):
            raise ConfigError(f"{field}[{i}]", f"{req!r} is not a requirement: expected "
                              "a PEP 508 string such as \"numpy==1.26.4\" (package sources come from "
                              f"pip's configuration, not from here) ({where})")
        if exact and not _LOCKED.match(req.strip()):
            raise ConfigError(f"{field}[{i}]", f"{req!r} must pin one version exactly "
                              f"(\"name==version\"): nothing else decides what it brings ({where})")
    return tuple(r.strip() for r in reqs)


def _overlays(table: Any, where: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The validated ``overlays`` table: name -> non-empty list of exact pins."""
    field = f"{TABLE}.overlays"
    if not isinstance(table, dict):
        raise ConfigError(field, f"must be a table of overlay name -> list of exact pins, such as "
                          f"{{\"sb3-gym\" = [\"stable-baselines3==1.2.0\"]}}, got {type(table).__name__} ({where})")
    found = []
    for name, reqs in sorted(table.items()):
        if not isinstance(name, str) or not _NAME.match(name):
            raise ConfigError(f"{field}.{name}", f"{name!r} cannot name an overlay folder (allowed: letters, "
                              f"digits, '.', '_', '-'; not starting with '.') ({where})")
        pins = _pin_list(reqs, f"{field}.{name}", where, exact=True)
        if not pins:
            raise ConfigError(f"{field}.{name}", f"is empty: an overlay installs at least one exact pin ({where})")
        found.append((name, pins))
    return tuple(found)


def _requirements(table: Any, path: Path) -> tuple[tuple[str, ...], tuple[str, ...],
                                                   tuple[tuple[str, tuple[str, ...]], ...]]:
    """The validated ``requirements``, ``no_deps`` and ``overlays`` of a ``[tool.mosaic.environment]`` table."""
    where = f"{TABLE} in {path}"
    if not isinstance(table, dict):
        raise ConfigError(TABLE, f"must be a table in {path}, got {type(table).__name__}")
    unknown = sorted(set(table) - set(TABLE_KEYS))
    if unknown:
        raise ConfigError(f"{TABLE}.{unknown[0]}", f"{one_of(unknown[0], TABLE_KEYS)} ({where})")
    reqs = _pin_list(table.get("requirements", []), f"{TABLE}.requirements", where, exact=False)
    no_deps = _pin_list(table.get("no_deps", []), f"{TABLE}.no_deps", where, exact=True)
    return reqs, no_deps, _overlays(table.get("overlays", {}), where)


def read_tree(root: Path) -> tuple[list[WorkerSource], dict[str, str]]:
    """The workers one source tree declares (its ``mosaic.workers`` entry points).

    A tree whose environment table is invalid gives no sources but the reason,
    per worker name, so that asking for that worker reports it.
    """
    path = root / "pyproject.toml"
    data = _load_toml(path)
    project = data.get("project", {})
    entry_points = project.get("entry-points", {}).get(ENTRY_POINT_GROUP, {})
    table = data.get("tool", {}).get("mosaic", {}).get("environment")
    try:
        reqs, no_deps, overlays = (None, (), ()) if table is None else _requirements(table, path)
    except ConfigError as exc:
        return [], {name: str(exc) for name in entry_points}
    deps = tuple(str(d) for d in project.get("dependencies", []))
    return [WorkerSource(name, root, str(value).split(":", 1)[0].split(".", 1)[0].strip(), reqs, deps,
                         str(value).strip(), no_deps, str(project.get("name", "")), overlays)
            for name, value in sorted(entry_points.items())], {}


def _tree_of(dist: metadata.Distribution | None) -> Path | None:
    """The local source folder a distribution was installed from (``pip install [-e] DIR``)."""
    if dist is None:
        return None
    try:
        info = json.loads(dist.read_text("direct_url.json") or "null")
    except ValueError:
        return None
    url = info.get("url", "") if isinstance(info, dict) else ""
    if not url.startswith("file://") or "dir_info" not in info:
        return None
    root = Path(unquote(urlparse(url).path))
    return root if (root / "pyproject.toml").is_file() else None


def mosaic_source_tree() -> Path | None:
    """MOSAIC's own source tree (installed into each environment), if it was installed from one."""
    import mosaic

    candidate = Path(mosaic.__file__).resolve().parents[2]
    if (candidate / "pyproject.toml").is_file() and (candidate / "src" / "mosaic").is_dir():
        return candidate
    try:
        return _tree_of(metadata.distribution("mosaic-marl"))
    except metadata.PackageNotFoundError:
        return None


def _candidate_roots() -> Iterator[Path]:
    for entry in os.environ.get(WORKER_PATH_VAR, "").split(os.pathsep):
        if entry:
            yield Path(entry).absolute()
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        root = _tree_of(getattr(ep, "dist", None))
        if root is not None:
            yield root
    mosaic_tree = mosaic_source_tree()
    if mosaic_tree is not None:
        yield mosaic_tree / "workers"


def _trees(root: Path) -> list[Path]:
    """``root`` itself if it is a source tree, else its subfolders that are."""
    if (root / "pyproject.toml").is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "pyproject.toml").is_file())


@dataclass
class Scan:
    """Every worker source tree found, and the trees that could not be read."""

    sources: dict[str, WorkerSource] = field(default_factory=dict)
    invalid: dict[str, str] = field(default_factory=dict)  # worker -> what is wrong with its declaration
    problems: list[str] = field(default_factory=list)  # trees that could not be read at all
    installed: tuple[str, ...] = ()  # entry-point names in MOSAIC's own environment

    def names(self) -> list[str]:
        return sorted(set(self.sources) | set(self.invalid) | set(self.installed))

    def get(self, worker: str) -> WorkerSource:
        """The source of ``worker``; :class:`ConfigError` naming the known workers otherwise."""
        if worker in self.sources:
            return self.sources[worker]
        if worker in self.invalid:
            raise UserError(self.invalid[worker])
        if worker in self.installed:
            raise UserError(f"worker {worker!r} is installed, but not from a source tree MOSAIC can "
                            f"read, so it cannot declare an environment (install it with `pip install -e DIR` "
                            f"or add its folder to ${WORKER_PATH_VAR})")
        names = self.names()
        known = one_of(worker, names) if names else f"{worker!r} is unknown: no worker is installed"
        raise ConfigError("worker", f"{known} (workers come from the installed entry points "
                          f"and ${WORKER_PATH_VAR})")


def scan() -> Scan:
    """Find every worker source tree; the first one naming a worker wins."""
    result = Scan(installed=tuple(sorted({ep.name for ep in metadata.entry_points(group=ENTRY_POINT_GROUP)})))
    seen: set[Path] = set()
    for candidate in _candidate_roots():
        for tree in _trees(candidate):
            if tree.resolve() in seen:
                continue
            seen.add(tree.resolve())
            try:
                found, invalid = read_tree(tree)
            except UserError as exc:
                result.problems.append(f"{tree}: {exc}")
                continue
            for source in found:
                if source.name not in result.invalid:
                    result.sources.setdefault(source.name, source)
            for name, reason in invalid.items():
                if name not in result.sources:
                    result.invalid.setdefault(name, reason)
    return result
