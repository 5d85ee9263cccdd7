"""``mosaic workers``: installed workers, their capabilities, broken ones with their reasons."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mosaic.clients.cli.common import _table, fitted_table
from mosaic.host.discovery import discover_workers


def _type_text(schema: dict[str, Any]) -> str:
    from mosaic.configkit import json_types

    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    options = schema.get("anyOf") or ()
    words = [str(w) for o in options for w in ([o["const"]] if "const" in o else o.get("enum", ()))]
    if words:  # the words first, then the types ("one of auto or number")
        types = sorted({t for o in options if "enum" not in o and "const" not in o for t in json_types(o)})
        return "one of " + " or ".join([", ".join(words), *types])
    return " or ".join(sorted(json_types(schema))) or "any"


def _field_lines(schema: dict[str, Any], prefix: str = "") -> list[str]:
    """One line per config field: path, type, default and help (nested sections flattened)."""
    lines = []
    for name, prop in (schema.get("properties") or {}).items():
        if name in ("run_id", "worker"):
            continue
        path = f"{prefix}{name}"
        if prop.get("type") == "object" and prop.get("properties"):
            lines += _field_lines(prop, f"{path}.")
            continue
        default = json.dumps(prop["default"]) if "default" in prop else "(required)"
        lines.append(f"  {path} = {default}  [{_type_text(prop)}]  {prop.get('description', '')}".rstrip())
    return lines


def _estimate(resources: dict[str, Any]) -> list[str]:
    """The worker's own estimate of what a run takes: what the daemon reserves when resources.cpus is null."""
    if not resources:
        return []
    return [f"  a run's estimate (the daemon reserves it when resources.cpus is null): {resources.get('cpus')} CPUs, "
            f"{resources.get('memory_mb')} MB, {resources.get('gpus')} GPUs"]


def describe_text(document: dict[str, Any]) -> str:
    """What `mosaic workers show NAME` prints: the worker's description, for a person."""
    meta, caps = document["metadata"], document["capabilities"]
    out = [f"{document['worker']} {meta['version']}: {meta['description']}",
           f"  upstream: {meta['upstream_library']} {meta['upstream_version']} ({meta['license']})",
           f"  python: {document['python']}",
           f"  algorithms: {', '.join(caps['algorithms'])}",
           f"  paradigms: {', '.join(caps['paradigms'])}; policies: {', '.join(caps['policy_configurations'])}",
           f"  max agents: {caps['max_agents']}; evaluates: {'yes' if document['can_evaluate'] else 'no'}; "
           f"checkpoints: {'yes' if caps.get('supports_checkpointing') else 'no'}; "
           f"self-play: {'yes' if caps.get('supports_self_play') else 'no'}; "
           f"pause/resume: {'yes' if caps.get('supports_pause_resume') else 'no'}; "
           f"serves a player: {'yes' if document.get('can_serve_player') else 'no'}; "
           f"population training: {'yes' if caps.get('supports_population') else 'no'}; "
           f"needs a GPU: {'yes' if caps.get('requires_gpu') else 'no'}",
           f"  spaces: actions {', '.join(caps.get('action_spaces') or ()) or '-'}; "
           f"observations {', '.join(caps.get('observation_spaces') or ()) or '-'}",
           *_estimate(caps.get("resources") or {}),
           "env families:"]
    for family, ids in document["envs"].items():
        shown = ", ".join(ids[:8]) + (f", ... ({len(ids) - 8} more, {len(ids)} in all)" if len(ids) > 8 else "")
        out.append(f"  {family}: {shown}")
    shared = document.get("shared_fields")
    if shared:
        out.append("shared fields honoured (-> what they become in the library):")
        out += [f"  {path}: {text}" for path, text in shared["honoured"].items()]
        out.append("shared fields refused (and why):")
        out += [f"  {path}: {text}" for path, text in shared["refused"].items()]
    out.append("config fields (path = default  [type]  meaning):")
    out += _field_lines(document["config_schema"])
    if document["algo_params_schemas"]:
        out.append("algo_params per algorithm: `mosaic workers show "
                   f"{document['worker']} --algorithm ALGO`")
    out.append(f"the whole description as JSON: `mosaic workers show {document['worker']} --json`")
    return "\n".join(out)


def cmd_show_worker(args: argparse.Namespace) -> int:
    from mosaic.host.daemon.catalog import WorkerCatalog
    from mosaic.errors import UserError

    catalog = WorkerCatalog()
    catalog.refresh()
    document = catalog.description(args.name)
    if args.algorithm:
        schemas = document["algo_params_schemas"]
        offered = list(schemas) or list(document["capabilities"]["algorithms"])  # those without algo_params too
        wanted = next((a for a in offered if a.lower() == args.algorithm.lower()), None)
        if wanted is None:
            from mosaic.errors import one_of

            raise UserError(f"--algorithm: {one_of(args.algorithm, offered)}")
        schema = schemas.get(wanted) or {"type": "object", "properties": {}}
        if args.json:
            print(json.dumps(schema, indent=2))
        else:
            print(f"algo_params of {document['worker']} {wanted}:")
            print("\n".join(_field_lines(schema)) or "  (none)")
        return 0
    print(json.dumps(document, indent=2) if args.json else describe_text(document))
    return 0


def _check_filters(workers: list, args: argparse.Namespace) -> None:
    """A filter value that no installed worker offers is a mistake (a typo, another spelling), not an empty
    list: refused naming the values the installed workers offer."""
    from mosaic.errors import UserError, one_of

    for option, wanted, offered_by in (("--env-family", args.env_family, lambda c: c.env_families),
                                       ("--paradigm", args.paradigm, lambda c: c.paradigms),
                                       ("--algorithm", args.algorithm, lambda c: c.algorithms)):
        offered = sorted({v for w in workers for v in offered_by(w.capabilities)}, key=str.lower)
        if wanted is not None and workers and wanted.lower() not in {v.lower() for v in offered}:
            raise UserError(f"{option}: no installed worker offers it; {one_of(wanted, offered)}")


def cmd_workers(args: argparse.Namespace) -> int:
    if args.action == "show":
        if not args.name:
            from mosaic.errors import UserError

            raise UserError("NAME: `mosaic workers show NAME` needs a worker name; `mosaic workers` lists them")
        return cmd_show_worker(args)
    found = discover_workers()
    _check_filters(found.workers, args)
    workers = found.filter(args.env_family, args.paradigm, args.algorithm)
    if args.json:
        print(json.dumps({
            "workers": [{"name": w.name, "entry_point": w.entry_point, "python": w.python or sys.executable,
                         "own_environment": w.python is not None,
                         "metadata": w.metadata.to_dict(), "capabilities": w.capabilities.to_dict()}
                        for w in workers],
            "broken": [{"name": b.name, "entry_point": b.entry_point, "reason": b.reason}
                       for b in found.broken]}, indent=2))
        return 0
    rows = [[w.name, w.metadata.version, f"{w.metadata.upstream_library} {w.metadata.upstream_version}",
             ",".join(w.capabilities.algorithms), ",".join(w.capabilities.env_families),
             ",".join(w.capabilities.policy_configurations),
             "own" if w.python else "mosaic's"] for w in workers]
    header = ["WORKER", "VERSION", "UPSTREAM", "ALGORITHMS", "ENV FAMILIES", "POLICIES", "PYTHON ENV"]
    print(fitted_table(rows, header, wrap={3, 4, 5}) if rows else "no workers match")
    for b in found.broken:
        print(f"broken: {b.name} ({b.entry_point}): {b.reason}")
    from mosaic.runs import mosaic_home

    # on stderr: stdout stays the table (or "no workers match") for scripts
    print(f"(worker environments looked for in MOSAIC_HOME={mosaic_home()}, under envs/)", file=sys.stderr)
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("workers", help="list installed workers; `workers show NAME` describes one",
                       description="List the installed workers, or describe one: its algorithms, env families, "
                                   "capabilities, which shared fields it honours, and every config field.")
    p.add_argument("action", nargs="?", choices=("list", "show"), default="list",
                   help="list (default), or show one worker's description")
    p.add_argument("name", nargs="?", metavar="NAME", help="show: the worker to describe")
    p.add_argument("--env-family", help="list: workers offering this env family (mpe, gymnasium, atari, ...)")
    p.add_argument("--paradigm", help="list: workers of this paradigm (single_agent or multi_agent)")
    p.add_argument("--algorithm", help="list: workers offering it; show: that algorithm's algo_params")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_workers)
