"""Answers worth keeping between processes, as JSON files in MOSAIC's cache folder.

Some answers take seconds and change only when files change: a worker's
describe document (its interpreter has to start and import the worker), or the
options an upstream script's argument parser declares (reading them imports
the script, and with it torch). :func:`memo` keeps such an answer in
``$MOSAIC_CACHE_DIR/<kind>/<hash of key>.json`` (default ``~/.cache/mosaic``).
The caller puts into ``key`` everything the answer depends on (a file's
content hash, a version); nothing else invalidates an entry.

A cache that cannot be read or written only costs time; an answer that is not
plain JSON (it would not come back equal) is computed every time.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

CACHE_VAR = "MOSAIC_CACHE_DIR"


def cache_root() -> Path:
    base = os.environ.get(CACHE_VAR) or os.path.join(os.environ.get("XDG_CACHE_HOME") or
                                                     os.path.expanduser("~/.cache"), "mosaic")
    return Path(base)


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes: what "this file changed" means for a cache key."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def entry_path(kind: str, key: Mapping[str, Any]) -> Path:
    digest = hashlib.sha256(json.dumps(dict(key), sort_keys=True, default=str).encode()).hexdigest()[:32]
    return cache_root() / kind / f"{digest}.json"


def memo(kind: str, key: Mapping[str, Any], compute: Callable[[], Any], *, refresh: bool = False) -> Any:
    """``compute()``, or the answer it gave before for the same ``kind`` and ``key``."""
    path = entry_path(kind, key)
    if not refresh:
        try:
            return json.loads(path.read_text(encoding="utf-8"))["answer"]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    answer = compute()
    try:
        text = json.dumps({"key": dict(key), "answer": answer}, allow_nan=False)
    except (TypeError, ValueError):
        return answer
    if json.loads(text)["answer"] != answer:  # tuples, non-string keys: would not come back the same
        return answer
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)  # readers see the old entry or the whole new one
    except OSError:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
    return answer
