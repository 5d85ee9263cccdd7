"""Where worker environments live, what a build records, and how a failed build is reported."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable
from mosaic.errors import UserError
from mosaic.runs import mosaic_home


TABLE = "tool.mosaic.environment"


TABLE_KEYS = ("requirements", "no_deps", "overlays")


WORKER_PATH_VAR = "MOSAIC_WORKER_PATH"


RECORD_NAME = "mosaic-env.json"


LOCK_NAME = "requirements.lock"


NO_DEPS_LOCK_NAME = "no-deps.lock"


#: An environment's overlays: ``<env>/overlays/<name>/``, each a folder of packages (``--target``) that one
#: script puts first on its path (a version the environment's other packages cannot share).
OVERLAYS_DIR = "overlays"


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


def overlay_dir(env: Path, name: str) -> Path:
    """The folder overlay ``name`` of the environment ``env`` is installed into."""
    return env / OVERLAYS_DIR / name


def overlay_lock_name(name: str) -> str:
    """The lock (beside the environment's own) of overlay ``name``."""
    return f"overlay-{name}.lock"


def python_in(env: Path) -> Path:
    """The interpreter of a venv (not resolved: resolving would leave the venv)."""
    return env / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
