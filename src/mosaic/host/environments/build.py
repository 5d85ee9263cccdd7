"""Building, replacing and removing a worker's environment."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterator
from mosaic.errors import ConfigError, UserError
from mosaic.runs import write_json_atomic

from mosaic.host.environments.layout import CHECK_TIMEOUT_S, EnvBuildError, LOCK_NAME, Log, NO_DEPS_LOCK_NAME, OVERLAYS_DIR, RECORD_NAME, RECORD_VERSION, RESOLVE_TIMEOUT_S, TABLE, _NAME, envs_root, overlay_dir, overlay_lock_name, python_in
from mosaic.host.environments.sources import WorkerSource, mosaic_source_tree, scan
from mosaic.host.environments.status import probe, status
from mosaic.host.environments.uv import TORCH_VARIANT_ENV as TORCH_VARIANT_ENV_NAME
from mosaic.host.environments.uv import (PackageSources, _uv, check_torch_variant, cpu_builds_excluded,
                                         locked_versions, pip_sources, torch_variant, variant_requirements)

#: Beside a lock: the constraints that keep a ``cuda`` build off the ``+cpu`` torch (handed to uv's sync too).
VARIANT_CONSTRAINTS_NAME = "mosaic-variant-constraints.txt"


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
        variant = torch_variant()
        built_as = (current.record or {}).get("torch_variant", "cpu")
        if current.status == "ok" and not force and built_as == variant:
            return BuildResult(worker, dest, False, current.record)
        if current.status == "ok" and built_as != variant:
            say(f"{worker}: rebuilding (built with {built_as} torch; {TORCH_VARIANT_ENV_NAME} asks for {variant})")
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
        compile_bytecode(python_in(dest), [overlay_dir(dest, name) for name, _ in source.overlays])
    return BuildResult(worker, dest, True, record)


def compile_bytecode(python: Path, extra: list[Path] | None = None, force: bool = True) -> None:
    """Write the ``.pyc`` files of everything installed for ``python``, where it now lives.

    uv installs no bytecode (pip does), so without this every process of a worker compiles what
    it imports (torch alone takes seconds) and, where ``PYTHONDONTWRITEBYTECODE`` is set, as in
    many container images, does so again in every process. Compiled after the environment is in
    its place (``-f``: also over what the build's own checks imported, in the staging folder), so
    tracebacks name the real paths. A file that does not compile (a package's Python 2 leftovers)
    is skipped, as pip skips it. ``extra``: more folders (the environment's overlays). ``force=False``: files
    whose bytecode is up to date are skipped (``scripts/bootstrap`` on MOSAIC's own ``.venv``, run again).
    """
    folders = [*site_packages(python), *(str(p) for p in extra or () if p.is_dir())]
    subprocess.run([str(python), "-m", "compileall", "-q", *(["-f"] if force else []), "-j", "0", *folders],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ,
                   "PYTHONDONTWRITEBYTECODE": ""}, check=False)


def site_packages(python: Path) -> list[str]:
    """The site-packages folders of ``python``'s environment."""
    out = subprocess.run([str(python), "-c", "import site, json; print(json.dumps(site.getsitepackages()))"],
                         capture_output=True, text=True, timeout=CHECK_TIMEOUT_S, check=True)
    return [p for p in json.loads(out.stdout) if Path(p).is_dir()]


def compile_variant(wanted: Path, lock: Path, python: Path | str, sources: PackageSources,
                    variant: str) -> dict[str, str]:
    """``uv pip compile`` of ``wanted`` into ``lock`` for torch's ``variant``; name -> version.

    From index metadata only: nothing is downloaded or installed. ``cuda``: where the sources also
    offer a ``+cpu`` torch (it wins a tie on version, its local label sorting after), that build is
    ruled out by a constraint (written beside the lock, :data:`VARIANT_CONSTRAINTS_NAME`) and the
    resolution made again, so PyPI's CUDA build is chosen. :class:`EnvBuildError` carries uv's error.
    """
    constraints = lock.with_name(VARIANT_CONSTRAINTS_NAME)
    constraints.unlink(missing_ok=True)
    excluded: list[str] = []
    while True:
        extra = ["--constraint", str(constraints)] if excluded else []
        _uv(["pip", "compile", "--no-config", "--quiet", "--no-header", "--no-annotate",
             "--python", str(python), *sources.uv_args(), *extra, "-o", str(lock), str(wanted)],
            sources, timeout=RESOLVE_TIMEOUT_S)
        resolved = locked_versions(lock.read_text(encoding="utf-8"))
        more = [line for line in cpu_builds_excluded(resolved) if line not in excluded] if variant == "cuda" else []
        if not more or len(excluded) >= 3:
            return resolved
        excluded += more
        constraints.write_text("".join(f"{line}\n" for line in excluded), encoding="utf-8")


def resolve(source: WorkerSource, mosaic_tree: Path, sources: PackageSources, python: Path,
            lock: Path, variant: str | None = None) -> dict[str, str]:
    """Resolve the worker and MOSAIC (editable) and the pins for ``python`` into ``lock``.

    Nothing is installed; the resolution is checked (torch must be a CPU build, or with
    ``variant`` ``cuda`` (``$MOSAIC_TORCH_VARIANT``) a CUDA build) so a wrong one fails before
    anything is downloaded. Returns name -> version.
    """
    variant = torch_variant(variant)
    wanted = lock.with_name("mosaic-requirements.in")
    wanted.write_text("".join(f"{line}\n" for line in
                              (f"-e {source.root}", f"-e {mosaic_tree}",
                               *variant_requirements(source.requirements or (), variant))))
    try:
        resolved = compile_variant(wanted, lock, python, sources, variant)
    except EnvBuildError as exc:
        raise ConfigError(f"{TABLE}.requirements", f"cannot be resolved for worker {source.name!r} "
                          f"({source.pyproject}): {exc}") from None
    if source.no_deps:
        alone = lock.with_name(NO_DEPS_LOCK_NAME)
        resolved.update(_resolve_alone(source.no_deps, wanted, alone, f"{TABLE}.no_deps", source, sources, python))
    check_torch_variant(resolved, variant, f"worker {source.name!r} ({source.pyproject})")
    resolve_overlays(source, sources, python, lock)
    return resolved


def _resolve_alone(pins: "tuple[str, ...] | list[str]", wanted: Path, alone: Path, key: str, source: WorkerSource,
                   sources: PackageSources, python: Path) -> dict[str, str]:
    """Resolve ``pins`` without their dependencies into the lock ``alone`` (``wanted``: the input file written
    for it); name -> version. A pin that cannot be resolved is a :class:`ConfigError` naming ``key``."""
    wanted.write_text("".join(f"{line}\n" for line in pins))
    try:
        _uv(["pip", "compile", "--no-config", "--quiet", "--no-header", "--no-annotate", "--no-deps",
             "--python", str(python), *sources.uv_args(), "-o", str(alone), str(wanted)],
            sources, timeout=RESOLVE_TIMEOUT_S)
    except EnvBuildError as exc:
        raise ConfigError(key, f"cannot be resolved for worker {source.name!r} ({source.pyproject}): {exc}") from None
    return locked_versions(alone.read_text(encoding="utf-8"))


def resolve_overlays(source: WorkerSource, sources: PackageSources, python: Path,
                     lock: Path) -> dict[str, dict[str, str]]:
    """Resolve each overlay's pins without their dependencies, as ``no_deps``, into its own lock beside
    ``lock`` (:func:`overlay_lock_name`): overlay -> name -> version. Nothing is installed."""
    return {name: _resolve_alone(pins, lock.with_name(f"overlay-{name}.in"), lock.with_name(overlay_lock_name(name)),
                                 f"{TABLE}.overlays.{name}", source, sources, python)
            for name, pins in source.overlays}


def _build_into(staging: Path, source: WorkerSource, mosaic_tree: Path, say: Log) -> dict[str, Any]:
    """venv, resolve, check, install, verify: the record of what now lives in ``staging``."""
    started = time.time()
    sources = pip_sources()
    python = python_in(staging)
    say(f"{source.name}: creating a venv of {sys.executable}")
    _uv(["venv", "--relocatable", "--no-config", "--quiet", "--python", sys.executable, str(staging)],
        sources, timeout=CHECK_TIMEOUT_S)
    say(f"{source.name}: resolving {len(source.requirements or ())} pins, the worker and MOSAIC")
    variant = torch_variant()
    resolved = resolve(source, mosaic_tree, sources, python, staging / LOCK_NAME, variant)
    constraints = staging / VARIANT_CONSTRAINTS_NAME
    variant_args = ["--constraint", str(constraints)] if constraints.is_file() else []
    say(f"{source.name}: installing {len(resolved)} pinned packages, the worker and MOSAIC (editable)")
    # uv caches the wheels it builds from the editable trees; a tree edited since then must be built anew
    refresh = [arg for dist in (source.distribution, "mosaic-marl") if dist for arg in ("--refresh-package", dist)]
    _uv(["pip", "sync", "--no-config", "--quiet", "--python", str(python), *sources.uv_args(), *variant_args,
         *refresh, str(staging / LOCK_NAME)], sources)
    if source.no_deps:  # after the sync, which would remove what its lock does not list
        say(f"{source.name}: installing {len(source.no_deps)} pinned packages without their dependencies")
        _uv(["pip", "install", "--no-config", "--quiet", "--no-deps", "--python", str(python),
             *sources.uv_args(), "-r", str(staging / NO_DEPS_LOCK_NAME)], sources)
    overlays: dict[str, dict[str, str]] = {}
    for name, pins in source.overlays:  # each into a folder of its own, which only the scripts needing it use
        say(f"{source.name}: installing overlay {name!r} ({len(pins)} pins, without their dependencies)")
        target = overlay_dir(staging, name)
        _uv(["pip", "install", "--no-config", "--quiet", "--no-deps", "--python", str(python),
             *sources.uv_args(), "--target", str(target), "-r", str(staging / overlay_lock_name(name))], sources)
        overlays[name] = locked_versions((staging / overlay_lock_name(name)).read_text(encoding="utf-8"))
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
        "overlays": {name: {"pins": list(pins), "path": f"{OVERLAYS_DIR}/{name}", "packages": overlays[name]}
                     for name, pins in source.overlays},
        "packages": {p["name"]: p["version"] for p in listed}, "freeze": freeze.strip().splitlines(),
        "package_sources": sources.to_dict(), "torch_variant": variant, "uv_version": _uv_version(),
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


# -- what a build would resolve, without building (scripts/bootstrap --dry-run) ------------
def resolve_requirements(requirements: list[str], variant: str | None = None,
                         sources: PackageSources | None = None, where: str = "requirements") -> dict[str, str]:
    """Resolve plain requirement lines (MOSAIC's own torch, say) for ``variant``: name -> version, checked
    as a build checks its resolution. From index metadata only; nothing is downloaded or installed."""
    import tempfile

    variant = torch_variant(variant)
    sources = sources or pip_sources()
    with tempfile.TemporaryDirectory(prefix="mosaic-resolve-") as folder:
        wanted, lock = Path(folder) / "requirements.in", Path(folder) / LOCK_NAME
        wanted.write_text("".join(f"{line}\n" for line in variant_requirements(requirements, variant)))
        try:
            resolved = compile_variant(wanted, lock, sys.executable, sources, variant)
        except EnvBuildError as exc:
            raise ConfigError(where, f"cannot be resolved: {exc}") from None
    check_torch_variant(resolved, variant, where)
    return resolved


def dry_resolve(worker: str, variant: str | None = None, sources: PackageSources | None = None) -> dict[str, str]:
    """What ``mosaic envs build WORKER`` would install for ``variant``: name -> version, resolved into a
    temporary folder (the worker's environment is left as it is)."""
    import tempfile

    source = scan().get(worker)
    if not source.declared:
        raise UserError(f"worker {worker!r} declares no environment (no [{TABLE}] in {source.pyproject}); "
                        "it runs in MOSAIC's own interpreter")
    mosaic_tree = mosaic_source_tree()
    if mosaic_tree is None:
        raise UserError("worker environments install MOSAIC from its source tree, but this MOSAIC "
                        "was not installed from one (pip install -e <checkout>)")
    with tempfile.TemporaryDirectory(prefix=f"mosaic-resolve-{worker}-") as folder:
        return resolve(source, mosaic_tree, sources or pip_sources(), Path(sys.executable),
                       Path(folder) / LOCK_NAME, variant)


def _summary(versions: dict[str, str]) -> str:
    shown = {name: versions[name] for name in ("torch", "jax", "jaxlib", "jax-cuda12-plugin") if name in versions}
    nvidia = sorted(name for name in versions if name.startswith("nvidia-"))
    return (", ".join(f"{name}=={version}" for name, version in shown.items()) or "no torch or JAX"
            ) + f"; {len(nvidia)} nvidia packages; {len(versions)} packages in all"


def main(argv: list[str] | None = None) -> int:
    """``python -m mosaic.host.environments.build --dry-run [--variant cuda] [--main REQ ...] [WORKER ... | --all]``:
    print what builds would resolve (one line each, or ``--json``), downloading no wheels."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m mosaic.host.environments.build",
                                     description="what worker environment builds would resolve (no download)")
    parser.add_argument("--dry-run", action="store_true", required=True, help="resolve only (the one mode)")
    parser.add_argument("--variant", help=f"cpu or cuda (default: ${TORCH_VARIANT_ENV_NAME}, else cpu)")
    parser.add_argument("--main", action="append", default=[], metavar="REQ",
                        help="a requirement of MOSAIC's own environment to resolve too (e.g. torch==2.13.0); "
                             "repeat for more")
    parser.add_argument("--all", action="store_true", help="every worker that declares an environment")
    parser.add_argument("--json", action="store_true", help="name -> version of every resolution, as JSON")
    parser.add_argument("workers", nargs="*")
    args = parser.parse_args(argv)
    try:
        variant = torch_variant(args.variant)
        workers = sorted(name for name, src in scan().sources.items() if src.declared) if args.all else args.workers
        results: dict[str, dict[str, str]] = {}
        if args.main:
            results["(mosaic)"] = resolve_requirements(list(args.main), variant, where="mosaic's own torch")
        for worker in workers:
            results[worker] = dry_resolve(worker, variant)
    except UserError as exc:
        print(f"mosaic: error: {exc}", file=sys.stderr)
        return 2
    except EnvBuildError as exc:
        print(f"mosaic: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"variant": variant, "resolved": results}, indent=2, sort_keys=True))
    else:
        for name, versions in results.items():
            print(f"{name} ({variant}): {_summary(versions)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
