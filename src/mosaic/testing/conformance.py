"""Conformance kit for worker authors, in the spirit of PettingZoo's ``api_test``.

``check_worker("myworker", config)`` runs the worker as a real subprocess
exactly as ``mosaic run`` would, then checks that it honours the contract:
lifecycle order, envelope fields, strictly increasing ``seq``, the telemetry
schema (when ``jsonschema`` is installed), exit codes, run-folder contents,
metadata consistent with capabilities, and the one-line error for a bad
config. It raises :class:`ConformanceError` listing every problem found."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping
from mosaic.host.discovery import DiscoveredWorker, discover_workers
from mosaic.errors import UserError
from mosaic.host.launcher import RunOutcome, WorkerProcess, validate_config, worker_command
from mosaic.run_status import RunState
from mosaic.runs import ARTEFACT_DIRS, RUN_FILES, RunDir, RunStore, new_run_id
from mosaic.workerkit.telemetry import ENVELOPE_FIELDS, EVENT_TYPES, TERMINAL_TYPES


class ConformanceError(AssertionError):
    pass


@dataclass
class ConformanceReport:
    worker: str
    run: RunDir
    outcome: RunOutcome
    events: list[dict[str, Any]]
    raw_stdout_events: list[dict[str, Any]] = field(default_factory=list)

    def of_type(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == event_type]


def _schema_problems(events: list[dict[str, Any]]) -> list[str]:
    try:
        import jsonschema
    except ImportError:  # the kit still checks everything else
        return []
    from mosaic.workerkit.telemetry_schema import TELEMETRY_SCHEMA

    validator = jsonschema.Draft202012Validator(TELEMETRY_SCHEMA)
    problems = []
    for event in events:
        for err in validator.iter_errors(event):
            where = "/".join(map(str, err.absolute_path)) or "(event)"
            problems.append(f"seq {event.get('seq')} ({event.get('type')}): {where}: {err.message}")
    return problems


def check_event_stream(events: list[dict[str, Any]], run_id: str,
                       check_schema: bool = True) -> list[str]:
    """Contract problems of one run's event list (empty when it conforms)."""
    problems: list[str] = []
    if not events:
        return ["no telemetry events at all"]
    for i, event in enumerate(events):
        missing = [f for f in ENVELOPE_FIELDS if f not in event]
        if missing:
            problems.append(f"event {i} ({event.get('type')}) lacks {', '.join(missing)}")
        if event.get("run_id") != run_id:
            problems.append(f"event {i} has run_id {event.get('run_id')!r}, expected {run_id!r}")
        if event.get("type") not in EVENT_TYPES:
            problems.append(f"event {i} has unknown type {event.get('type')!r}")
        if event.get("type") == "log" and event.get("raw"):
            problems.append(f"event {i} is a stray non-telemetry stdout line: {event.get('message')!r:.120}")
    seqs = [e.get("seq") for e in events]
    if any(not isinstance(s, int) for s in seqs) or any(b <= a for a, b in zip(seqs, seqs[1:])):
        problems.append(f"seq is not strictly increasing: {seqs[:20]}")
    if events[0].get("type") != "run_started":
        problems.append(f"first event is {events[0].get('type')!r}, expected 'run_started'")
    terminals = [e for e in events if e.get("type") in TERMINAL_TYPES]
    if len(terminals) != 1 or events[-1].get("type") not in TERMINAL_TYPES:
        problems.append(f"expected exactly one terminal event, last; got {[e['type'] for e in terminals]}")
    if check_schema:
        problems.extend(_schema_problems(events))
    return problems


def _raw_stdout_events(worker: DiscoveredWorker, config_path: Path, run_root: Path) -> list[dict]:
    """Run the worker directly to see its own stdout, unrenumbered."""
    proc = subprocess.run([*worker_command(worker), "--config", str(config_path),
                           "--run-dir", str(run_root)], capture_output=True, timeout=600)
    events = []
    for line in proc.stdout.splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            events.append({"type": "log", "raw": True, "message": line[:200].decode("utf-8", "replace")})
    return events


def check_worker(name: str, config: Mapping[str, Any], home: str | Path | None = None,
                 bad_config: Mapping[str, Any] | None = None, check_raw_stdout: bool = True,
                 env: Mapping[str, str] | None = None, resume: bool = False) -> ConformanceReport:
    """Run worker ``name`` on ``config`` and assert it honours the MOSAIC contract.

    ``resume``: also resume a second run from the first one's last checkpoint
    (``checkpoint.restore_from``) and hold its telemetry to the same rules (its first
    event is ``run_started`` too).
    """
    found = discover_workers()
    try:
        worker = found.get(name)
    except UserError as exc:
        raise ConformanceError(str(exc)) from None
    problems: list[str] = []
    caps = worker.capabilities
    if caps.worker_type != name:
        problems.append(f"capabilities.worker_type {caps.worker_type!r} != {name!r}")

    home_dir = Path(home) if home else Path(tempfile.mkdtemp(prefix="mosaic-conformance-"))
    store = RunStore(home_dir)
    run_id = new_run_id("conformance-")
    normalised = validate_config(worker, {**dict(config), "worker": name, "run_id": run_id})
    if normalised.get("run_id") != run_id:
        problems.append("--validate did not keep the run_id")
    run = store.create(run_id, normalised, {"worker": name, "status": RunState.CREATED.manifest})
    started = time.monotonic()
    outcome = WorkerProcess(worker, run, env=env).follow()
    elapsed = time.monotonic() - started
    events = list(run.iter_events())

    if outcome.returncode != 0 or outcome.status != RunState.COMPLETED.manifest:
        problems.append(f"run ended {outcome.status} with exit code {outcome.returncode}: "
                        f"{outcome.terminal.get('message', '')}")
    problems.extend(check_event_stream(events, run_id))
    started_event = events[0] if events else {}
    if started_event.get("worker") != name:
        problems.append(f"run_started.worker is {started_event.get('worker')!r}, expected {name!r}")
    algo = started_event.get("algorithm")
    if algo is not None and algo.lower() not in {a.lower() for a in caps.algorithms}:
        problems.append(f"run_started.algorithm {algo!r} is not in capabilities.algorithms {caps.algorithms}")
    family = (started_event.get("env") or {}).get("family")
    if family is not None and family not in caps.env_families:
        problems.append(f"env family {family!r} is not in capabilities.env_families {caps.env_families}")
    policy = started_event.get("policy_configuration")
    if policy is not None and policy not in caps.policy_configurations:
        problems.append(f"policy_configuration {policy!r} not in {caps.policy_configurations}")
    agents = started_event.get("agents") or []
    if len(agents) > caps.max_agents:
        problems.append(f"{len(agents)} agents exceed capabilities.max_agents {caps.max_agents}")
    if not any(e.get("type") == "metrics" for e in events):
        problems.append("no metrics event")

    for item in (*RUN_FILES, *ARTEFACT_DIRS):
        if not (run.root / item).exists():
            problems.append(f"run folder lacks {item}")
    manifest = run.read_manifest()
    if manifest.get("status") != RunState.COMPLETED.manifest:
        problems.append(f"manifest status is {manifest.get('status')!r}")
    if "python" not in manifest.get("versions", {}):
        problems.append("manifest lacks versions.python")
    for ckpt in (e for e in events if e.get("type") == "checkpoint_saved"):
        if not Path(ckpt["path"]).exists() and not (run.root / ckpt["path"]).exists():
            problems.append(f"checkpoint_saved names a missing path {ckpt['path']!r}")
    if any(e.get("type") == "checkpoint_saved" for e in events) and not caps.supports_checkpointing:
        problems.append("worker saves checkpoints but does not claim supports_checkpointing")

    raw: list[dict] = []
    if check_raw_stdout:
        with tempfile.TemporaryDirectory() as tmp:
            raw_run = RunStore(tmp).create(run_id, normalised, {"worker": name})
            raw = _raw_stdout_events(worker, raw_run.config_path, raw_run.root)
        problems.extend(f"own stdout: {p}" for p in check_event_stream(raw, run_id, check_schema=False))

    if resume:
        problems.extend(_resume_problems(worker, normalised, events, store, env))

    bad = dict(bad_config) if bad_config is not None else {"seed": "not-a-number"}
    problems.extend(_usage_error(worker, ["--validate", "--config", "-"], {**bad, "worker": name}, env,
                                 "a bad config"))
    problems.extend(check_shared_flags(worker, normalised, env))
    if problems:
        raise ConformanceError(f"worker {name!r} does not conform ({elapsed:.1f} s run):\n  - "
                               + "\n  - ".join(problems))
    return ConformanceReport(name, run, outcome, events, raw)


def _resume_problems(worker: DiscoveredWorker, normalised: Mapping[str, Any], events: list[dict[str, Any]],
                     store: RunStore, env: Mapping[str, str] | None) -> list[str]:
    """Resume from the run's last checkpoint as a new run; what is wrong with that run's telemetry."""
    saved = [e for e in events if e.get("type") == "checkpoint_saved"]
    if not saved:
        return ["resume: the run saved no checkpoint to resume from"]
    run_id = new_run_id("conformance-resume-")
    config = {**dict(normalised), "run_id": run_id,
              "checkpoint": {**dict(normalised.get("checkpoint") or {}), "restore_from": saved[-1]["path"]}}
    if isinstance(normalised.get("total_timesteps"), int):  # a budget left to train on after the checkpoint
        config["total_timesteps"] = 2 * normalised["total_timesteps"]
    resumed_config = validate_config(worker, config)
    run = store.create(run_id, resumed_config, {"worker": worker.name, "status": RunState.CREATED.manifest})
    outcome = WorkerProcess(worker, run, env=env).follow()
    found = [f"resume: {p}" for p in check_event_stream(list(run.iter_events()), run_id)]
    if outcome.status != RunState.COMPLETED.manifest:
        found.append(f"resume: ended {outcome.status}: {outcome.terminal.get('message', '')}")
    return found


def _call(worker: DiscoveredWorker, args: list[str], stdin: Mapping[str, Any] | None = None,
          env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*worker_command(worker), *args], input=json.dumps(stdin) if stdin is not None else "",
                          capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def _usage_error(worker: DiscoveredWorker, args: list[str], stdin: Mapping[str, Any] | None,
                 env: Mapping[str, str] | None, what: str) -> list[str]:
    """Bad input must exit 2 with one error line on stderr and nothing on stdout."""
    proc = _call(worker, args, stdin, env)
    found = []
    if proc.returncode != 2:
        found.append(f"{what} exited {proc.returncode}, expected 2")
    if proc.stdout.strip():
        found.append(f"{what} printed to stdout")
    if "Traceback" in proc.stderr or len(proc.stderr.strip().splitlines()) != 1:
        found.append(f"{what} should give one error line, got: {proc.stderr.strip()[:300]!r}")
    return found


def check_shared_flags(worker: DiscoveredWorker, config: Mapping[str, Any],
                       env: Mapping[str, str] | None = None) -> list[str]:
    """``--describe``, ``--schema``, ``--dry-run``, ``--evaluate`` and ``--default-config`` as the contract says."""
    import jsonschema

    from mosaic.workerkit import describe

    found: list[str] = []
    proc = _call(worker, ["--describe"], env=env)
    try:
        document = json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        document = None
    if document is None:
        return [f"--describe exited {proc.returncode} without a JSON document: {proc.stderr.strip()[-300:]!r}"]
    found += [f"--describe: {p}" for p in describe.problems(document)]
    if found:
        return found
    if document["worker"] != worker.name:
        found.append(f"--describe names worker {document['worker']!r}")
    if document["metadata"] != worker.metadata.to_dict():
        found.append("--describe metadata differs from discovery's")
    if document["capabilities"] != json.loads(json.dumps(worker.capabilities.to_dict())):
        found.append("--describe capabilities differ from discovery's")
    schema = document["config_schema"]
    for label, data in (("the normalised config", config),
                        ("the default config", {**document["default_config"], "run_id": "conformance-default"})):
        for error in list(jsonschema.Draft202012Validator(schema).iter_errors(data))[:3]:
            found.append(f"--describe config_schema rejects {label}: {error.message}")
    proc = _call(worker, ["--default-config"], env=env)
    if proc.returncode != 0 or json.loads(proc.stdout or "null") != document["default_config"]:
        found.append("--default-config differs from --describe's default_config")
    for algorithm, expected in document["algo_params_schemas"].items():
        proc = _call(worker, ["--schema", algorithm], env=env)
        if proc.returncode != 0 or json.loads(proc.stdout or "null") != expected:
            found.append(f"--schema {algorithm} differs from --describe's algo_params_schemas[{algorithm!r}]")
    found += _usage_error(worker, ["--schema", "no-such-algorithm"], None, env, "--schema of an unknown algorithm")
    proc = _call(worker, ["--dry-run", "--config", "-"], config, env)
    try:
        shown = json.loads(proc.stdout) if proc.returncode == 0 else None
    except ValueError:
        shown = None
    without_worker = lambda c: {k: v for k, v in c.items() if k != "worker"}  # noqa: E731
    if not isinstance(shown, dict) or not isinstance(shown.get("config"), dict) or \
            without_worker(shown["config"]) != without_worker(config):
        found.append(f"--dry-run exited {proc.returncode} without the config as JSON: "
                     f"{proc.stderr.strip()[-300:]!r}")
    found += _usage_error(worker, ["--evaluate", "/nonexistent/mosaic-run"], None, env,
                          "--evaluate of a missing run" if document["can_evaluate"] else
                          "--evaluate of a worker that cannot evaluate")
    return found


def fastlane_leaks(before: set[str], ours_under: str | Path | None = None) -> list[str]:
    """FastLane segments that appeared since ``before`` and are this test process's doing.

    A leak check must not blame (or delete) the live streams of other MOSAIC runs
    on the same machine, say a training run watched while the tests run: a new
    segment whose writer is alive and not this process or one of its descendants
    is someone else's. So is one written for a run folder outside ``ours_under``
    (the other pytest process of a parallel test run keeps its runs in its own
    temporary folder). Any other segment whose writer is gone counts.
    """
    from mosaic.fastlane.gc import inspect
    from mosaic.fastlane.shm import list_segments
    from mosaic.pids import descends_from

    root = Path(ours_under).resolve() if ours_under is not None else None
    ours = []
    for name in sorted(set(list_segments()) - set(before)):
        status = inspect(name)
        if status.writer_alive and status.pid and not descends_from(status.pid, os.getpid()):
            continue
        run_dir = status.owner.get("run_dir")
        if root is not None and run_dir and not Path(run_dir).resolve().is_relative_to(root):
            continue
        ours.append(name)
    return ours
