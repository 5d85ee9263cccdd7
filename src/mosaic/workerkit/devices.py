"""Which GPUs a worker's library sees, and ``resources.gpus`` checked against them.

The one place that answers "is a GPU visible, and how many" for a library, in
the process that asks (a worker's own environment: that is where its torch or
JAX lives). Nothing heavy is imported until a question needs it: a config with
``resources.gpus`` 0 never imports torch or JAX here.

* ``torch``: ``torch.cuda.device_count()`` (``CUDA_VISIBLE_DEVICES`` respected; a CPU
  build of torch sees none);
* ``jax``: ``len(jax.devices("gpu"))``, asked in a short child process of the same
  interpreter, so that the worker's own JAX is not initialised before the run sets its
  XLA flags; without a GPU plugin installed (``jax-cuda12-plugin`` …) the answer is 0
  without starting anything; ``JAX_PLATFORMS=cpu`` in the environment also means none;
* anything else: none (the library has no GPU path MOSAIC knows of).

:func:`require_gpus` turns a request into the shared field's error:
``resources.gpus: 1 requested, but torch sees no GPU on this machine; allowed: 0``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from importlib import metadata

from mosaic.errors import ConfigError

FIELD = "resources.gpus"
#: Libraries :func:`gpu_count` knows how to ask.
LIBRARIES = ("torch", "jax")
#: Distributions that give JAX a GPU backend (any one of them installed: worth asking JAX).
JAX_GPU_PLUGINS = ("jax-cuda12-plugin", "jax-cuda13-plugin", "jax-rocm60-plugin", "jax-rocm7-plugin",
                   "jax-cuda12-pjrt", "jax-cuda13-pjrt")
#: How long the child process that asks JAX may take (importing JAX and starting its GPU backend).
JAX_PROBE_TIMEOUT_S = 120.0


def gpu_count(library: str) -> int:
    """How many GPUs ``library`` sees in this process's environment (0 when it has none, or cannot tell)."""
    if library == "torch":
        return _torch_gpus()
    if library == "jax":
        return _jax_gpus()
    return 0


def _torch_gpus() -> int:
    if importlib.util.find_spec("torch") is None:
        return 0
    try:
        import torch

        return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0
    except Exception:  # a broken CUDA install reads as none
        return 0


def _installed(distribution: str) -> bool:
    try:
        metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


def _jax_gpus() -> int:
    if importlib.util.find_spec("jax") is None:
        return 0
    platforms = os.environ.get("JAX_PLATFORMS", "").strip().lower()
    if platforms and not ({"cuda", "gpu", "rocm"} & {p.strip() for p in platforms.split(",")}):
        return 0  # JAX is told to use only other platforms (cpu): it will see no GPU
    if not any(_installed(name) for name in JAX_GPU_PLUGINS):
        return 0  # a CPU-only jaxlib: no GPU backend to ask
    probe = ("import json, jax\n"
             "try:\n    n = len(jax.devices('gpu'))\nexcept RuntimeError:\n    n = 0\n"
             "print(json.dumps({'gpus': n}))\n")
    try:
        proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              timeout=JAX_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL,
                              env={**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"})
    except (OSError, subprocess.TimeoutExpired):
        return 0
    try:
        return int(json.loads(proc.stdout.strip().splitlines()[-1])["gpus"])
    except (ValueError, IndexError, KeyError, TypeError):
        return 0


def _number(value: float) -> str:
    return f"{value:g}"


def require_gpus(requested: float, available: int, library: str, max_gpus: float | None = None,
                 field: str = FIELD) -> None:
    """Refuse ``requested`` GPUs (the shared ``resources.gpus``) that ``library`` cannot have.

    ``available``: what :func:`gpu_count` answered. A fraction (0.5) asks for a share of one
    GPU; more than one must be a whole number. ``max_gpus``: the most the worker's library can
    use at all (CleanRL's scripts and XuanCe: one device), refused first. Passes silently when
    ``requested`` is 0 or fits.
    """
    if requested <= 0:
        return
    if max_gpus is not None and requested > max_gpus:
        raise ConfigError(field, f"{_number(requested)} requested, but {library} trains on one device at most "
                                 f"here; allowed: 0 to {_number(max_gpus)}")
    if requested > 1 and requested != int(requested):
        raise ConfigError(field, f"{_number(requested)} requested: a share of a GPU is at most 1, more than one "
                                 f"GPU is a whole number; allowed: 0 to 1, or 2, 3, ...")
    needed = 1 if requested < 1 else int(requested)
    if available <= 0:
        raise ConfigError(field, f"{_number(requested)} requested, but {library} sees no GPU on this machine; "
                                 "allowed: 0")
    if needed > available:
        raise ConfigError(field, f"{_number(requested)} requested, but {library} sees only {available} GPU"
                                 f"{'s' if available != 1 else ''} on this machine; allowed: 0 to {available}")


def check_gpus(requested: float, library: str, max_gpus: float | None = None, field: str = FIELD) -> int:
    """:func:`require_gpus` against what ``library`` sees here; asks only when ``requested`` > 0.

    Returns the GPUs seen (0 without asking when none were requested)."""
    if requested <= 0:
        return 0
    if max_gpus is not None and requested > max_gpus:
        require_gpus(requested, 0, library, max_gpus, field)  # refused without asking the library
    available = gpu_count(library)
    require_gpus(requested, available, library, max_gpus, field)
    return available


def devices_used(requested: float) -> int:
    """How many devices a run that asked for ``requested`` GPUs trains on (a share of one GPU: one)."""
    if requested <= 0:
        return 0
    return 1 if requested < 1 else int(requested)
