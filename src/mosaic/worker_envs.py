"""Per-worker Python environments, built with uv.

RL libraries pin conflicting versions (CleanRL wants numpy<2, Ray 2.60 numpy>=2),
so a worker may declare a Python environment of its own in its pyproject::

    [tool.mosaic.environment]
    requirements = ["numpy==1.26.4"]

``build(worker)`` makes ``$MOSAIC_HOME/envs/<worker>/``: a venv of the
interpreter running MOSAIC holding the worker's source tree and MOSAIC's (both
editable) plus those requirements. It resolves first, checks the resolution
(torch must be a ``+cpu`` build), installs exactly what was resolved into a
temporary folder and renames that into place only once the worker imports
there, so a failed build leaves any older environment untouched. The
environment's ``mosaic-env.json`` records what was built; a pins digest in it
tells whether the declaration changed since.

uv reads no pip configuration, so the package sources pip is configured with
(``pip config list``: index URLs, find-links, constraint files, certificate)
are passed to it explicitly, with pip's rule that every source competes on
version (``--index-strategy unsafe-best-match``).

Worker source trees are found in ``$MOSAIC_WORKER_PATH`` (folders, each a
worker tree or a folder of them), then through the installed ``mosaic.workers``
entry points that come from a local tree, then in the ``workers/`` folder of
MOSAIC's own source tree. Core module: nothing heavy is imported.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import json
import os
import platform
import re
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import unquote, urlparse

from mosaic.discovery import ENTRY_POINT_GROUP
from mosaic.errors import ConfigError, UserError, one_of
from mosaic.runs import mosaic_home, write_json_atomic

TABLE = "tool.mosaic.environment"
TABLE_KEYS = ("requirements", "no_deps")
WORKER_PATH_VAR = "MOSAIC_WORKER_PATH"
RECORD_NAME = "mosaic-env.json"
LOCK_NAME = "requirements.lock"
NO_DEPS_LOCK_NAME = "no-deps.lock"
RECORD_VERSION = 1
CHECK_TIMEOUT_S = 120.0
RESOLVE_TIMEOUT_S = 900.0
STATUSES = ("ok", "missing", "stale", "broken", "shared", "orphaned")
_NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$")
_LOCKED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)")

Log = Callable[[str], None]


class EnvBuildError(UserError):
    """A build that failed for a reason other than the declaration (disk, network, uv)."""

    exit_code = 1


# -- where environments live ---------------------------------------------------
def envs_root(home: str | Path | None = None) -> Path:
    """``$MOSAIC_HOME/envs``, absolute (venv paths must not depend on the cwd)."""
    return (Path(home) if home is not None else mosaic_home()).absolute() / "envs"


def python_in(env: Path) -> Path:
    """The interpreter of a venv (not resolved: resolving would leave the venv)."""
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


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


def _requirements(table: Any, path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The validated ``requirements`` and ``no_deps`` of a ``[tool.mosaic.environment]`` table."""
    where = f"{TABLE} in {path}"
    if not isinstance(table, dict):
        raise ConfigError(TABLE, f"must be a table in {path}, got {type(table).__name__}")
    unknown = sorted(set(table) - set(TABLE_KEYS))
    if unknown:
        raise ConfigError(f"{TABLE}.{unknown[0]}", f"{one_of(unknown[0], TABLE_KEYS)} ({where})")
    lists = []
    for key in TABLE_KEYS:
        reqs = table.get(key, [])
        if not isinstance(reqs, list):
            raise ConfigError(f"{TABLE}.{key}", f"must be a list of requirement strings "
                              f"such as \"numpy==1.26.4\", got {type(reqs).__name__} ({where})")
        for i, req in enumerate(reqs):
            if not isinstance(req, str) or not req.strip() or "\n" in req or req.lstrip().startswith("-"):
                raise ConfigError(f"{TABLE}.{key}[{i}]", f"{req!r} is not a requirement: expected "
                                  "a PEP 508 string such as \"numpy==1.26.4\" (package sources come from "
                                  f"pip's configuration, not from here) ({where})")
            if key == "no_deps" and not _LOCKED.match(req.strip()):
                raise ConfigError(f"{TABLE}.{key}[{i}]", f"{req!r} must pin one version exactly "
                                  f"(\"name==version\"): nothing else decides what it brings ({where})")
        lists.append(tuple(r.strip() for r in reqs))
    return lists[0], lists[1]


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
        reqs, no_deps = (None, ()) if table is None else _requirements(table, path)
    except ConfigError as exc:
        return [], {name: str(exc) for name in entry_points}
    deps = tuple(str(d) for d in project.get("dependencies", []))
    return [WorkerSource(name, root, str(value).split(":", 1)[0].split(".", 1)[0].strip(), reqs, deps,
                         str(value).strip(), no_deps, str(project.get("name", "")))
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


# -- package sources (pip's configuration, handed to uv) ----------------------
@dataclass(frozen=True)
class PackageSources:
    """Where pip would take packages from; uv is given the same."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    constraints: tuple[str, ...] = ()
    trusted_hosts: tuple[str, ...] = ()
    no_index: bool = False
    cert: str | None = None
    timeout: str | None = None

    @classmethod
    def from_pip_config_list(cls, text: str) -> "PackageSources":
        """Parse ``pip config list``: ``section.option='value'``; env vars beat ``[install]`` beat ``[global]``."""
        found: dict[tuple[str, str], str] = {}
        for line in text.splitlines():
            key, sep, raw = line.partition("=")
            section, dot, option = key.strip().rpartition(".")
            if not sep or not dot:
                continue
            try:
                value = ast.literal_eval(raw.strip())
            except (ValueError, SyntaxError):
                value = raw.strip()
            found[(section, option)] = str(value)

        def get(*options: str) -> str | None:
            for section in (":env:", "install", "global"):
                for option in options:
                    if (section, option) in found:
                        return found[(section, option)]
            return None

        def many(option: str) -> tuple[str, ...]:
            return tuple((get(option) or "").split())

        return cls(index_url=get("index-url"), extra_index_urls=many("extra-index-url"),
                   find_links=many("find-links"), constraints=many("constraint"),
                   trusted_hosts=many("trusted-host"),
                   no_index=(get("no-index") or "").lower() in ("1", "true", "yes", "on"),
                   cert=get("cert"), timeout=get("timeout", "default-timeout"))

    def uv_args(self) -> list[str]:
        """Options of ``uv pip compile`` / ``uv pip sync`` that select these sources."""
        args = ["--index-strategy", "unsafe-best-match"]
        if self.no_index:
            args.append("--no-index")
        if self.index_url:
            args += ["--default-index", self.index_url]
        for url in self.extra_index_urls:
            args += ["--index", url]
        for link in self.find_links:
            args += ["--find-links", link]
        for path in self.constraints:
            args += ["--constraint", path]
        for host in self.trusted_hosts:
            args += ["--allow-insecure-host", host]
        return args

    def uv_env(self) -> dict[str, str]:
        env = {}
        if self.cert:
            env["SSL_CERT_FILE"] = self.cert
        if self.timeout:
            env["UV_HTTP_TIMEOUT"] = self.timeout
        return env

    def to_dict(self) -> dict[str, Any]:
        return {"index_url": self.index_url, "extra_index_urls": list(self.extra_index_urls),
                "find_links": list(self.find_links), "constraints": list(self.constraints),
                "trusted_hosts": list(self.trusted_hosts), "no_index": self.no_index}


def pip_sources(python: str | None = None) -> PackageSources:
    """The package sources pip is configured with for ``python`` (default: MOSAIC's)."""
    try:
        proc = subprocess.run([python or sys.executable, "-m", "pip", "config", "list"],
                              capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return PackageSources()
    return PackageSources.from_pip_config_list(proc.stdout if proc.returncode == 0 else "")


# -- uv ------------------------------------------------------------------------
def uv_binary() -> str:
    """uv's executable, from the ``uv`` Python package."""
    try:
        import uv
    except ModuleNotFoundError:
        raise UserError("worker environments are built with uv: pip install 'mosaic-marl[envs]'") from None
    try:
        return uv.find_uv_bin()
    except FileNotFoundError as exc:
        raise UserError(f"the uv package is installed but its binary is missing: {exc}") from None


def _uv_message(stderr: str, limit: int = 1200) -> str:
    """uv's error, on one line: box-drawing and blank lines dropped."""
    lines = [ln.strip().lstrip("×╰─▶│├ ").strip() for ln in stderr.splitlines()]
    lines = [ln[len("error: "):] if ln.startswith("error: ") else ln for ln in lines]
    text = "; ".join(ln for ln in lines if ln and not ln.startswith(("Using ", "Resolved ", "Prepared ")))
    return text if len(text) <= limit else text[:limit] + "…"


def _uv(args: list[str], sources: PackageSources, timeout: float | None = None) -> str:
    """Run uv; its stdout, or :class:`EnvBuildError` carrying its error."""
    env = {**os.environ, **sources.uv_env(), "NO_COLOR": "1", "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    try:
        proc = subprocess.run([uv_binary(), *args], capture_output=True, text=True,
                              timeout=timeout, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise EnvBuildError(f"uv {args[0]} {args[1] if len(args) > 1 else ''} did not finish within "
                            f"{timeout:g} s") from None
    if proc.returncode != 0:
        raise EnvBuildError(_uv_message(proc.stderr) or f"uv exited with {proc.returncode}")
    return proc.stdout


def locked_versions(lock_text: str) -> dict[str, str]:
    """``name -> version`` of a ``uv pip compile`` / ``uv pip freeze`` listing (editables left out)."""
    versions = {}
    for line in lock_text.splitlines():
        match = _LOCKED.match(line.strip())
        if match:
            versions[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return versions


def check_cpu_torch(versions: dict[str, str], where: str = "") -> None:
    """On Linux torch must resolve to a ``+cpu`` build: PyPI's plain wheel pulls in CUDA."""
    version = versions.get("torch")
    if version and sys.platform.startswith("linux") and not version.endswith("+cpu"):
        cuda = sorted(name for name in versions if name.startswith("nvidia-"))
        raise ConfigError(f"{TABLE}.requirements",
                          f"{where + ': ' if where else ''}torch resolved to {version}, not a +cpu build"
                          f"{f' (it would pull in {len(cuda)} nvidia packages)' if cuda else ''}; "
                          "pin the CPU build your package sources offer, e.g. \"torch==2.13.0\"")


# -- status --------------------------------------------------------------------
@dataclass(frozen=True)
class EnvStatus:
    """One worker's environment as it is now."""

    worker: str
    status: str  # one of STATUSES
    path: Path | None
    interpreter: Path | None = None
    python_version: str = ""
    reason: str = ""
    record: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"worker": self.worker, "status": self.status,
                "path": str(self.path) if self.path else None,
                "interpreter": str(self.interpreter) if self.interpreter else None,
                "python_version": self.python_version, "reason": self.reason,
                "built_at": self.record.get("built_at"), "pins_digest": self.record.get("pins_digest")}


_CHECK = ("import importlib, json, platform, sys; importlib.import_module('mosaic'); "
          "name, _, attr = sys.argv[1].partition(':'); module = importlib.import_module(name.strip()); "
          "attr and getattr(module, attr.strip()); "
          "print(json.dumps({'python_version': platform.python_version(), 'prefix': sys.prefix}))")


def probe(python: Path, package: str) -> tuple[dict[str, Any] | None, str]:
    """Run ``python`` to import MOSAIC and ``package`` (``module`` or an entry point's
    ``module:function``): (facts, '') or (None, why not)."""
    if not python.exists():
        target = os.readlink(python) if python.is_symlink() else python
        return None, f"interpreter gone: {python} -> {target} does not exist"
    try:
        proc = subprocess.run([str(python), "-I", "-c", _CHECK, package], capture_output=True, text=True,
                              timeout=CHECK_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"interpreter {python} does not run: {exc}"
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        return None, f"{package} is not importable there: {lines[-1] if lines else proc.returncode}"
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1]), ""
    except (ValueError, IndexError):
        return None, f"interpreter {python} printed {proc.stdout[:200]!r}"


def read_record(env: Path) -> dict[str, Any]:
    try:
        record = json.loads((env / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def status(source: WorkerSource, home: str | Path | None = None, check: bool = True) -> EnvStatus:
    """ok, missing, stale (pins changed since the build), broken (interpreter gone or worker not importable).

    ``check=False`` skips running the interpreter (discovery's ``--describe`` does that).
    """
    if not source.declared:
        return EnvStatus(source.name, "shared", None, Path(sys.executable), platform.python_version(),
                         reason="declares no environment: runs in MOSAIC's own interpreter")
    env = envs_root(home) / source.name
    if not env.is_dir():
        return EnvStatus(source.name, "missing", env, reason="not built yet")
    record = read_record(env)
    python = python_in(env)
    if not record:
        return EnvStatus(source.name, "broken", env, python, reason=f"no readable {RECORD_NAME}")
    if not check:
        facts, why = ({"python_version": record.get("python_version", "")}, "") if python.exists() else \
            (None, f"interpreter gone: {python} does not exist")
    else:
        facts, why = probe(python, source.entry_point or source.package)
    if facts is None:
        return EnvStatus(source.name, "broken", env, python, record.get("python_version", ""), why, record)
    if record.get("pins_digest") != source.pins_digest:
        return EnvStatus(source.name, "stale", env, python, facts["python_version"],
                         f"pins changed since the build ({source.pyproject})", record)
    return EnvStatus(source.name, "ok", env, python, facts["python_version"], "", record)


def list_envs(home: str | Path | None = None) -> tuple[list[EnvStatus], list[str]]:
    """Every known worker's environment, plus environments no worker declares any more."""
    found = scan()
    rows = [status(found.sources[name], home) for name in sorted(found.sources)]
    rows += [EnvStatus(name, "broken", envs_root(home) / name, reason=reason)
             for name, reason in sorted(found.invalid.items())]
    rows += [EnvStatus(name, "shared", None, Path(sys.executable), platform.python_version(),
                       reason="installed without a readable source tree: runs in MOSAIC's own interpreter")
             for name in found.installed if name not in found.sources and name not in found.invalid]
    root = envs_root(home)
    declared = set(found.invalid) | {name for name, source in found.sources.items() if source.declared}
    if root.is_dir():
        for env in sorted(root.iterdir()):
            if env.is_dir() and not env.name.startswith(".") and env.name not in declared:
                rows.append(EnvStatus(env.name, "orphaned", env, python_in(env),
                                      read_record(env).get("python_version", ""),
                                      "no worker declares this environment any more", read_record(env)))
    return sorted(rows, key=lambda r: r.worker), found.problems


# -- build / remove ------------------------------------------------------------
@contextlib.contextmanager
def _locked(root: Path, worker: str) -> Iterator[None]:
    """One build or removal of a worker's environment at a time."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / f".{worker}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"another build or removal of {worker!r}'s environment is under way") from None
        yield
    finally:
        os.close(fd)


def _sweep(root: Path, worker: str) -> None:
    """Leftovers of builds and removals that were killed half-way."""
    for leftover in [*root.glob(f".build-{worker}-??????"), *root.glob(f".old-{worker}-??????")]:
        shutil.rmtree(leftover, ignore_errors=True)


def _swap_in(built: Path, dest: Path) -> None:
    """Replace ``dest`` by ``built``; the older environment goes only once the new one is in place."""
    old = dest.with_name(f".old-{dest.name}-{secrets.token_hex(3)}")
    if dest.exists():
        os.rename(dest, old)
    try:
        os.rename(built, dest)
    except BaseException:
        if old.exists():
            os.rename(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)


@dataclass(frozen=True)
class BuildResult:
    worker: str
    path: Path
    built: bool  # False: it was up to date, nothing was done
    record: dict[str, Any]


def build(worker: str, force: bool = False, home: str | Path | None = None,
          log: Log | None = None) -> BuildResult:
    """Build ``worker``'s environment, unless it is up to date (``force`` rebuilds)."""
    say = log or (lambda message: None)
    source = scan().get(worker)
    if not source.declared:
        raise UserError(f"worker {worker!r} declares no environment (no [{TABLE}] in {source.pyproject}); "
                        "it runs in MOSAIC's own interpreter")
    if not _NAME.match(worker):
        raise ConfigError("worker", f"{worker!r} cannot name an environment folder "
                          "(allowed: letters, digits, '.', '_', '-'; not starting with '.')")
    root = envs_root(home)
    dest = root / worker
    with _locked(root, worker):
        current = status(source, home)
        if current.status == "ok" and not force:
            return BuildResult(worker, dest, False, current.record)
        if current.status in ("stale", "broken"):
            say(f"{worker}: rebuilding ({current.status}: {current.reason})")
        _sweep(root, worker)
        mosaic_tree = mosaic_source_tree()
        if mosaic_tree is None:
            raise UserError("worker environments install MOSAIC from its source tree, but this MOSAIC "
                            "was not installed from one (pip install -e <checkout>)")
        staging = root / f".build-{worker}-{secrets.token_hex(3)}"
        try:
            record = _build_into(staging, source, mosaic_tree, say)
            record["interpreter"] = str(python_in(dest))
            write_json_atomic(staging / RECORD_NAME, record)
            _swap_in(staging, dest)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        say(f"{worker}: compiling its packages' bytecode")
        compile_bytecode(python_in(dest))
    return BuildResult(worker, dest, True, record)


def compile_bytecode(python: Path) -> None:
    """Write the ``.pyc`` files of everything installed for ``python``, where it now lives.

    uv installs no bytecode (pip does), so without this every process of a worker compiles what
    it imports (torch alone takes seconds) and, where ``PYTHONDONTWRITEBYTECODE`` is set, as in
    many container images, does so again in every process. Compiled after the environment is in
    its place (``-f``: also over what the build's own checks imported, in the staging folder), so
    tracebacks name the real paths. A file that does not compile (a package's Python 2 leftovers)
    is skipped, as pip skips it.
    """
    subprocess.run([str(python), "-m", "compileall", "-q", "-f", "-j", "0", *site_packages(python)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ,
                   "PYTHONDONTWRITEBYTECODE": ""}, check=False)


def site_packages(python: Path) -> list[str]:
    """The site-packages folders of ``python``'s environment."""
    out = subprocess.run([str(python), "-c", "import site, json; print(json.dumps(site.getsitepackages()))"],
                         capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=True)
    return [p for p in json.loads(out.stdout) if Path(p).is_dir()]


def resolve(source: WorkerSource, mosaic_tree: Path, sources: PackageSources, python: Path,
            lock: Path) -> dict[str, str]:
    """Resolve the worker and MOSAIC (editable) and the pins for ``python`` into ``lock``.

    Nothing is installed; the resolution is checked (torch must be a CPU build)
    so a wrong one fails before anything is downloaded. Returns name -> version.
    """
    wanted = lock.with_name("mosaic-requirements.in")
    wanted.write_text("".join(f"{line}\n" for line in
                              (f"-e {source.root}", f"-e {mosaic_tree}", *(source.requirements or ()))))
    try:
        _uv(["pip", "compile", "--no-config", "--quiet", "--no-header", "--no-annotate",
             "--python", str(python), *sources.uv_args(), "-o", str(lock), str(wanted)],
            sources, timeout=RESOLVE_TIMEOUT_S)
    except EnvBuildError as exc:
        raise ConfigError(f"{TABLE}.requirements", f"cannot be resolved for worker {source.name!r} "
                          f"({source.pyproject}): {exc}") from None
    resolved = locked_versions(lock.read_text(encoding="utf-8"))
    if source.no_deps:
        alone = lock.with_name(NO_DEPS_LOCK_NAME)
        wanted.write_text("".join(f"{line}\n" for line in source.no_deps))
        try:
            _uv(["pip", "compile", "--no-config", "--quiet", "--no-header", "--no-annotate", "--no-deps",
                 "--python", str(python), *sources.uv_args(), "-o", str(alone), str(wanted)],
                sources, timeout=RESOLVE_TIMEOUT_S)
        except EnvBuildError as exc:
            raise ConfigError(f"{TABLE}.no_deps", f"cannot be resolved for worker {source.name!r} "
                              f"({source.pyproject}): {exc}") from None
        resolved.update(locked_versions(alone.read_text(encoding="utf-8")))
    check_cpu_torch(resolved, f"worker {source.name!r} ({source.pyproject})")
    return resolved


def _build_into(staging: Path, source: WorkerSource, mosaic_tree: Path, say: Log) -> dict[str, Any]:
    """venv, resolve, check, install, verify: the record of what now lives in ``staging``."""
    started = time.time()
    sources = pip_sources()
    python = python_in(staging)
    say(f"{source.name}: creating a venv of {sys.executable}")
    _uv(["venv", "--relocatable", "--no-config", "--quiet", "--python", sys.executable, str(staging)],
        sources, timeout=CHECK_TIMEOUT_S)
    say(f"{source.name}: resolving {len(source.requirements or ())} pins, the worker and MOSAIC")
    resolved = resolve(source, mosaic_tree, sources, python, staging / LOCK_NAME)
    say(f"{source.name}: installing {len(resolved)} pinned packages, the worker and MOSAIC (editable)")
    # uv caches the wheels it builds from the editable trees; a tree edited since then must be built anew
    refresh = [arg for dist in (source.distribution, "mosaic-marl") if dist for arg in ("--refresh-package", dist)]
    _uv(["pip", "sync", "--no-config", "--quiet", "--python", str(python), *sources.uv_args(), *refresh,
         str(staging / LOCK_NAME)], sources)
    if source.no_deps:  # after the sync, which would remove what its lock does not list
        say(f"{source.name}: installing {len(source.no_deps)} pinned packages without their dependencies")
        _uv(["pip", "install", "--no-config", "--quiet", "--no-deps", "--python", str(python),
             *sources.uv_args(), "-r", str(staging / NO_DEPS_LOCK_NAME)], sources)
    facts, why = probe(python, source.entry_point or source.package)
    if facts is None:
        raise EnvBuildError(f"the new environment of {source.name!r} does not work: {why}")
    freeze = _uv(["pip", "freeze", "--no-config", "--python", str(python)], sources, timeout=CHECK_TIMEOUT_S)
    listed = json.loads(_uv(["pip", "list", "--no-config", "--format", "json", "--python", str(python)],
                            sources, timeout=CHECK_TIMEOUT_S))
    return {
        "record_version": RECORD_VERSION, "worker": source.name, "package": source.package,
        "source": str(source.root), "mosaic_source": str(mosaic_tree),
        "base_interpreter": sys.executable, "python_version": facts["python_version"],
        "pins_digest": source.pins_digest, "requirements": list(source.requirements or ()),
        "no_deps": list(source.no_deps),
        "packages": {p["name"]: p["version"] for p in listed}, "freeze": freeze.strip().splitlines(),
        "package_sources": sources.to_dict(), "uv_version": _uv_version(),
        "built_at": time.time(), "build_seconds": round(time.time() - started, 3),
    }


def _uv_version() -> str:
    try:
        return metadata.version("uv")
    except metadata.PackageNotFoundError:
        return ""


def remove(worker: str, home: str | Path | None = None) -> Path | None:
    """Delete ``worker``'s environment; the path removed, or None when there was none."""
    root = envs_root(home)
    dest = root / worker
    if not (_NAME.match(worker) and dest.is_dir()):
        scan().get(worker)  # an unknown name is an error naming the known ones
        return None
    with _locked(root, worker):
        _sweep(root, worker)
        if not dest.is_dir():
            return None
        doomed = root / f".old-{worker}-{secrets.token_hex(3)}"
        os.rename(dest, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
    return dest


def interpreter_for(worker: str, home: str | Path | None = None) -> str | None:
    """The python ``worker`` runs with: its environment's, or None for MOSAIC's own interpreter.

    :class:`UserError` (naming ``mosaic envs build``) when the worker declares an
    environment that is missing, stale or broken.
    """
    found = scan()
    if worker in found.invalid:
        raise UserError(found.invalid[worker])
    source = found.sources.get(worker)
    if source is None or not source.declared:
        return None
    current = status(source, home)
    if current.status == "ok":
        return str(current.interpreter)
    raise UserError(f"worker {worker!r} runs in its own environment, which is {current.status} "
                    f"({current.reason}): build it with `mosaic envs build {worker}`")


def environment_workers(home: str | Path | None = None) -> tuple[list[Any], list[Any]]:
    """``(DiscoveredWorker list, BrokenWorker list)`` of the workers that declare an environment.

    Each is described by its environment's interpreter (``--describe``, cached);
    MOSAIC's own interpreter never imports it. A missing, stale or broken
    environment, or one where the worker does not run, makes it broken, with
    the command that builds it.
    """
    from mosaic import describe
    from mosaic.discovery import BrokenWorker, from_description

    found = scan()
    workers, broken = [], []
    for name, reason in sorted(found.invalid.items()):
        broken.append(BrokenWorker(name, "", reason))
    for name, source in sorted(found.sources.items()):
        if not source.declared:
            continue
        current = status(source, home, check=False)
        if current.status != "ok":
            broken.append(BrokenWorker(name, source.entry_point, f"its environment is {current.status} "
                                       f"({current.reason}): build it with `mosaic envs build {name}`"))
            continue
        try:
            document = describe.load(str(current.interpreter), f"{source.package}.cli", [source.root])
            workers.append(from_description(document, python=str(current.interpreter)))
        except (UserError, ValueError, TypeError, KeyError) as exc:
            broken.append(BrokenWorker(name, source.entry_point, f"it does not run in its environment "
                                       f"{current.path}: {exc} (rebuild it with `mosaic envs build {name} "
                                       "--force`)"))
    return workers, broken
