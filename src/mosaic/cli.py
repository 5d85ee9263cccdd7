"""The ``mosaic`` command line.

User mistakes print one ``mosaic: error: ...`` line and exit with code 2;
a failed run exits 1 and a cancelled one 3.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any, Sequence

from mosaic import __version__
from mosaic.discovery import Discovery, discover_workers
from mosaic.errors import UserError
from mosaic.launcher import run_in_foreground, validate_config, worker_command
from mosaic.lifecycle import EXIT_CANCELLED, EXIT_FAILED
from mosaic.progress import ProgressView
from mosaic.provenance import host_info, package_versions
from mosaic.runs import RunDir, RunStore, new_run_id, validate_run_id
from mosaic.telemetry import TERMINAL_TYPES
from mosaic.worker_cli import load_config_data

#: Worker whose default config ``mosaic run`` uses without a CONFIG, best first.
DEFAULT_WORKERS = ("ray", "random")


def _table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [fmt.format(*header), fmt.format(*("-" * w for w in widths))]
    lines += [fmt.format(*map(str, r)) for r in rows]
    return "\n".join(line.rstrip() for line in lines)


# -- mosaic workers ------------------------------------------------------------
def cmd_workers(args: argparse.Namespace) -> int:
    found = discover_workers()
    workers = found.filter(args.env_family, args.paradigm, args.algorithm)
    if args.json:
        print(json.dumps({
            "workers": [{"name": w.name, "entry_point": w.entry_point,
                         "metadata": w.metadata.to_dict(), "capabilities": w.capabilities.to_dict()}
                        for w in workers],
            "broken": [{"name": b.name, "entry_point": b.entry_point, "reason": b.reason}
                       for b in found.broken]}, indent=2))
        return 0
    rows = [[w.name, w.metadata.version, f"{w.metadata.upstream_library} {w.metadata.upstream_version}",
             ",".join(w.capabilities.algorithms), ",".join(w.capabilities.env_families),
             ",".join(w.capabilities.policy_configurations)] for w in workers]
    print(_table(rows, ["WORKER", "VERSION", "UPSTREAM", "ALGORITHMS", "ENV FAMILIES", "POLICIES"])
          if rows else "no workers match")
    for b in found.broken:
        print(f"broken: {b.name} ({b.entry_point}): {b.reason}")
    return 0


# -- mosaic run ----------------------------------------------------------------
def _default_config(found: Discovery) -> dict[str, Any]:
    for name in DEFAULT_WORKERS:
        if name in found.names():
            worker = found.get(name)
            proc = subprocess.run([*worker_command(worker), "--default-config"],
                                  capture_output=True, text=True, timeout=120)
            if proc.returncode == 0:
                return json.loads(proc.stdout)
            raise UserError(f"worker {name!r} could not print its default config: "
                            f"{proc.stderr.strip().splitlines()[-1:] or proc.returncode}")
    raise UserError(f"no default worker installed (looked for {', '.join(DEFAULT_WORKERS)})")


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """``--set training.total_timesteps=400``: values are JSON, else plain strings."""
    for item in overrides:
        path, sep, raw = item.partition("=")
        if not sep or not path or any(not part for part in path.split(".")):
            raise UserError(f"--set: expected KEY.PATH=VALUE, got {item!r}")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        node = data
        *parents, leaf = path.split(".")
        for part in parents:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise UserError(f"--set: {path!r}: {part!r} is not an object in the config")
            node = child
        node[leaf] = value
    return data


def cmd_run(args: argparse.Namespace) -> int:
    found = discover_workers()
    data = load_config_data(args.config) if args.config else _default_config(found)
    data = apply_overrides(data, args.set)
    name = args.worker or data.get("worker")
    if not name:
        raise UserError(f"worker: not given; add \"worker\": NAME to the config or pass --worker "
                        f"(installed: {', '.join(found.names()) or 'none'})")
    worker = found.get(name)
    run_id = validate_run_id(args.run_id or data.get("run_id") or new_run_id())
    store = RunStore()
    if store.exists(run_id):
        raise UserError(f"run_id: a run named {run_id!r} already exists")
    config = validate_config(worker, {**data, "worker": name, "run_id": run_id})
    run = store.create(run_id, config, {
        "worker": name, "worker_version": worker.metadata.version, "status": "created",
        "created_at": time.time(), "host": host_info(), "versions": package_versions(["mosaic-marl"]),
    })
    view = ProgressView()
    print(f"run folder: {run.root}", file=sys.stderr)
    outcome = run_in_foreground(worker, run, on_event=view,
                                on_interrupt=lambda: print("\ncancelling…", file=sys.stderr))
    view.close()
    term = outcome.terminal
    if outcome.status == "completed":
        print(f"run {run_id} completed: {json.dumps(term.get('summary', {}))}")
        return 0
    if outcome.status == "cancelled":
        print(f"run {run_id} cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    print(f"run {run_id} failed: {term.get('error_type', '?')}: {term.get('message', '')}",
          file=sys.stderr)
    return EXIT_FAILED


# -- mosaic runs / show / logs -------------------------------------------------
def _summary_row(run: RunDir) -> list[str]:
    m = run.read_manifest()
    env = m.get("env") or {}
    last = run.last_event("metrics") or {}
    ret = last.get("episode_return_mean")
    return [run.run_id, m.get("status", "?"), m.get("worker", "?"),
            env.get("env_id", "?") if isinstance(env, dict) else str(env), m.get("algorithm", "-"),
            str(last.get("timesteps_total", "-")), f"{ret:.3f}" if isinstance(ret, (int, float)) else "-"]


def cmd_runs(args: argparse.Namespace) -> int:
    runs = RunStore().list()[-args.limit:] if args.limit else RunStore().list()
    if not runs:
        print("no runs yet")
        return 0
    print(_table([_summary_row(r) for r in runs],
                 ["RUN", "STATUS", "WORKER", "ENV", "ALGORITHM", "TIMESTEPS", "RETURN"]))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    run = RunStore().resolve(args.run)
    print(json.dumps({"run_dir": str(run.root), "manifest": run.read_manifest(),
                      "last_metrics": run.last_event("metrics")}, indent=2))
    return 0


def _format_event(e: dict[str, Any]) -> str:
    stamp = time.strftime("%H:%M:%S", time.localtime(e.get("ts", 0)))
    body = {k: v for k, v in e.items() if k not in ("v", "type", "run_id", "seq", "ts")}
    if e.get("type") == "log":
        return f"{stamp} #{e.get('seq')} log[{e.get('level')}] {e.get('message', '')}"
    return f"{stamp} #{e.get('seq')} {e.get('type')} {json.dumps(body, default=str)}"


def cmd_logs(args: argparse.Namespace) -> int:
    run = RunStore().resolve(args.run)
    out = sys.stdout
    with run.telemetry_path.open("rb") as fh:
        partial = b""
        while True:
            chunk = fh.readline()
            if chunk.endswith(b"\n"):
                line, partial = partial + chunk, b""
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                out.write((line.decode("utf-8", "replace") if args.raw else _format_event(event) + "\n"))
                out.flush()
                if args.follow and event.get("type") in TERMINAL_TYPES:
                    return 0
                continue
            partial += chunk
            if not args.follow:
                return 0
            status = run.read_manifest().get("status")
            if status in ("completed", "failed", "cancelled") and not chunk:
                return 0
            time.sleep(0.2)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mosaic", description="MOSAIC multi-agent RL platform")
    parser.add_argument("--version", action="version", version=f"mosaic {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("workers", help="list installed workers and their capabilities")
    p.add_argument("--env-family")
    p.add_argument("--paradigm")
    p.add_argument("--algorithm")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_workers)

    p = sub.add_parser("run", help="run a config in the foreground (no daemon needed)")
    p.add_argument("config", nargs="?", help="config JSON; omitted: the default worker's default config")
    p.add_argument("--worker", help="worker name (overrides the config's \"worker\")")
    p.add_argument("--run-id", help="run id (default: time-sortable and random)")
    p.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override one config value (JSON value), e.g. --set training.total_timesteps=4000")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("runs", help="list runs")
    p.add_argument("--limit", type=int, default=0, help="show only the newest N")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("show", help="show one run's manifest and latest metrics")
    p.add_argument("run", help="run id, unique prefix, or 'latest'")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("logs", help="print a run's telemetry")
    p.add_argument("run", help="run id, unique prefix, or 'latest'")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing until the run ends")
    p.add_argument("--raw", action="store_true", help="print the JSONL lines as stored")
    p.set_defaults(func=cmd_logs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except UserError as exc:
        print(f"mosaic: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
