"""The package sources pip is configured with, handed to uv, and uv's answers."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any
from mosaic.errors import ConfigError, UserError

from mosaic.host.environments.layout import EnvBuildError, TABLE, _LOCKED


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


def _uv_env(sources: PackageSources) -> dict[str, str]:
    """uv's environment: ours, with the sources' certificate and timeout; no Python downloads, no active venv."""
    env = {**os.environ, **sources.uv_env(), "NO_COLOR": "1", "UV_PYTHON_DOWNLOADS": "never"}
    env.pop("VIRTUAL_ENV", None)
    return env


def _uv(args: list[str], sources: PackageSources, timeout: float | None = None) -> str:
    """Run uv; its stdout, or :class:`EnvBuildError` carrying its error."""
    try:
        proc = subprocess.run([uv_binary(), *args], capture_output=True, text=True,
                              timeout=timeout, env=_uv_env(sources), stdin=subprocess.DEVNULL)
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


# -- torch's build: CPU (the default) or CUDA, on request ----------------------
#: The environment variable that chooses the builds of torch (and JAX) worker environments get.
TORCH_VARIANT_ENV = "MOSAIC_TORCH_VARIANT"
#: ``cpu``: torch's ``+cpu`` build (the default; no GPU, no nvidia packages). ``cuda``: PyPI's plain torch
#: wheel (a CUDA build: it pulls in the nvidia-* packages) and ``jax[cuda12]`` where JAX is pinned.
TORCH_VARIANTS = ("cpu", "cuda")
#: The JAX extra the ``cuda`` variant adds to a ``jax==V`` pin (JAX's own name for its CUDA 12 wheels).
JAX_CUDA_EXTRA = "cuda12"
_JAX_PIN = re.compile(r"^\s*jax\s*==\s*([^\s;,]+)\s*$", re.IGNORECASE)


def torch_variant(value: str | None = None) -> str:
    """The requested variant: ``value``, else ``$MOSAIC_TORCH_VARIANT``, else ``cpu``; a UserError naming the
    variable for anything else."""
    chosen = (value if value is not None else os.environ.get(TORCH_VARIANT_ENV, "")).strip().lower() or "cpu"
    if chosen not in TORCH_VARIANTS:
        raise UserError(f"{TORCH_VARIANT_ENV}: {chosen!r} is not one of {', '.join(TORCH_VARIANTS)}")
    return chosen


def variant_requirements(requirements: "list[str] | tuple[str, ...]", variant: str) -> list[str]:
    """A worker's pins for ``variant``: unchanged for ``cpu``; for ``cuda`` a ``jax==V`` pin gains
    ``jax[cuda12]==V`` (JAX's CUDA plugin and the nvidia packages it needs)."""
    out = list(requirements)
    if variant == "cuda":
        for line in requirements:
            match = _JAX_PIN.match(line)
            if match:
                out.append(f"jax[{JAX_CUDA_EXTRA}]=={match.group(1)}")
    return out


def cpu_builds_excluded(versions: dict[str, str]) -> list[str]:
    """Constraint lines that rule out the ``+cpu`` torch a resolution picked (so the CUDA one competes alone)."""
    version = versions.get("torch", "")
    return [f"torch!={version}"] if version.endswith("+cpu") else []


def check_torch_variant(versions: dict[str, str], variant: str, where: str = "") -> None:
    """The resolution is the build ``variant`` asked for: ``cpu`` as :func:`check_cpu_torch`; ``cuda``: on Linux a
    torch without ``+cpu`` and the nvidia packages it needs, and JAX's CUDA plugin where JAX is resolved."""
    if variant != "cuda":
        check_cpu_torch(versions, where)
        return
    if not sys.platform.startswith("linux"):
        return
    prefix = where + ": " if where else ""
    nvidia = sorted(name for name in versions if name.startswith("nvidia-"))
    torch = versions.get("torch")
    if torch and (torch.endswith("+cpu") or not nvidia):
        raise ConfigError(f"{TABLE}.requirements",
                          f"{prefix}{TORCH_VARIANT_ENV}=cuda, but torch resolved to {torch}, not a CUDA build "
                          f"({len(nvidia)} nvidia packages); allowed: a torch pin whose CUDA build your package "
                          "sources offer (PyPI's plain Linux wheel is one)")
    if "jax" in versions and f"jax-{JAX_CUDA_EXTRA}-plugin" not in versions:
        raise ConfigError(f"{TABLE}.requirements",
                          f"{prefix}{TORCH_VARIANT_ENV}=cuda, but JAX resolved without jax-{JAX_CUDA_EXTRA}-plugin; "
                          f"allowed: a jax==V pin whose jax[{JAX_CUDA_EXTRA}] your package sources offer")


# -- MOSAIC's own environment (scripts/bootstrap) ------------------------------
_PLANNED = re.compile(r"^\s*\+\s*([A-Za-z0-9_.\-]+)==(\S+)\s*$")


def _uv_install(python: str, args: list[str], sources: PackageSources,
                capture: bool) -> subprocess.CompletedProcess[str]:
    return subprocess.run([uv_binary(), "pip", "install", "--python", python, *sources.uv_args(), *args],
                          env=_uv_env(sources), text=True, capture_output=capture, stdin=subprocess.DEVNULL)


def install_into(python: str, args: list[str], variant: str = "cpu") -> None:
    """``uv pip install ARGS`` into ``python`` from the package sources pip is configured with. A dry run first
    checks the torch build it would install (``variant``), so that nothing is downloaded when it is the wrong one:
    on Linux the ``cpu`` variant wants ``+cpu`` (PyPI's plain wheel pulls in gigabytes of CUDA libraries), the
    ``cuda`` variant anything else."""
    sources = pip_sources(python)
    planned = _uv_install(python, ["--dry-run", *args], sources, capture=True)
    if planned.returncode != 0:
        raise EnvBuildError(_uv_message(planned.stderr) or f"uv exited with {planned.returncode}")
    versions = {m.group(1).lower(): m.group(2) for m in map(_PLANNED.match, planned.stderr.splitlines()) if m}
    torch = versions.get("torch")
    if torch and sys.platform.startswith("linux") and torch.endswith("+cpu") != (variant == "cpu"):
        wanted = "a +cpu build" if variant == "cpu" else "a CUDA build (not +cpu)"
        raise ConfigError(TORCH_VARIANT_ENV, f"{variant}: torch would resolve to {torch}, not {wanted}; allowed: "
                          f"package sources that offer {wanted} of the pinned torch (pip config list)")
    done = _uv_install(python, ["--quiet", *args], sources, capture=False)
    if done.returncode != 0:
        raise EnvBuildError(f"uv pip install exited with {done.returncode} (its error is above)")


def main(argv: list[str] | None = None) -> int:
    """``install [--variant cpu|cuda] ARGS...``: :func:`install_into` this Python. scripts/bootstrap calls it
    (``python -c``, with ``src`` on the path) for each step of MOSAIC's own environment, before MOSAIC is installed:
    the core package needs nothing beyond the standard library, and uv is installed by pip first."""
    argv = list(sys.argv[1:] if argv is None else argv)
    variant = "cpu"
    if argv[:1] != ["install"]:
        print("usage: install [--variant cpu|cuda] ARGS... (the arguments of uv pip install)", file=sys.stderr)
        return 2
    argv = argv[1:]
    if argv[:1] == ["--variant"] and len(argv) > 1:
        variant, argv = argv[1], argv[2:]
    try:
        if variant not in TORCH_VARIANTS:
            raise ConfigError("--variant", f"{variant!r} is not one of {', '.join(TORCH_VARIANTS)}")
        install_into(sys.executable, argv, variant)
    except UserError as exc:
        print(f"bootstrap: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0
