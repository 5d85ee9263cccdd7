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
