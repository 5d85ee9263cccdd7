"""Where and with what a run ran: versions and host, for manifests."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import socket
import sys
from importlib import metadata
from typing import Any, Iterable, Mapping


def installed_version(dist: str) -> str:
    """One distribution's installed version, or ``"not installed"`` (cheap: no import)."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def package_versions(names: Iterable[str]) -> dict[str, str]:
    """Installed versions of ``names`` (missing ones are left out), plus python."""
    versions = {"python": platform.python_version()}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return versions


def host_info() -> dict[str, Any]:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "python_executable": sys.executable,
    }


def config_digest(config: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a config: equal configs, equal digests."""
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
