"""``mosaic run``, ``runs``, ``show``, ``logs`` and ``eval``: runs in the foreground and their folders."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from mosaic.clients.cli.common import RUN_COLUMNS, _config_of, _daemon_client, _format_event, _summary_row, _table, apply_overrides
from mosaic.clients.cli.daemon import _daemon_logs, _daemon_rows
from mosaic.host.discovery import Discovery, discover_workers
from mosaic.errors import UserError
from mosaic.host.launcher import create_run, run_in_foreground, start_checked, validate_config, worker_command
from mosaic.workerkit.lifecycle import EXIT_CANCELLED, EXIT_FAILED
from mosaic.clients.cli.progress import ProgressView
from mosaic.run_status import RunState
from mosaic.runs import TELEMETRY_FILE, RunDir, RunStore, new_run_id, validate_run_id
from mosaic.workerkit.telemetry import TERMINAL_TYPES
from mosaic.workerkit.cli import load_config_data

#: Worker whose default config ``mosaic run`` uses without a CONFIG, best first.
DEFAULT_WORKERS = ("ray", "random")


def _default_config(found: Discovery | None, name: str | None = None) -> dict[str, Any]:
    """The built-in default config of worker ``name`` (``--worker``), else of the first default worker installed."""
    if name:
        return _worker_default_config(_find_worker(name))
    assert found is not None
    for default in DEFAULT_WORKERS:
        if default in found.names():
            return _worker_default_config(found.get(default))
    raise UserError(f"no default worker installed (looked for {', '.join(DEFAULT_WORKERS)})")


def _worker_default_config(worker: Any) -> dict[str, Any]:
    proc = subprocess.run([*worker_command(worker), "--default-config"], capture_output=True, text=True, timeout=120)
    if proc.returncode == 0:
        return json.loads(proc.stdout)
    raise UserError(f"worker {worker.name!r} could not print its default config: "
                    f"{proc.stderr.strip().splitlines()[-1:] or proc.returncode}")


def _find_worker(name: str | None) -> Any:
    """The named worker, found without describing every other one (they are listed only in an error)."""
    if name:
        found = discover_workers(only=name)
        if name in found.names():
            return found.get(name)
    found = discover_workers()
    if not name:
        raise UserError(f"worker: not given; add \"worker\": NAME to the config or pass --worker "
                        f"(installed: {', '.join(found.names()) or 'none'})")
    return found.get(name)


def cmd_run(args: argparse.Namespace) -> int:
    from mosaic.clients.cli.common import check_set_items, refuse_other_kind, yaml_syntax

    check_set_items(args.set, getattr(args, "argv", None))
    if args.config:
        yaml_syntax(args.config, "config")
        data = load_config_data(args.config)
        refuse_other_kind(args.config, data, "run config", "config")
    else:  # the named worker's own default config, or the default worker's
        data = _default_config(None if args.worker else discover_workers(), args.worker)
    data = apply_overrides(data, args.set)
    name = args.worker or data.get("worker")
    worker = _find_worker(name)
    run_id = validate_run_id(args.run_id or data.get("run_id") or new_run_id())
    store = RunStore()
    if store.exists(run_id):
        raise UserError(f"run_id: a run named {run_id!r} already exists")
    if args.dry_run:  # the worker's own check, in its own interpreter; nothing is written
        proc = subprocess.run([*worker_command(worker), "--dry-run", "--config", "-"],
                              input=json.dumps({**data, "worker": name, "run_id": run_id}), text=True)
        return proc.returncode
    request = {**data, "worker": name, "run_id": run_id}
    seed = data.get("seed")
    if isinstance(seed, int) and not isinstance(seed, bool):
        # one worker process checks the config and runs it; the run folder exists only once it passed
        started = start_checked(worker, store, request, status=RunState.CREATED.manifest)
        run: Any = started.run
    else:  # the worker's default seed decides PYTHONHASHSEED: check first, then start
        config = validate_config(worker, request)
        run = started = create_run(store, worker, config, status=RunState.CREATED.manifest)
    view = ProgressView()
    print(f"run folder: {run.root}", file=sys.stderr)
    outcome = run_in_foreground(worker, started, on_event=view,
                                on_interrupt=lambda: print("\ncancelling…", file=sys.stderr))
    view.close()
    term = outcome.terminal
    if outcome.status == RunState.COMPLETED.manifest:
        print(f"run {run_id} completed: {json.dumps(term.get('summary', {}))}")
        print(next_steps(run, view, evaluates=_evaluates(worker)), file=sys.stderr)
        return 0
    if outcome.status == RunState.CANCELLED.manifest:
        print(f"run {run_id} cancelled", file=sys.stderr)
        return EXIT_CANCELLED
    print(f"run {run_id} failed: {term.get('error_type', '?')}: {term.get('message', '')}",
          file=sys.stderr)
    return EXIT_FAILED


def _evaluates(worker: Any) -> bool:
    """Whether ``mosaic eval`` can play the worker's runs: its describe document says so where discovery read
    one; otherwise a worker whose only policies are random ones (the reference worker) trains none to play."""
    description = worker.description or {}
    if "can_evaluate" in description:
        return bool(description["can_evaluate"])
    return set(worker.capabilities.policy_configurations) != {"RANDOM"}


def next_steps(run: RunDir, view: ProgressView, evaluates: bool = True) -> str:
    """What the run learned, and where to look next (``mosaic eval`` only for a worker that can evaluate)."""
    lines = [line for line in [view.learning_summary()] if line]
    short = run.run_id
    lines.append("where to look next:")
    lines.append(f"  mosaic show {short}                   state, progress, return, checkpoints (--json: all of it)")
    if view.checkpoints and evaluates:
        lines.append(f"  mosaic eval {short} --episodes 20 --video   play the trained policies, record a GIF")
    board = run.root / "tensorboard"
    if board.is_dir() and any(board.iterdir()):
        lines.append(f"  tensorboard --logdir {board}   learning curves")
    lines.append(f"  mosaic logs {short}                   every telemetry event ({run.telemetry_path})")
    return "\n".join(lines)


def cmd_runs(args: argparse.Namespace) -> int:
    """The runs of MOSAIC_HOME in one order, daemon or not: oldest first by when each was created (the daemon's
    runs without a folder yet last), ``--limit N`` the newest N; ``--experiment``/``--tournament`` select one
    experiment's cells or one tournament's shard runs, ``--standalone`` leaves both out."""
    from mosaic.clients.cli.common import experiment_runs, tournament_of

    if args.limit < 0:
        raise UserError(f"--limit: {args.limit} is below 0; allowed: a count of the newest runs, or 0 for every run")
    store = RunStore()
    client = _daemon_client()  # a daemon serves this MOSAIC_HOME: its states are the live ones
    daemon_rows = _daemon_rows(client) if client is not None else {}
    runs = store.list()
    ids = [r.run_id for r in runs] + sorted(set(daemon_rows) - {r.run_id for r in runs})
    by_id = {r.run_id: r for r in runs}
    if args.experiment or args.tournament or args.standalone:
        cells = experiment_runs(store.home)
        if args.experiment and args.experiment not in set(cells.values()):
            from mosaic.experiments.store import ExperimentStore
            from mosaic.errors import one_of

            raise UserError(f"--experiment: {one_of(args.experiment, ExperimentStore(store.home).names())}")

        def keep(run_id: str) -> bool:
            tournament = tournament_of(_config_of(by_id[run_id]) if run_id in by_id else {})
            if args.standalone:
                return run_id not in cells and tournament is None
            if args.experiment:
                return cells.get(run_id) == args.experiment
            return tournament is not None and (tournament == args.tournament
                                               or tournament.split("/")[0] == args.tournament)

        ids = [i for i in ids if keep(i)]
    ids = ids[-args.limit:] if args.limit else ids
    if not ids:
        print(f"no runs yet in MOSAIC_HOME={store.home}" if not runs and not daemon_rows
              else "no runs match")
        here = Path("var").absolute()
        if not runs and here != store.home and (here / "trainer" / "runs").is_dir():
            print(f"({here} holds runs of another home: `MOSAIC_HOME={here} mosaic runs` lists them)")
        return 0
    print(_table([daemon_rows.get(i) or _summary_row(by_id[i]) for i in ids], RUN_COLUMNS))
    return 0


def _show_text(run: RunDir, manifest: dict[str, Any], summary: Any, last: dict[str, Any] | None,
               target: int | None) -> str:
    """What `mosaic show RUN` prints first: the run in a few lines, for a person (``--json``: everything)."""
    from mosaic.clients.cli.common import progress_text, return_text

    env = f"{summary.env_family}/{summary.env_id}" if summary.env_family else (summary.env_id or "?")
    lines = [f"run {run.run_id}: {manifest.get('status', '?')}",
             f"  worker: {summary.worker or manifest.get('worker') or '?'}; algorithm: {summary.algorithm or '-'}; "
             f"env: {env}; seed: {'-' if summary.seed is None else summary.seed}"]
    progress = progress_text(summary, last or {}, target)
    if target is not None and summary.budget is not None and target != summary.budget:
        progress += (f" (total_timesteps {summary.budget}: its library takes the budget in whole units, "
                     f"{target} env steps, as the run said when it started)")
    lines.append(f"  progress: {progress}")
    lines.append(f"  last mean return: {return_text(last or {})}")
    checkpoints = manifest.get("checkpoints") or []
    if checkpoints:
        lines.append(f"  checkpoints: {len(checkpoints)}, latest {manifest.get('latest_checkpoint') or checkpoints[-1].get('path')}")
    else:
        lines.append("  checkpoints: none")
    failure = manifest.get("failure") or {}
    if failure or manifest.get("status") == "failed":
        lines.append(f"  failed: {failure.get('error_type') or '?'}: {(failure.get('message') or '').strip()}")
        lines.append(f"  its log: {run.worker_log_path}")
    if manifest.get("cancel_reason"):
        lines.append(f"  cancelled: {manifest['cancel_reason']}")
    lines.append(f"  folder: {run.root}")
    lines.append(f"the whole manifest, config and last metrics: mosaic show {run.run_id} --json")
    return "\n".join(lines)


def cmd_show(args: argparse.Namespace) -> int:
    from mosaic.clients.cli.common import progress_text, rounded_target
    from mosaic.workerkit.run_fields import summarize

    run = RunStore().resolve(args.run)
    manifest = run.read_manifest()
    summary = summarize(_config_of(run), worker=manifest.get("worker", ""))
    last = run.last_event("metrics")
    target = rounded_target(run)
    if not args.json:
        print(_show_text(run, manifest, summary, last, target))
        return 0
    print(json.dumps({"run_dir": str(run.root), "run": {**summary.to_dict(),
                                                        "progress": progress_text(summary, last or {}, target),
                                                        **({"target_env_steps": target} if target is not None else {})},
                      "config": _config_of(run), "manifest": manifest, "last_metrics": last}, indent=2))
    return 0


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
    if "/" in ref:  # a path, not a run id: say so, not that it is a bad run id
        raise UserError(f"RUN|CHECKPOINT: {ref!r} does not exist; allowed: a run id, a unique prefix of one, "
                        "'latest', or a checkpoint folder")
    run = RunStore().resolve(ref)
    return str(run.root), run.read_manifest().get("worker")


def cmd_eval(args: argparse.Namespace) -> int:
    path, worker_name = _run_or_path(args.target)
    worker_name = args.worker or worker_name
    if not worker_name:
        raise UserError(f"worker: cannot tell which worker made {args.target!r}; pass --worker")
    if args.opponent:
        _check_opponent_seats(path)
    worker = discover_workers().get(worker_name)
    if not _evaluates(worker):  # with or without an opponent: there is no policy to play
        raise UserError(f"RUN|CHECKPOINT: {args.target!r} is a run of the {worker_name} worker, which cannot "
                        "evaluate (it trains no policies); allowed: a run of a worker that evaluates "
                        "(`mosaic workers show NAME`: evaluates: yes)")
    if args.opponent and not _native_opponent(worker_name, args.opponent):
        return _eval_match(args, path)
    if args.seats:
        raise UserError("--seats: only for an opponent played as a match (one from another worker, a scripted "
                        "player or a player config); the worker's own evaluation seats the run itself")
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


#: Env families whose every env has one agent (Gymnasium's API and those built on it).
SINGLE_AGENT_FAMILIES = ("gymnasium", "atari", "mujoco", "envpool")


def _check_opponent_seats(path: str) -> None:
    """``--opponent`` needs a side to play against the run: refused, naming why, where the run's env has one agent
    or one team with a shared reward (``mosaic.workerkit.envs.reward_structure``)."""
    from pathlib import Path

    from mosaic.workerkit.envs import reward_structure
    from mosaic.workerkit.run_fields import summarize

    for root in (Path(path), Path(path).parent.parent):
        if RunDir(root).config_path.is_file():
            summary = summarize(_config_of(RunDir(root)))
            break
    else:
        return
    env = f"{summary.env_family}/{summary.env_id}"
    structure = reward_structure(summary.env_family, summary.env_id)
    if structure == "single" or summary.env_family in SINGLE_AGENT_FAMILIES:
        raise UserError(f"--opponent: {env} has one agent, which the run plays: there is no seat for an opponent; "
                        "allowed: no --opponent (mosaic eval RUN plays the run alone), or a run of a game with "
                        "opposing sides")
    if structure == "cooperative":
        raise UserError(f"--opponent: in {env} the agents are one team with a shared reward: there is no opposing "
                        "side for an opponent to play; allowed: no --opponent (the run plays every agent), or a "
                        "run of a competitive or mixed env (connect_four_v3, simple_tag_v3, ...)")


#: Workers whose own ``--evaluate`` plays ``--opponent random`` or a run of the same worker (with their own
#: seating, videos and frames); every other opponent is played as a match of players (mosaic.host.head_to_head).
NATIVE_OPPONENTS = ("ray",)


def _native_opponent(worker_name: str, opponent: str) -> bool:
    if worker_name not in NATIVE_OPPONENTS:
        return False
    if opponent == "random":
        return True
    if opponent.startswith("scripted:"):
        return False
    try:
        return _run_or_path(opponent)[1] == worker_name
    except UserError:
        return False


def _eval_match(args: argparse.Namespace, path: str) -> int:
    """The run against an opponent from anywhere: both served as players, the match played here."""
    from pathlib import Path

    from mosaic.host.head_to_head import evaluate
    from mosaic.workerkit.evaluation import print_results

    seats = [s for s in (args.seats or "").split(",") if s] or None
    results = evaluate(Path(path), args.opponent, args.episodes, seed=args.seed, seats=seats,
                       video=args.video, fastlane=args.fastlane)
    print_results(results, args.json)
    return 0


def add_parsers(sub: Any) -> None:
    from mosaic.clients.cli.common import HelpFormatter

    p = sub.add_parser("run", help="run a config in the foreground (no daemon needed)",
                       description="Train one run in the foreground: the worker checks the config, the run folder "
                                   "is made under MOSAIC_HOME/trainer/runs, and progress is drawn until it ends "
                                   "(Ctrl-C cancels it cleanly and keeps a checkpoint). CONFIG is a JSON or YAML "
                                   "file (.yaml/.yml); without one, the worker's own default config. --set changes "
                                   "one field, by the same path for every worker.",
                       epilog="examples:\n  mosaic run --set total_timesteps=4000\n"
                              "  mosaic run examples/random_connect_four.json --run-id first\n"
                              "  mosaic run --worker cleanrl --set algorithm=ppo --dry-run",
                       formatter_class=HelpFormatter)
    p.add_argument("config", nargs="?", help="config file, JSON or YAML (.yaml/.yml); omitted: the default config "
                                             "of --worker, or else of the default worker (ray)")
    p.add_argument("--worker", help="worker name (overrides the config's \"worker\")")
    p.add_argument("--run-id", help="run id (default: time-sortable and random)")
    p.add_argument("--dry-run", action="store_true",
                   help="let the worker check the config as a run would and show what it would use; "
                        "no run folder, no training")
    p.add_argument("--set", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override one config value (JSON value), e.g. --set total_timesteps=4000 (the same path for every worker)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("runs", help="list runs", description="List the runs of MOSAIC_HOME (with the daemon's live "
                       "states, when one serves it), oldest first by when each was created, daemon or not: worker, "
                       "env, algorithm, seed, state, progress and the latest return. Experiment cells and arena "
                       "shard runs are runs too and are listed; --experiment NAME or --tournament NAME shows only "
                       "those of one, --standalone leaves them all out.",
                       epilog="example: mosaic runs --standalone --limit 5   (your own five newest runs)",
                       formatter_class=HelpFormatter)
    p.add_argument("--limit", type=int, default=0, help="show only the newest N (default 0: every run)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--experiment", metavar="NAME", help="only the cells (every attempt) of experiment NAME")
    which.add_argument("--tournament", metavar="NAME", help="only the shard runs of tournament NAME (or NAME/GAME)")
    which.add_argument("--standalone", action="store_true",
                       help="leave out experiment cells and arena shard runs: the runs started on their own")
    p.set_defaults(func=cmd_runs)

    p = sub.add_parser("show", help="one run in a few lines: state, progress, return, checkpoints, failure",
                       description="Show one run: its state, worker, algorithm and env, the env steps done against "
                                   "its budget, the last mean return, its checkpoints and, for a failed run, the "
                                   "cause and where its log is. --json prints everything: config, manifest and the "
                                   "last metrics.",
                       epilog="examples:\n  mosaic show latest\n  mosaic show 2026 --json | jq .manifest.status",
                       formatter_class=HelpFormatter)
    p.add_argument("run", help="run id, unique prefix, or 'latest'")
    p.add_argument("--json", action="store_true", help="the whole record as JSON: config, manifest, last metrics")
    p.set_defaults(func=cmd_show)

    p = sub.add_parser("eval", help="play a trained run's policies and report returns and win rates",
                       description="Play a trained run's final checkpoint (or a checkpoint folder) for a number of "
                                   "episodes and report each agent's returns with 95% intervals, saved under the "
                                   "run's eval/ folder. In a game with opposing sides, --opponent plays the other "
                                   "seats (random play, another run, a scripted or language-model player) and win "
                                   "rates are reported.",
                       epilog="examples:\n  mosaic eval latest --episodes 20 --video\n"
                              "  mosaic eval my-c4-run --opponent random --episodes 50",
                       formatter_class=HelpFormatter)
    p.add_argument("target", metavar="RUN|CHECKPOINT", help="run id, prefix, 'latest', or a checkpoint folder")
    p.add_argument("--episodes", type=int, default=20, help="episodes to play (default 20)")
    p.add_argument("--opponent", metavar="RUN2|random|scripted:M:F|PLAYER.yaml",
                   help="who plays the other seat(s): another run or checkpoint of any worker, random play, a "
                        "scripted heuristic, or a player config (a language model); seats alternate")
    p.add_argument("--seats", metavar="AGENT[,AGENT]",
                   help="with --opponent in a game of more than two agents: the agents the run plays")
    p.add_argument("--video", type=int, nargs="?", const=1, default=0, metavar="N",
                   help="record the first N episodes as GIF (default 1)")
    p.add_argument("--seed", type=int, default=0,
                   help="episode i is seeded SEED + i (default 0): the same seed plays the same episodes")
    p.add_argument("--worker", help="the worker to evaluate with (default: the run's)")
    p.add_argument("--json", action="store_true", help="results as JSON")
    p.add_argument("--fastlane", action="store_true", help="stream frames (`mosaic watch RUN --stream eval`)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("logs", help="print a run's telemetry",
                       description=f"Print a run's telemetry events ({TELEMETRY_FILE} in its folder), one line each: "
                                   "time, sequence number, type and fields. --follow keeps printing until the run "
                                   "ends; --raw prints the JSON lines as stored. The worker's own output is in the "
                                   "run folder's logs/worker.log.",
                       epilog="examples:\n  mosaic logs latest\n  mosaic logs -f RUN_ID\n"
                              "  mosaic logs latest --raw | jq 'select(.type == \"metrics\")'",
                       formatter_class=HelpFormatter)
    p.add_argument("run", help="run id, unique prefix, or 'latest'")
    p.add_argument("--follow", "-f", action="store_true", help="keep printing until the run ends")
    p.add_argument("--raw", action="store_true", help="print the JSONL lines as stored")
    p.set_defaults(func=cmd_logs)
