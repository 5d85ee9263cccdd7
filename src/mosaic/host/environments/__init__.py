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
tells whether the declaration changed since. ``overlays`` (name -> exact pins)
go, without their dependencies, into ``<env>/overlays/<name>/``, which only the
worker's scripts that need them put on their path.

uv reads no pip configuration, so the package sources pip is configured with
(``pip config list``: index URLs, find-links, constraint files, certificate)
are passed to it explicitly, with pip's rule that every source competes on
version (``--index-strategy unsafe-best-match``).

Worker source trees are found in ``$MOSAIC_WORKER_PATH`` (folders, each a
worker tree or a folder of them), then through the installed ``mosaic.workers``
entry points that come from a local tree, then in the ``workers/`` folder of
MOSAIC's own source tree. Core module: nothing heavy is imported."""

from __future__ import annotations

from mosaic.host.environments.layout import (  # noqa: F401
    CHECK_TIMEOUT_S,
    EnvBuildError,
    LOCK_NAME,
    Log,
    NO_DEPS_LOCK_NAME,
    OVERLAYS_DIR,
    RECORD_NAME,
    RECORD_VERSION,
    RESOLVE_TIMEOUT_S,
    STATUSES,
    TABLE,
    TABLE_KEYS,
    WORKER_PATH_VAR,
    _LOCKED,
    _NAME,
    envs_root,
    overlay_dir,
    overlay_lock_name,
    python_in,
)
from mosaic.host.environments.sources import (  # noqa: F401
    Scan,
    WorkerSource,
    _candidate_roots,
    _load_toml,
    _requirements,
    _tree_of,
    _trees,
    mosaic_source_tree,
    read_tree,
    scan,
)
from mosaic.host.environments.uv import (  # noqa: F401
    PackageSources,
    _uv,
    _uv_message,
    check_cpu_torch,
    locked_versions,
    pip_sources,
    uv_binary,
)
from mosaic.host.environments.status import (  # noqa: F401
    EnvStatus,
    _CHECK,
    list_envs,
    probe,
    read_record,
    status,
)
from mosaic.host.environments.build import (  # noqa: F401
    BuildResult,
    _build_into,
    _locked,
    _swap_in,
    _sweep,
    _uv_version,
    build,
    compile_bytecode,
    interpreter_for,
    remove,
    resolve,
    resolve_overlays,
    site_packages,
)
