"""The command line every worker shares: ``python -m <worker>.cli``.

A worker describes itself as a :class:`WorkerProgram` and calls
:func:`worker_main`; it then honours the whole process contract of
``docs/worker-contract.md``: ``--config PATH|-``, ``--run-dir``,
``--validate``, ``--default-config``, ``--describe``, ``--schema ALGO``,
``--dry-run``, ``--evaluate``, JSONL telemetry on stdout (everything else the
process prints goes to stderr), signals, heartbeats and exit codes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import IO, Any, Sequence

from mosaic.errors import UserError
from mosaic.workerkit.lifecycle import (
    EXIT_CANCELLED,
    EXIT_COMPLETED,
    EXIT_FAILED,
    EXIT_USAGE,
    Heartbeat,
    ProgressTracker,
    RunCancelled,
    RunControl,
    RunWatchdog,
    thread_failure,
    thread_stacks,
)
from mosaic.runs import RunDir, RunStore, new_run_id, validate_run_id
from mosaic.workerkit import startup
from mosaic.workerkit.telemetry import TelemetryEmitter
from mosaic.workerkit.describe import describe_program
from mosaic.workerkit.program import (  # noqa: F401  (re-exported: workers import them from here)
    SINGLE_AGENT,
    EvaluateRequest,
    Packages,
    WorkerContext,
    WorkerProgram,
    run_started,
)


def load_config_data(source: str, stdin: IO[str] | None = None) -> dict[str, Any]:
    """Read a config object from a path (JSON, or YAML by its suffix) or ``-``; :class:`UserError` on any problem."""
    from mosaic.configkit import read_document

    return read_document(source, "config", stdin)


def build_config(program: WorkerProgram, data: dict[str, Any]) -> Any:
    data = dict(data)
    named = data.pop("worker", None) or program.name
    if named != program.name:
        raise UserError(f"worker: this config is for worker {named!r}, not {program.name!r}")
    if data.get("run_id") is None:
        data["run_id"] = new_run_id()
    validate_run_id(data["run_id"])
    from mosaic.workerkit.run_fields import RunConfig

    if isinstance(program.config_class, type) and issubclass(program.config_class, RunConfig):
        data["worker"] = program.name  # the shared field: the config says which worker it is for
    return program.config_from_dict(data)


def _prog(program: WorkerProgram) -> str:
    """How this worker's command line was started: ``python -m <the module running now>``."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    return f"python -m {spec.name}" if spec is not None and spec.name else f"mosaic worker {program.name}"


def _telemetry_stream() -> IO[str]:
    """Keep the real stdout for telemetry; send all other prints to stderr."""
    sys.stdout.flush()
    stream = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return stream


def _said_up_front(program: WorkerProgram, config: Any) -> tuple[Any, list[tuple[str, dict[str, Any]]]]:
    """What a run says of its budget before it trains (``--dry-run``: under ``warnings``; a run: ``warning``
    events right after ``run_started``): a budget its library rounds (``rounded_budget``), and a checkpoint to
    restore that is already at or past ``total_timesteps``. Returns the rounded budget (or None) and the
    messages with their fields."""
    said: list[tuple[str, dict[str, Any]]] = []
    source = getattr(getattr(config, "checkpoint", None), "restore_from", None)
    total = getattr(config, "total_timesteps", None)
    start = 0
    if source and isinstance(total, int):
        from mosaic.workerkit.checkpoints import STATE_FILE, resolve

        try:
            start = int(json.loads((resolve(source) / STATE_FILE).read_text(encoding="utf-8"))["timesteps_total"])
        except (UserError, OSError, ValueError, KeyError, TypeError):
            pass  # the worker's own check of restore_from names what is wrong
        if start >= total:
            said.append((f"checkpoint.restore_from is at {start} steps, at or past total_timesteps {total}: the run "
                         "trains no further (a larger total_timesteps continues it)", {"restored_timesteps": start}))
    rounded = program.rounded_budget(config, start) if program.rounded_budget else None
    if rounded is not None:
        said.insert(0, (rounded.message, {"requested_timesteps": rounded.requested,
                                          **({"env_steps": rounded.env_steps} if rounded.env_steps is not None
                                             else {})}))
    return rounded, said


def worker_main(program: WorkerProgram, argv: Sequence[str] | None = None) -> int:
    """The worker's process from its arguments to its exit code."""
    startup.pause()  # until the process is set up (mosaic.workerkit.startup)
    try:
        return _main(program, argv)
    finally:  # whichever way it ended, a caller in the same process (a test) keeps its collector
        startup.resume(freeze=False)


def _main(program: WorkerProgram, argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(prog=_prog(program),
                                     description=f"MOSAIC {program.name} worker")
    parser.add_argument("--config", help="run config: a JSON file, or - for stdin")
    parser.add_argument("--run-dir", help="run folder to write artefacts into")
    parser.add_argument("--validate", action="store_true",
                        help="check the config, print it normalised as JSON, and exit")
    parser.add_argument("--validate-many", action="store_true",
                        help="check many configs in one process: one JSON object a line on stdin, one answer "
                             "a line on stdout ({\"ok\": true, \"config\": ...} or {\"ok\": false, \"error\": ...})")
    parser.add_argument("--default-config", action="store_true",
                        help="print the built-in default config and exit")
    parser.add_argument("--describe", action="store_true",
                        help="print this worker's describe document (metadata, capabilities, config "
                             "schema, algo_params schemas, envs, default config) as JSON and exit")
    parser.add_argument("--schema", metavar="ALGORITHM",
                        help="print the JSON Schema of one algorithm's algo_params and exit")
    parser.add_argument("--dry-run", action="store_true",
                        help="check the config as a run would (building the env once), print what "
                             "the run would use, and exit without training")
    parser.add_argument("--handshake", action="store_true",
                        help="(how `mosaic run` starts a run) read the config as one JSON line on stdin, check "
                             "it as --validate does, print it normalised as one JSON line on stdout, then read "
                             "the run folder as one JSON line on stdin and run there; one process checks and runs")
    parser.add_argument("--evaluate", metavar="RUN_OR_CHECKPOINT",
                        help="play a trained run (its latest checkpoint) or a checkpoint and exit")
    parser.add_argument("--player", metavar="RUN_OR_CHECKPOINT",
                        help="serve a trained policy to a match over JSON lines on stdin/stdout "
                             "(mosaic.workerkit.player) and exit when the match closes it")
    parser.add_argument("--player-options", default="{}", metavar="JSON",
                        help="--player: the worker's player options as a JSON object (e.g. module_id)")
    parser.add_argument("--episodes", type=int, default=20, help="--evaluate: episodes to play")
    parser.add_argument("--opponent", help="--evaluate: 'random', or another run/checkpoint for the other seat(s)")
    parser.add_argument("--video", type=int, nargs="?", const=1, default=0, metavar="N",
                        help="--evaluate: record the first N episodes (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="--evaluate: first episode seed")
    parser.add_argument("--json", action="store_true", help="--evaluate: print results as JSON")
    parser.add_argument("--fastlane", action="store_true",
                        help="--evaluate: stream frames for `mosaic watch RUN --stream eval`")
    if program.add_arguments:
        program.add_arguments(parser)
    args = parser.parse_args(argv)

    try:
        if program.handle_arguments:
            code = program.handle_arguments(args)
            if code is not None:
                return code
        if args.describe:
            print(json.dumps(describe_program(program), indent=2, default=str))
            return EXIT_COMPLETED
        if args.schema:
            print(json.dumps(algo_params_schema(program, args.schema), indent=2, sort_keys=True))
            return EXIT_COMPLETED
        if args.evaluate:
            return evaluate(program, args)
        if args.player:
            if program.make_player is None:
                raise UserError(f"--player: the {program.name} worker cannot serve a player (its describe "
                                "document says can_serve_player: false)")
            from mosaic.configkit import json_object
            from mosaic.workerkit.player import serve

            player = program.make_player(args.player, json_object(args.player_options, "--player-options"))
            startup.resume()
            return serve(player, program.name)
        if args.default_config:
            print(json.dumps({**program.default_config(), "worker": program.name}, indent=2))
            return EXIT_COMPLETED
        if args.validate_many:
            return _validate_many(program)
        stream = None
        if args.handshake:
            agreed = _handshake(program)
            if isinstance(agreed, int):
                return agreed
            config, run_dir, stream = agreed
        elif not args.config:
            raise UserError("config: --dry-run needs --config PATH" if args.dry_run else
                            "config: --config PATH (or - for stdin) is required")
        else:
            config = build_config(program, load_config_data(args.config))
        checked = program.deep_validate(config) if program.deep_validate and stream is None else None
        rounded, said = _said_up_front(program, config)
        if args.dry_run:
            shown = program.dry_run(config, checked) if program.dry_run else {}
            if rounded is not None and rounded.env_steps is not None:
                shown["env_steps"] = rounded.env_steps
            if said:
                shown["warnings"] = [*shown.get("warnings", []), *(message for message, _ in said)]
            print(json.dumps({"worker": program.name, "config": config.to_dict(), **shown},
                             indent=2, default=str))
            return EXIT_COMPLETED
        if args.validate:
            print(json.dumps({"worker": program.name, **config.to_dict()}, indent=2))
            return EXIT_COMPLETED
        if stream is not None:
            pass  # the handshake named the run folder
        elif args.run_dir:
            run_dir = RunDir(Path(args.run_dir))
        else:
            run_dir = RunStore().create(config.run_id, {"worker": program.name, **config.to_dict()},
                                        {"worker": program.name})
    except UserError as exc:
        print(f"mosaic: error: {exc}", file=sys.stderr)
        return EXIT_USAGE

    def started() -> None:
        startup.resume()
        for message, fields in said:  # said up front: the run's first events after run_started
            emitter.log(message, level="warning", **fields)

    emitter = TelemetryEmitter(config.run_id, stream=stream or _telemetry_stream(), on_run_started=started)
    progress = ProgressTracker()
    control = RunControl(emitter, progress)
    control.install_signal_handlers()
    context = WorkerContext(emitter=emitter, control=control, run_dir=run_dir, progress=progress)
    watchdog = RunWatchdog(progress, control,
                           on_failure=lambda kind, message: _abort_failed(program, context, kind, message),
                           on_stuck_cancel=lambda reason: _abort_cancelled(program, context, reason))
    with Heartbeat(emitter, program.heartbeat_interval_s(config), progress), watchdog:
        try:
            try:
                summary = program.make_runtime(config, context).run()
            finally:
                progress.stop()  # the runtime is done: its threads may end now
        except RunCancelled as exc:
            emitter.run_cancelled(reason=str(exc))
            return EXIT_CANCELLED
        except BaseException as exc:  # report every failure as telemetry
            emitter.run_failed(exc)
            print(f"{program.name}: run failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            return EXIT_FAILED
    emitter.run_completed(summary)
    return EXIT_COMPLETED


def _validate_many(program: WorkerProgram) -> int:
    """``--validate-many``: each stdin line checked as ``--validate`` would, answered on its own line.

    An experiment's plan checks every cell this way: one interpreter start per worker, not per cell.
    """
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            try:
                data = json.loads(line)
            except ValueError as exc:
                raise UserError(f"config: the line is not JSON ({exc})") from None
            if not isinstance(data, dict):
                raise UserError("config: each line must be a JSON object")
            config = build_config(program, data)
            if program.deep_validate:
                program.deep_validate(config)
            answer = {"ok": True, "config": {"worker": program.name, **config.to_dict()}}
            rounded = program.rounded_budget(config, 0) if program.rounded_budget else None
            if rounded is not None:  # what its library will take instead of total_timesteps (a study compares it)
                answer["rounded_budget"] = {"env_steps": rounded.env_steps, "message": rounded.message}
        except UserError as exc:
            answer = {"ok": False, "error": str(exc)}
        sys.stdout.write(json.dumps(answer, default=str) + "\n")
        sys.stdout.flush()
        startup.resume()  # the first line imported what checking needs; the others may be many
    return EXIT_COMPLETED


def _handshake(program: WorkerProgram) -> "int | tuple[Any, RunDir, IO[str]]":
    """``--handshake``: check the config, say so with it normalised, wait for the run folder.

    The launcher creates the run folder only after the config passed, so a bad config leaves
    nothing behind, and the run starts without a second interpreter checking it first. An empty
    answer means the launcher gave up before the run existed: exit as cancelled, silently.
    """
    line = sys.stdin.readline()
    try:
        data = json.loads(line) if line.strip() else None
    except ValueError as exc:
        raise UserError(f"config: the handshake's first line is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise UserError("config: the handshake's first line must be a JSON object")
    config = build_config(program, data)
    if program.deep_validate:
        program.deep_validate(config)
    stream = _telemetry_stream()
    stream.write(json.dumps({"handshake": "valid", "config": {"worker": program.name, **config.to_dict()}}) + "\n")
    stream.flush()
    answer = sys.stdin.readline()
    if not answer.strip():
        return EXIT_CANCELLED
    run_dir = json.loads(answer)["run_dir"]
    os.environ["MOSAIC_RUN_DIR"] = run_dir  # as a worker started with --run-dir has it, for its children
    return config, RunDir(Path(run_dir)), stream


def algo_params_schema(program: WorkerProgram, algorithm: str) -> dict[str, Any]:
    """``--schema ALGORITHM``: :class:`UserError` naming the algorithms when there is none."""
    if program.algo_params_schema is None:
        raise UserError(f"--schema: worker {program.name!r} has no per-algorithm hyperparameter schema")
    algorithms = list(program.describe()[1].algorithms) if program.describe else []
    wanted = next((a for a in algorithms if a.lower() == algorithm.lower()), None)
    if algorithms and wanted is None:
        from mosaic.errors import one_of

        raise UserError(f"--schema: {one_of(algorithm, algorithms)}")
    return program.algo_params_schema(wanted or algorithm)


def evaluate(program: WorkerProgram, args: argparse.Namespace) -> int:
    if program.evaluate is None:
        raise UserError(f"--evaluate: worker {program.name!r} cannot evaluate (it trains no policies)")
    if args.episodes < 1:
        raise UserError(f"--episodes: must be >= 1, got {args.episodes}")
    if args.video < 0:
        raise UserError(f"--video: must be >= 0, got {args.video}")
    from mosaic.workerkit.evaluation import evaluating

    with evaluating(args.evaluate, args.opponent):  # progress on a terminal; the results record the opponent
        return program.evaluate(EvaluateRequest(target=args.evaluate, episodes=args.episodes,
                                                opponent=args.opponent, video=args.video, seed=args.seed,
                                                json=args.json, fastlane=args.fastlane))


def _abort_failed(program: WorkerProgram, context: WorkerContext, error_type: str, message: str) -> None:
    """The run cannot go on and its main thread may never return: report, clean up, exit now."""
    dead = context.progress.dead_threads()
    cause = thread_failure(dead[0][1]) if dead else None
    detail = cause[1] if cause else "stuck at:\n" + thread_stacks()
    if context.emitter.failure(error_type, message, detail) is None and context.emitter.terminal:
        return  # the run ended on its own meanwhile
    print(f"{program.name}: run failed: {error_type}: {message}\n{detail}", file=sys.stderr)
    _exit_now(context, EXIT_FAILED)


def _abort_cancelled(program: WorkerProgram, context: WorkerContext, reason: str) -> None:
    """A cancel the runtime could not honour (stuck inside the library): end the run as cancelled."""
    if context.emitter.run_cancelled(reason=reason) is None and context.emitter.terminal:
        return
    print(f"{program.name}: run cancelled: {reason}\nstuck at:\n{thread_stacks()}", file=sys.stderr)
    _exit_now(context, EXIT_CANCELLED)


def _exit_now(context: WorkerContext, code: int) -> None:
    context.control.run_abort_hooks()
    sys.stderr.flush()
    os._exit(code)
