"""A worker's describe document, from MOSAIC's side: run in the worker's own interpreter, cached.

The worker prints its document (``python -m <worker>.cli --describe``,
:mod:`mosaic.workerkit.describe`); this module runs that command with the
worker's interpreter, checks the answer against the document's schema and keeps
it in ``$MOSAIC_CACHE_DIR`` (default ``~/.cache/mosaic``), keyed by the
interpreter, the distributions installed in its site-packages (names and
versions) and the modification times of the worker's and MOSAIC's source files,
so an upgrade, a rebuilt environment or an edited editable install all describe
again.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterable

from mosaic import diskcache
from mosaic.errors import UserError
from mosaic.workerkit.describe import DESCRIBE_VERSION, problems

DESCRIBE_TIMEOUT_S = 180.0
CACHE_VAR = diskcache.CACHE_VAR


def _site_packages(python: str) -> list[Path]:
    """The site-packages folders of a venv's (or an installation's) interpreter, without running it."""
    prefix = Path(python).parent.parent
    return sorted(prefix.glob("lib/python3*/site-packages")) + sorted(prefix.glob("Lib/site-packages"))


def _newest_mtime(folders: Iterable[Path]) -> int:
    newest = 0
    for folder in folders:
        if folder.is_dir():
            for path in folder.rglob("*.py"):
                try:
                    newest = max(newest, path.stat().st_mtime_ns)
                except OSError:
                    continue
        elif folder.is_file():
            newest = max(newest, folder.stat().st_mtime_ns)
    return newest


def cache_key(python: str, cli_module: str, sources: Iterable[Path] = ()) -> str:
    """What a describe answer depends on: interpreter, installed distributions, source files."""
    import mosaic

    dists: list[str] = []
    for site in _site_packages(python):
        try:
            dists += sorted(p.name for p in site.iterdir() if p.name.endswith((".dist-info", ".egg-link", ".pth")))
        except OSError:
            continue
    parts = {"python": os.path.abspath(python), "cli_module": cli_module, "dists": dists,
             "sources": _newest_mtime([Path(mosaic.__file__).parent, *sources]),
             "describe_version": DESCRIBE_VERSION}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:32]


class DescribeError(UserError):
    """The worker's interpreter could not describe it (not importable, crashed, bad document)."""


def run_describe(python: str, cli_module: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """``python -m cli_module --describe``, checked against :data:`DOCUMENT_SCHEMA`."""
    cmd = [python, "-m", cli_module, "--describe"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=DESCRIBE_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, env=env)
    except FileNotFoundError:
        raise DescribeError(f"interpreter {python} does not exist") from None
    except subprocess.TimeoutExpired:
        raise DescribeError(f"`{' '.join(cmd)}` did not answer within {DESCRIBE_TIMEOUT_S:g} s") from None
    if proc.returncode != 0:
        lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
        raise DescribeError(f"`{cli_module} --describe` failed in {python}: "
                            f"{lines[-1] if lines else f'exit code {proc.returncode}'}")
    try:
        document = json.loads(proc.stdout)
    except ValueError:
        raise DescribeError(f"`{cli_module} --describe` printed no JSON document in {python}") from None
    found = problems(document)
    if found:
        raise DescribeError(f"`{cli_module} --describe` printed an invalid document: {found[0]}")
    return document


def load(python: str, cli_module: str, sources: Iterable[Path] = (), *, refresh: bool = False) -> dict[str, Any]:
    """The describe document of ``cli_module`` in ``python``, from the cache when nothing changed."""
    key = {"describe": cache_key(python, cli_module, list(sources))}
    return diskcache.memo("describe", key, lambda: run_describe(python, cli_module), refresh=refresh)
