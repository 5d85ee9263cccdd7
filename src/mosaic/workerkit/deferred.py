"""A module a library imports at its top for a feature MOSAIC's runs never use, imported at first use instead.

Some libraries import, when they are imported, an optional service's client that a MOSAIC run never calls:
``jumanji.training.loggers`` imports Neptune for its ``NeptuneLogger`` (about 2.5 s of every Jumanji run's
start: Neptune's dependencies build a URI grammar when they are imported), a logger the worker replaces with
its own. :func:`defer` puts a stand-in module under such a name in ``sys.modules`` before the library is
imported. The library's ``import neptune`` or ``from neptune import new`` binds the stand-in; the first use
of one of its attributes imports the real module and forwards to it from then on. Nothing changes in the
library: if it never uses the module, the module is never imported; if it does, the module behaves as
before and its import is paid then.

A name already imported is left as it is.
"""

from __future__ import annotations

import importlib
import sys
import threading
import types

_LOCK = threading.RLock()


class Deferred(types.ModuleType):
    """Stands for the module ``name`` until one of its attributes is used."""

    def __init__(self, name: str) -> None:
        super().__init__(name, f"stands for {name}, imported at its first use (mosaic.workerkit.deferred)")
        self.__dict__["_real"] = None

    def _load(self) -> types.ModuleType:
        with _LOCK:
            real = self.__dict__["_real"]
            if real is None:
                root = self.__name__.split(".")[0]
                for name in [n for n, m in sys.modules.items()
                             if isinstance(m, Deferred) and (n == root or n.startswith(root + "."))]:
                    del sys.modules[name]  # the real import must not find the stand-ins
                real = importlib.import_module(self.__name__)
                self.__dict__["_real"] = real
            return real

    def __getattr__(self, attribute: str):
        if attribute.startswith("__") and attribute.endswith("__"):
            raise AttributeError(attribute)  # no __path__, __file__, ...: the import system asks, nothing is used
        child = sys.modules.get(f"{self.__name__}.{attribute}")
        if isinstance(child, Deferred):  # ``from neptune import new``: the submodule's own stand-in
            return child
        return getattr(self._load(), attribute)


def defer(*names: str) -> list[str]:
    """Stand-ins for ``names`` (a package and the submodules the library imports from it, parents first)
    that are not imported yet; the names deferred."""
    deferred = []
    with _LOCK:
        for name in names:
            if name not in sys.modules:
                sys.modules[name] = Deferred(name)
                deferred.append(name)
    return deferred


def is_deferred(name: str) -> bool:
    """Whether ``name`` is still a stand-in (a first use removes every stand-in of its package)."""
    return isinstance(sys.modules.get(name), Deferred)
