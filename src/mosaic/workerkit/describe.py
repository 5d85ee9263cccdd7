"""A worker describes itself: one JSON document from ``python -m <worker>.cli --describe``.

MOSAIC's core, daemon, CLI and GUI must work with workers they cannot import
(a worker may live in a Python environment of its own, with a numpy or a
gymnasium that conflicts with MOSAIC's). So every worker's command line prints
a *describe document*: who it is, what it can do, the JSON Schema of its whole
config, each algorithm's ``algo_params`` schema, the envs it offers, its
default config, how it treats the shared run fields and whether it can
evaluate. :data:`DOCUMENT_SCHEMA` is the schema of that document;
:func:`describe_program` builds it inside the worker's process. MOSAIC's side
(running it in the worker's interpreter, caching the answer) is
:mod:`mosaic.host.describe_cache`.
"""

from __future__ import annotations

import sys
from importlib import metadata
from typing import Any

from mosaic.errors import UserError
from mosaic.workerkit.program import WorkerProgram

DESCRIBE_VERSION = 1
#: The flags every worker's command line has (docs/worker-contract.md).
SHARED_FLAGS = ("--config", "--run-dir", "--validate", "--default-config", "--describe", "--schema",
                "--dry-run", "--evaluate", "--validate-many", "--player")

_STRINGS = {"type": "array", "items": {"type": "string"}}
_JSON_SCHEMA = {"type": "object"}  # a JSON Schema (checked with the metaschema by the tests)

#: The JSON Schema of a describe document.
DOCUMENT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "MOSAIC worker description",
    "type": "object",
    "required": ["describe_version", "worker", "cli_module", "entry_point", "python", "metadata",
                 "capabilities", "versions", "config_schema", "default_config", "algo_params_schemas",
                 "envs", "can_evaluate", "flags"],
    "additionalProperties": False,
    "properties": {
        "describe_version": {"const": DESCRIBE_VERSION},
        "worker": {"type": "string", "minLength": 1, "description": "the entry-point name"},
        "cli_module": {"type": "string", "description": "run as `python -m <cli_module>`"},
        "entry_point": {"type": "string", "description": "`module:function` of the mosaic.workers entry point"},
        "python": {"type": "string", "description": "the interpreter that described the worker"},
        "metadata": {
            "type": "object",
            "required": ["name", "version", "description", "upstream_library", "upstream_version", "license"],
            "properties": {key: {"type": "string"} for key in (
                "name", "version", "description", "upstream_library", "upstream_version", "license",
                "homepage")},
        },
        "capabilities": {
            "type": "object",
            "required": ["worker_type", "paradigms", "policy_configurations", "env_families", "algorithms",
                         "action_spaces", "observation_spaces", "max_agents"],
            "properties": {
                "worker_type": {"type": "string"},
                **{key: _STRINGS for key in ("paradigms", "policy_configurations", "env_families",
                                             "algorithms", "action_spaces", "observation_spaces")},
                "max_agents": {"type": "integer", "minimum": 1},
            },
        },
        "versions": {"type": "object", "additionalProperties": {"type": "string"},
                     "required": ["python", "mosaic-marl"],
                     "description": "installed versions where the worker runs: python, MOSAIC, the worker, "
                                    "its upstream library"},
        "config_schema": _JSON_SCHEMA,
        "default_config": {"type": "object"},
        "algo_params_schemas": {"type": "object", "additionalProperties": _JSON_SCHEMA,
                                "description": "algorithm -> JSON Schema of algo_params"},
        "envs": {"type": "object", "additionalProperties": _STRINGS,
                 "description": "env family -> the env ids this worker offers, as installed"},
        "can_evaluate": {"type": "boolean"},
        "can_serve_player": {"type": "boolean", "description": "`--player RUN` serves a trained policy to a "
                                                                "match (mosaic.workerkit.player)"},
        "flags": _STRINGS,
        "shared_fields": {
            "type": "object", "required": ["honoured", "refused"], "additionalProperties": False,
            "description": "how the worker treats the fields every run shares (mosaic.workerkit.run_fields): shared "
                           "field -> the library's own name (honoured) or why not (refused)",
            "properties": {"honoured": {"type": "object", "additionalProperties": {"type": "string"}},
                           "refused": {"type": "object", "additionalProperties": {"type": "string"}}},
        },
    },
}


# -- inside the worker's process ---------------------------------------------------
def _entry_point(name: str) -> str:
    from mosaic.workerkit.contract import ENTRY_POINT_GROUP

    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return ep.value
    return ""


def _cli_module(entry_point: str) -> str:
    """The module running now (``python -m X``), else the entry point package's ``cli``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return spec.name
    return f"{entry_point.split(':', 1)[0].split('.', 1)[0]}.cli" if entry_point else ""


def _installed(distribution: str) -> bool:
    try:
        metadata.version(distribution)
        return True
    except metadata.PackageNotFoundError:
        return False


def describe_program(program: WorkerProgram) -> dict[str, Any]:
    """The describe document of ``program`` (run in the worker's own interpreter)."""
    from mosaic import configkit
    from mosaic.workerkit.run_fields import field_map

    if program.describe is None:
        raise UserError(f"worker {program.name!r} has no describe function (WorkerProgram.describe)")
    missing = [name for name in program.packages.required if not _installed(name)]
    if missing:
        raise UserError(f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed where "
                        f"this worker runs ({sys.executable})")
    meta, caps = program.describe()
    entry_point = _entry_point(program.name)
    schemas: dict[str, Any] = {}
    if program.algo_params_schema is not None:
        for algorithm in caps.algorithms:
            schemas[algorithm] = program.algo_params_schema(algorithm)
    config_schema = (configkit.json_schema(program.config_class, title=f"{program.name} worker config")
                     if program.config_class is not None else {"type": "object"})
    # config files name their worker; build_config takes the key off before the typed config sees it
    config_schema.setdefault("properties", {})["worker"] = {
        "const": program.name, "description": "the worker this config is for"}
    shared = field_map(program.config_class)
    return {
        **({"shared_fields": shared} if shared is not None else {}),
        "describe_version": DESCRIBE_VERSION,
        "worker": program.name,
        "cli_module": _cli_module(entry_point),
        "entry_point": entry_point,
        "python": sys.executable,
        "metadata": meta.to_dict(),
        "capabilities": caps.to_dict(),
        "versions": program.packages.versions(),
        "config_schema": config_schema,
        "default_config": {**program.default_config(), "worker": program.name},
        "algo_params_schemas": schemas,
        "envs": {family: list(ids) for family, ids in (program.envs() if program.envs else {}).items()},
        "can_evaluate": program.evaluate is not None,
        "can_serve_player": program.make_player is not None,
        "flags": list(SHARED_FLAGS),
    }


def problems(document: Any) -> list[str]:
    """What is wrong with a describe document, as ``path: message`` lines (empty when valid)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(DOCUMENT_SCHEMA)
    found = [f"{'.'.join(str(p) for p in err.absolute_path) or '(document)'}: {err.message}"
             for err in sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))]
    if found:
        return found
    schemas = {"config_schema": document["config_schema"],
               **{f"algo_params_schemas.{a}": s for a, s in document["algo_params_schemas"].items()}}
    for key, schema in schemas.items():
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            found.append(f"{key}: not a JSON Schema: {exc.message}")
    return found
