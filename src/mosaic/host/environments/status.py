"""Whether a worker's environment is there, up to date and working."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic.host.environments.layout import CHECK_TIMEOUT_S, RECORD_NAME, envs_root, overlay_dir, python_in
from mosaic.host.environments.sources import WorkerSource, scan


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
    gone = [name for name, _ in source.overlays if not overlay_dir(env, name).is_dir()]
    if facts is not None and gone and record.get("pins_digest") == source.pins_digest:
        facts, why = None, f"overlay gone: {overlay_dir(env, gone[0])} does not exist"
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
