"""Plain helpers for config schemas and values (no Qt): defaults, dotted paths, error lines, and the pickers of the shared run fields."""

from __future__ import annotations

import json
from typing import Any

from mosaic.clients.gui.form_fields import Suggest
from mosaic.configkit import get_path


# -- plain helpers (no Qt) --------------------------------------------------------------
#: A value a config does not give (:func:`mosaic.configkit.get_path`'s default, where None is a value).
_MISSING = object()


def _defaults(schema: dict) -> dict:
    out = {}
    for name, prop in (schema.get("properties") or {}).items():
        if "default" in prop:
            out[name] = prop["default"]
        elif prop.get("type") == "object" and prop.get("properties"):
            out[name] = _defaults(prop)
    return out


def _default_at(schema: dict, path: str) -> Any:
    node: Any = schema
    default: Any = None
    for part in path.split("."):
        props = (node or {}).get("properties") or {}
        if part not in props:
            return None
        parent_default = default
        node = props[part]
        default = node.get("default", parent_default.get(part) if isinstance(parent_default, dict) else None)
    return default


def split_error(message: str, paths: list[str]) -> tuple[str | None, str]:
    """("environment.env_id", "...") from a worker's "environment.env_id: ..." error line."""
    head, sep, rest = message.partition(": ")
    if sep and " " not in head and head:
        return head, rest
    for path in sorted(paths, key=len, reverse=True):
        if message.startswith(path):
            return path, message[len(path):].lstrip(": ")
    return None, message


#: Where every worker's config keeps what the form offers pickers for (mosaic.workerkit.run_fields).
ALGORITHM_PATH = "algorithm"


ALGO_PARAMS_PATH = "algo_params"


FAMILY_PATH = "environment.family"


ENV_ID_PATH = "environment.env_id"


RESTORE_PATH = "checkpoint.restore_from"


def suggestions_from_envs(envs: dict[str, list[str]]) -> Suggest:
    """``environment.env_id`` suggests the ids of the chosen ``environment.family`` (all ids when none is)."""

    def suggest(path: str, values: dict) -> list[str] | None:
        if path != ENV_ID_PATH:
            return None
        family = get_path(values, FAMILY_PATH, None)
        if isinstance(family, str) and family in envs:
            return list(envs[family])
        return sorted({e for ids in envs.values() for e in ids})

    return suggest


def _has(schema: dict, path: str) -> dict | None:
    node: Any = schema
    for part in path.split("."):
        node = (node.get("properties") or {}).get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


def with_shared_choices(schema: dict, document: dict) -> dict:
    """``schema`` with pickers from the worker's description: its algorithms and its env families.

    Nothing is guessed from field names: the shared fields (mosaic.workerkit.run_fields) are where
    every worker keeps the algorithm and the env, and the describe document says what
    the worker offers.
    """
    schema = json.loads(json.dumps(schema))
    algorithms = list((document.get("capabilities") or {}).get("algorithms") or [])
    families = list(document.get("envs") or {})
    for path, choices in ((ALGORITHM_PATH, algorithms), (FAMILY_PATH, families)):
        prop = _has(schema, path)
        if prop is not None and choices and "enum" not in prop and "anyOf" not in prop:
            prop["enum"] = choices
    return schema
