"""``mosaic daemon``, ``submit``, ``cancel``, ``pause``, ``resume``: the trainer daemon.

Imported lazily where it matters: the daemon needs the optional 'daemon' extra (gRPC).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mosaic.clients.cli.common import _config_of, _daemon_client, _format_event, _table, apply_overrides, listing_row
from mosaic.errors import UserError
from mosaic.workerkit.lifecycle import EXIT_CANCELLED, EXIT_FAILED
from mosaic.runs import RunDir, RunStore
from mosaic.workerkit.cli import load_config_data


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

    if importlib.util.find_spec("grpc") is None:
        raise UserError("the daemon needs the 'daemon' extra: pip install 'mosaic-marl[daemon]'")
    from mosaic.host.daemon.endpoint import stop_daemon
    from mosaic.host.daemon.settings import DaemonSettings

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
        try:
            pid = stop_daemon(home, args.timeout)
        except TimeoutError as exc:
            raise UserError(str(exc)) from None
        if pid is None:
            raise UserError(f"no daemon serves MOSAIC_HOME={home}")
        print(f"daemon pid {pid} stopped")
        return 0
    from mosaic.host.daemon.server import run_daemon

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
    from mosaic.host.daemon.client import state_name

    return state_name(client.get(run_id).state)


def _exit_code_for(state: str) -> int:
    return {"COMPLETED": 0, "CANCELLED": EXIT_CANCELLED}.get(state, EXIT_FAILED)


def cmd_submit(args: argparse.Namespace) -> int:
    from mosaic.clients.cli.common import check_set_items, refuse_other_kind, yaml_syntax

    check_set_items(args.set, getattr(args, "argv", None))
    yaml_syntax(args.config, "config")
    data = load_config_data(args.config)
    refuse_other_kind(args.config, data, "run config", "config")
    data = apply_overrides(data, args.set)
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
    from mosaic.host.daemon.client import state_name

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


def _daemon_rows(client: Any) -> dict[str, list[str]]:
    """`mosaic runs`' rows of the runs the daemon knows, by run id (their states as the daemon has them)."""
    from mosaic.host.daemon.client import state_name

    from mosaic.clients.cli.common import rounded_target
    from mosaic.workerkit.run_fields import RunSummary, summarize

    rows = {}
    store = RunStore()
    for info in client.list():
        metrics = json.loads(info.last_metrics_json) if info.last_metrics_json else {}
        state = state_name(info.state).lower()
        run = RunDir(store.path_for(info.run_id))
        summary = summarize(_config_of(run), worker=info.worker)
        if not summary.env_id or not summary.algorithm:
            summary = RunSummary(**{**summary.to_dict(), "worker": info.worker,
                                    "env_id": summary.env_id or info.env_id,
                                    "algorithm": summary.algorithm or info.algorithm})
        rows[info.run_id] = listing_row(
            info.run_id, f"{state} #{info.queue_position}" if info.queue_position else state, summary, metrics,
            rounded_target(run))
    return rows


def _daemon_logs(client: Any, args: argparse.Namespace) -> int | None:
    """`mosaic logs --follow` through the daemon; None if the daemon does not know the run."""
    from mosaic.host.daemon.client import DaemonError

    try:
        info = client.get(args.run)
    except DaemonError as exc:
        if exc.code is not None and exc.code.name == "NOT_FOUND":
            return None
        raise
    _follow_daemon_run(client, info.run_id, raw=args.raw)
    return 0


def add_parsers(sub: Any) -> None:
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
                   help="interpreter to start WORKER with (default: its own environment's, else the daemon's)")
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
