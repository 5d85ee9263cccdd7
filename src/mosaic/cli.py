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

from mosaic import __version__, cli_envs
from mosaic.discovery import Discovery, discover_workers
from mosaic.errors import UserError
from mosaic.launcher import run_in_foreground, validate_config, worker_command
from mosaic.lifecycle import EXIT_CANCELLED, EXIT_FAILED
from mosaic.progress import ProgressView
from mosaic.provenance import host_info, package_versions
from mosaic.run_status import RunState
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
    print(_table(rows, ["WORKER", "VERSION", "UPSTREAM", "ALGORITHMS", "ENV FAMILIES", "POLICIES", "PYTHON ENV"])
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
    if args.dry_run:  # the worker's own check, in its own interpreter; nothing is written
        proc = subprocess.run([*worker_command(worker), "--dry-run", "--config", "-"],
                              input=json.dumps({**data, "worker": name, "run_id": run_id}), text=True)
        return proc.returncode
    config = validate_config(worker, {**data, "worker": name, "run_id": run_id})
    run = store.create(run_id, config, {
        "worker": name, "worker_version": worker.metadata.version, "status": RunState.CREATED.manifest,
        "created_at": time.time(), "host": host_info(), "versions": package_versions(["mosaic-marl"]),
        "python": worker.python or sys.executable,
    })
    view = ProgressView()
    print(f"run folder: {run.root}", file=sys.stderr)
    outcome = run_in_foreground(worker, run, on_event=view,
                                on_interrupt=lambda: print("\ncancelling…", file=sys.stderr))
    view.close()
    term = outcome.terminal
    if outcome.status == RunState.COMPLETED.manifest:
        print(f"run {run_id} completed: {json.dumps(term.get('summary', {}))}")
        print(next_steps(run, view), file=sys.stderr)
        return 0
    if outcome.status == RunState.CANCELLED.manifest:
        print(f"run {run_id} cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    print(f"run {run_id} failed: {term.get('error_type', '?')}: {term.get('message', '')}",
          file=sys.stderr)
    return EXIT_FAILED


def next_steps(run: RunDir, view: ProgressView) -> str:
    """What the run learned, and where to look next."""
    lines = [line for line in [view.learning_summary()] if line]
    short = run.run_id
    lines.append("where to look next:")
    lines.append(f"  mosaic show {short}                   manifest, versions and the last metrics")
    if view.checkpoints:
        lines.append(f"  mosaic eval {short} --episodes 20 --video   play the trained policies, record a GIF")
    board = run.root / "tensorboard"
    if board.is_dir() and any(board.iterdir()):
        lines.append(f"  tensorboard --logdir {board}   learning curves")
    lines.append(f"  mosaic logs {short}                   every telemetry event ({run.root / 'telemetry.jsonl'})")
    return "\n".join(lines)


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
    client = _daemon_client()  # a daemon serves this MOSAIC_HOME: ask it
    if client is not None:
        return _daemon_runs(client, args)
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
    client = _daemon_client() if args.follow else None
    if client is not None:
        code = _daemon_logs(client, args)
        if code is not None:
            return code
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
            status = RunState.from_manifest(run.read_manifest().get("status"))
            if status is not None and status.terminal and not chunk:
                return 0
            time.sleep(0.2)


# -- mosaic watch / fastlane (imported lazily: FastLane needs numpy) -----------
def _fastlane(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(f"mosaic.fastlane.{module}")
    except ImportError as exc:
        raise UserError(f"FastLane needs numpy ({exc})") from None


def cmd_watch(args: argparse.Namespace) -> int:
    run = RunStore().resolve(args.run)
    return _fastlane("viewer").watch(run, stream=args.stream, snapshot_path=args.snapshot, stats=args.stats,
                                     timeout_s=args.timeout, duration_s=args.duration)


def cmd_fastlane_gc(args: argparse.Namespace) -> int:
    removed = _fastlane("gc").collect_garbage(dry_run=args.dry_run, force=args.force)
    verb = "would remove" if args.dry_run else "removed"
    for status in removed:
        print(f"{verb} {status.name}: {status.garbage_reason}")
    print(f"{verb} {len(removed)} segment(s)")
    return 0


def cmd_fastlane_ls(args: argparse.Namespace) -> int:
    rows = [[s.name, s.geometry or "?", str(s.frames), str(s.pid or "?"),
             {True: "alive", False: "gone", None: "?"}[s.writer_alive], s.garbage_reason or "-"]
            for s in _fastlane("gc").list_status()]
    print(_table(rows, ["SEGMENT", "GEOMETRY", "FRAMES", "PID", "WRITER", "GARBAGE"]) if rows
          else "no FastLane segments")
    return 0


# -- trainer daemon (imported lazily: it needs the optional 'daemon' extra) ------
def _daemon_client(required: bool = False) -> Any:
    """A client of the daemon serving this MOSAIC_HOME, or None when none runs."""
    import importlib.util

    from mosaic.daemon.endpoint import find_daemon  # looking needs no gRPC

    home = RunStore().home
    endpoint = find_daemon(home)
    if endpoint is None:
        if required:
            raise UserError(f"no daemon serves MOSAIC_HOME={home}; start one with `mosaic daemon` "
                            "(or run in the foreground with `mosaic run`)")
        return None
    if importlib.util.find_spec("grpc") is None:
        raise UserError("a daemon serves this MOSAIC_HOME, but talking to it needs the 'daemon' extra: "
                        "pip install 'mosaic-marl[daemon]'")
    from mosaic.daemon.client import DaemonClient

    return DaemonClient.for_endpoint(endpoint, home)


def _parse_pythons(items: list[str]) -> dict[str, str]:
    pythons = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UserError(f"--python: expected WORKER=PATH, got {item!r}")
        pythons[name] = path
    return pythons


def cmd_daemon(args: argparse.Namespace) -> int:
    import importlib.util
    import os
    import signal

    if importlib.util.find_spec("grpc") is None:
        raise UserError("the daemon needs the 'daemon' extra: pip install 'mosaic-marl[daemon]'")
    from mosaic.daemon.endpoint import find_daemon, is_locked
    from mosaic.daemon.settings import DaemonSettings

    home = RunStore().home
    if args.action == "status":
        health = _daemon_client(required=True).health()
        print(f"daemon pid {health.pid} at {health.address}, up {health.uptime_s:.0f} s, "
              f"token {'required' if health.token_required else 'not required'}")
        print(f"home {health.home}; workers {health.workers} (broken {health.broken_workers}); "
              f"cpus {health.cpus_in_use:g}/{health.cpu_budget:g}; max runs {health.max_concurrent_runs}")
        print("runs: " + (", ".join(f"{k.lower()} {v}" for k, v in sorted(health.runs_by_state.items()))
                          or "none"))
        return 0
    if args.action == "stop":
        endpoint = find_daemon(home)
        if endpoint is None:
            raise UserError(f"no daemon serves MOSAIC_HOME={home}")
        os.kill(endpoint.pid, signal.SIGTERM)
        settings = DaemonSettings(home=home)
        deadline = time.monotonic() + args.timeout
        while is_locked(settings.lock_path):
            if time.monotonic() > deadline:
                raise UserError(f"daemon pid {endpoint.pid} is still stopping after {args.timeout:g} s")
            time.sleep(0.1)
        print(f"daemon pid {endpoint.pid} stopped")
        return 0
    from mosaic.daemon.server import run_daemon

    settings = DaemonSettings(home=home, host=args.host, port=args.port,
                              max_concurrent_runs=args.max_runs, heartbeat_timeout_s=args.heartbeat_timeout,
                              startup_timeout_s=args.startup_timeout, cancel_grace_s=args.cancel_grace,
                              pythons=_parse_pythons(args.python), require_token=args.require_token)
    if args.cpu_budget is not None:
        settings.cpu_budget = args.cpu_budget
    for name, value in (("--max-runs", args.max_runs), ("--cpu-budget", settings.cpu_budget)):
        if value <= 0:
            raise UserError(f"{name}: must be > 0, got {value}")
    return run_daemon(settings)


def _follow_daemon_run(client: Any, run_id: str, raw: bool) -> str:
    """Print a run's events until it ends; returns its final state."""
    for event in client.telemetry(run_id, 0, follow=True):
        print(event.json if raw else _format_event(json.loads(event.json)), flush=True)
    from mosaic.daemon.client import state_name

    return state_name(client.get(run_id).state)


def _exit_code_for(state: str) -> int:
    return {"COMPLETED": 0, "CANCELLED": EXIT_CANCELLED}.get(state, EXIT_FAILED)


def cmd_submit(args: argparse.Namespace) -> int:
    data = apply_overrides(load_config_data(args.config), args.set)
    client = _daemon_client(required=True)
    info = client.submit(data, worker=args.worker or "", run_id=args.run_id or "",
                         heartbeat_timeout_s=args.heartbeat_timeout or 0.0, cpus=args.cpus or 0.0)
    print(info.run_id)
    print(f"run {info.run_id} queued (worker {info.worker}); follow it with "
          f"`mosaic logs -f {info.run_id}`", file=sys.stderr)
    if not args.follow:
        return 0
    state = _follow_daemon_run(client, info.run_id, raw=False)
    print(f"run {info.run_id} {state.lower()}", file=sys.stderr)
    return _exit_code_for(state)


def _run_control(args: argparse.Namespace, verb: str) -> int:
    from mosaic.daemon.client import state_name

    client = _daemon_client(required=True)
    if verb == "cancel":
        info = client.cancel(args.run, reason=args.reason or "", wait_s=args.wait)
    else:
        info = getattr(client, verb)(args.run, wait_s=args.wait)
    detail = f" ({info.state_reason})" if info.state_reason else ""
    print(f"run {info.run_id}: {state_name(info.state).lower()}{detail}")
    return 0


def cmd_cancel(args: argparse.Namespace) -> int:
    return _run_control(args, "cancel")


def cmd_pause(args: argparse.Namespace) -> int:
    return _run_control(args, "pause")


def cmd_resume(args: argparse.Namespace) -> int:
    return _run_control(args, "resume")


def _daemon_runs(client: Any, args: argparse.Namespace) -> int:
    """`mosaic runs` through the daemon, plus runs it never saw (made by `mosaic run`)."""
    from mosaic.daemon.client import state_name

    rows = {}
    for info in client.list():
        metrics = json.loads(info.last_metrics_json) if info.last_metrics_json else {}
        ret = metrics.get("episode_return_mean")
        state = state_name(info.state).lower()
        rows[info.run_id] = [info.run_id, f"{state} #{info.queue_position}" if info.queue_position else state,
                             info.worker, info.env_id or "?", info.algorithm or "-",
                             str(metrics.get("timesteps_total", "-")),
                             f"{ret:.3f}" if isinstance(ret, (int, float)) else "-"]
    for run in RunStore().list():
        if run.run_id not in rows:
            rows[run.run_id] = _summary_row(run)
    ordered = [rows[k] for k in sorted(rows)]
    ordered = ordered[-args.limit:] if args.limit else ordered
    if not ordered:
        print("no runs yet")
        return 0
    print(_table(ordered, ["RUN", "STATUS", "WORKER", "ENV", "ALGORITHM", "TIMESTEPS", "RETURN"]))
    return 0


def _daemon_logs(client: Any, args: argparse.Namespace) -> int | None:
    """`mosaic logs --follow` through the daemon; None if the daemon does not know the run."""
    from mosaic.daemon.client import DaemonError

    try:
        info = client.get(args.run)
    except DaemonError as exc:
        if exc.code is not None and exc.code.name == "NOT_FOUND":
            return None
        raise
    _follow_daemon_run(client, info.run_id, raw=args.raw)
    return 0


# -- mosaic eval (the worker that trained the run evaluates it) -----------------
def _run_or_path(ref: str) -> tuple[str, str | None]:
    """A run reference or a checkpoint path → (path, worker name if known)."""
    from pathlib import Path

    if Path(ref).exists():
        run_root = Path(ref).resolve()
        for candidate in (run_root, run_root.parent.parent):
            manifest = RunDir(candidate).read_manifest()
            if manifest.get("worker"):
                return str(run_root), manifest["worker"]
        return str(run_root), None
    run = RunStore().resolve(ref)
    return str(run.root), run.read_manifest().get("worker")


def cmd_eval(args: argparse.Namespace) -> int:
    path, worker_name = _run_or_path(args.target)
    worker_name = args.worker or worker_name
    if not worker_name:
        raise UserError(f"worker: cannot tell which worker made {args.target!r}; pass --worker")
    worker = discover_workers().get(worker_name)
    cmd = [*worker_command(worker), "--evaluate", path, "--episodes", str(args.episodes),
           "--seed", str(args.seed)]
    if args.opponent:
        cmd += ["--opponent", args.opponent if args.opponent == "random" else _run_or_path(args.opponent)[0]]
    if args.video:
        cmd += ["--video", str(args.video)]
    if args.json:
        cmd.append("--json")
    if args.fastlane:
        cmd.append("--fastlane")
    proc = subprocess.run(cmd)
    return proc.returncode


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
    p.add_argument("--dry-run", action="store_true",
                   help="let the worker check the config as a run would and show what it would use; "
                        "no run folder, no training")
    p.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override one config value (JSON value), e.g. --set training.total_timesteps=4000")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("runs", help="list runs")
    p.add_argument("--limit", type=int, default=0, help="show only the newest N")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("show", help="show one run's manifest and latest metrics")
    p.add_argument("run", help="run id, unique prefix, or 'latest'")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("eval", help="play a trained run's policies and report returns and win rates")
    p.add_argument("target", metavar="RUN|CHECKPOINT", help="run id, prefix, 'latest', or a checkpoint folder")
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--opponent", metavar="RUN2|random", help="who plays the other seat(s)")
    p.add_argument("--video", type=int, nargs="?", const=1, default=0, metavar="N",
                   help="record the first N episodes as GIF (default 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--worker", help="the worker to evaluate with (default: the run's)")
    p.add_argument("--json", action="store_true", help="results as JSON")
    p.add_argument("--fastlane", action="store_true", help="stream frames (`mosaic watch RUN --stream eval`)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("logs", help="print a run's telemetry")
    p.add_argument("run", help="run id, unique prefix, or 'latest'")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing until the run ends")
    p.add_argument("--raw", action="store_true", help="print the JSONL lines as stored")
    p.set_defaults(func=cmd_logs)

    p = sub.add_parser("watch", help="live frames of a run (FastLane): a window, a PNG snapshot, or stats")
    p.add_argument("run", help="run id, unique prefix, or 'latest'")
    p.add_argument("--stream", help="one stream (e.g. runner-1); default: the first / all")
    p.add_argument("--snapshot", metavar="OUT.png", help="write the newest frame as a PNG and exit")
    p.add_argument("--stats", action="store_true", help="print fps and latency per stream every second")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds --snapshot waits for a frame")
    p.add_argument("--duration", type=float, help="stop the window or --stats after this many seconds")
    p.set_defaults(func=cmd_watch)

    p = sub.add_parser("fastlane", help="FastLane shared-memory segments")
    fl = p.add_subparsers(dest="fastlane_command", required=True)
    q = fl.add_parser("gc", help="remove segments whose writer is gone or whose run has finished")
    q.add_argument("--dry-run", action="store_true", help="only list what would be removed")
    q.add_argument("--force", action="store_true", help="also remove segments written from another host")
    q.set_defaults(func=cmd_fastlane_gc)
    q = fl.add_parser("ls", help="list segments with their writer and whether they are garbage")
    q.set_defaults(func=cmd_fastlane_ls)

    p = sub.add_parser("daemon", help="the trainer daemon: start it (default), or its status, or stop it")
    p.add_argument("action", nargs="?", choices=("start", "status", "stop"), default="start")
    p.add_argument("--host", default="127.0.0.1", help="address to bind; off loopback a token is required")
    p.add_argument("--port", type=int, default=50055, help="port (0: any free one, see daemon.json)")
    p.add_argument("--max-runs", type=int, default=4, help="runs at once; more wait in the queue")
    p.add_argument("--cpu-budget", type=float, help="CPUs all running runs may claim (default: all cores)")
    p.add_argument("--heartbeat-timeout", type=float, default=60.0,
                   help="kill a running worker silent this long (s); 0 = never")
    p.add_argument("--startup-timeout", type=float, default=300.0,
                   help="kill a worker without run_started after this long (s)")
    p.add_argument("--cancel-grace", type=float, default=30.0, help="SIGTERM → SIGKILL delay on cancel (s)")
    p.add_argument("--python", action="append", default=[], metavar="WORKER=PATH",
                   help="interpreter to start WORKER with (default: the daemon's own)")
    p.add_argument("--require-token", action="store_true", help="demand the token on loopback too")
    p.add_argument("--timeout", type=float, default=90.0, help="stop: seconds to wait for the daemon to exit")
    p.set_defaults(func=cmd_daemon)

    p = sub.add_parser("submit", help="queue a config on the daemon; prints the run id")
    p.add_argument("config", help="config JSON")
    p.add_argument("--worker", help="worker name (overrides the config's \"worker\")")
    p.add_argument("--run-id", help="run id (default: time-sortable and random)")
    p.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override one config value (JSON value)")
    p.add_argument("--heartbeat-timeout", type=float, help="this run's watchdog timeout (s)")
    p.add_argument("--cpus", type=float, help="CPUs to charge this run (default: the worker's estimate)")
    p.add_argument("--follow", "-f", action="store_true", help="print its telemetry until it ends")
    p.set_defaults(func=cmd_submit)

    for name, func, text in (("cancel", cmd_cancel, "cancel a daemon run (queued or running)"),
                             ("pause", cmd_pause, "pause a running daemon run"),
                             ("resume", cmd_resume, "resume a paused daemon run")):
        p = sub.add_parser(name, help=text)
        p.add_argument("run", help="run id, unique prefix, or 'latest'")
        if name == "cancel":
            p.add_argument("--reason", help="recorded as the run's state reason")
        p.add_argument("--wait", type=float, default=10.0,
                       help="seconds to wait for the worker to confirm (0: don't)")
        p.set_defaults(func=func)
    cli_envs.add_parser(sub)
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
