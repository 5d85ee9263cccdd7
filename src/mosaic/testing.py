"""Conformance kit for worker authors, in the spirit of PettingZoo's ``api_test``.

``check_worker("myworker", config)`` runs the worker as a real subprocess
exactly as ``mosaic run`` would, then checks that it honours the contract:
lifecycle order, envelope fields, strictly increasing ``seq``, the telemetry
schema (when ``jsonschema`` is installed), exit codes, run-folder contents,
metadata consistent with capabilities, and the one-line error for a bad
config. It raises :class:`ConformanceError` listing every problem found.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from mosaic.discovery import DiscoveredWorker, discover_workers
from mosaic.errors import UserError
from mosaic.launcher import RunOutcome, WorkerProcess, validate_config, worker_command
from mosaic.run_status import RunState
from mosaic.runs import ARTEFACT_DIRS, RunDir, RunStore, new_run_id
from mosaic.telemetry import ENVELOPE_FIELDS, EVENT_TYPES, TERMINAL_TYPES


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
    from mosaic.telemetry_schema import TELEMETRY_SCHEMA

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

    for item in ("config.json", "telemetry.jsonl", "analytics.json", *ARTEFACT_DIRS):
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

    from mosaic import describe

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


# -- workers with environments of their own ------------------------------------

def worker_env_for_tests(name: str, checkout: Path, scratch: "Callable[[], Path]") -> Path:
    """An up-to-date environment of worker ``name``, for its tests.

    ``scripts/bootstrap`` builds every worker's environment into the checkout's
    ``var/envs``; the tests use that one when it is up to date, and otherwise build
    their own into the home ``scratch()`` returns (seconds, from uv's cache).
    """
    from mosaic import worker_envs

    source = worker_envs.scan().get(name)
    checkout_home = Path(checkout) / "var"
    if worker_envs.status(source, checkout_home).status == "ok":
        return worker_envs.envs_root(checkout_home) / name
    return worker_envs.build(name, home=scratch()).path


@dataclass
class WorkerHome:
    """A MOSAIC_HOME whose ``envs/<worker>`` is a built environment, and the real CLI on it."""

    root: Path
    env: Path
    worker: str

    @classmethod
    def create(cls, root: Path, worker: str, env: Path) -> "WorkerHome":
        (root / "envs").mkdir(parents=True, exist_ok=True)
        (root / "envs" / worker).symlink_to(env, target_is_directory=True)
        return cls(root, env, worker)

    @property
    def python(self) -> str:
        return str(self.env / "bin" / "python")

    def cli(self, *args: str, timeout: float = 900, **kwargs: Any) -> subprocess.CompletedProcess:
        """``python -m mosaic ARGS`` (MOSAIC's own interpreter) on this home."""
        import sys

        env = {**os.environ, "MOSAIC_HOME": str(self.root), **kwargs.pop("env", {})}
        return subprocess.run([sys.executable, "-m", "mosaic", *args], capture_output=True, text=True,
                              timeout=timeout, env=env, **kwargs)

    def config(self, name: str, **fields: Any) -> Path:
        path = self.root / f"{name}.json"
        path.write_text(json.dumps({"worker": self.worker, **fields}))
        return path

    def check_refused(self, fields: Mapping[str, Any], field: str, words: str) -> str:
        """``mosaic run`` of a config with ``fields`` exits 2 with one line naming ``field`` (and saying
        ``words``), no traceback, and no run folder; the line is returned."""
        proc = self.cli("run", str(self.config("bad", **fields)))
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"mosaic: error: {field}: "), proc.stderr
        assert words in lines[0]
        assert "Traceback" not in proc.stderr and self.runs() == []
        return lines[0]

    def runs(self) -> list[Path]:
        """Run folders, oldest first."""
        folder = self.root / "trainer" / "runs"
        return sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime) if folder.exists() else []

    def events(self, run: Path, kind: str | None = None) -> list[dict[str, Any]]:
        return run_events(run, kind)



def run_events(run: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """A run folder's telemetry events (of one ``kind``), in order.

    A run still writing may have a last line without its newline yet: that one is left out.
    """
    path = Path(run) / "telemetry.jsonl"
    text = path.read_text() if path.exists() else ""
    lines = text.split("\n")[:-1]  # complete lines only
    out = [json.loads(line) for line in lines if line.strip()]
    return [e for e in out if kind is None or e["type"] == kind]


@dataclass
class LocalDaemon:
    """A real ``mosaic daemon`` subprocess serving ``home`` on a free loopback port, and a client of it.

    Made by :func:`start_daemon`; :meth:`stop` ends it with SIGTERM, as a user's Ctrl-C would.
    """

    home: Path
    proc: subprocess.Popen
    args: tuple[str, ...]
    env: dict[str, str]
    log_path: Path
    client: Any = None

    def connect(self, timeout: float = 60) -> None:
        from mosaic.daemon.client import DaemonClient
        from mosaic.daemon.endpoint import read_endpoint_file

        endpoint_file = self.home / "trainer" / "daemon" / "daemon.json"

        def ready() -> Any:
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}: {self.log()}")
            endpoint = read_endpoint_file(endpoint_file)
            return endpoint if endpoint and endpoint.pid == self.proc.pid else None

        endpoint = wait_until(ready, timeout, "the daemon to listen")
        self.client = DaemonClient(endpoint.address, self.env.get("MOSAIC_TOKEN"))

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def state(self, run_id: str) -> str:
        from mosaic.daemon.client import state_name

        return state_name(self.client.get(run_id).state)

    def wait_state(self, run_id: str, states: str | set[str], timeout: float = 30) -> Any:
        """The run's ``RunInfo`` once its state is one of ``states``; fails at once if the daemon dies."""
        from mosaic.daemon.client import state_name

        wanted = {states} if isinstance(states, str) else states
        return wait_until(lambda: (i := self.client.get(run_id)) and state_name(i.state) in wanted and i,
                          timeout, f"run {run_id} to reach {sorted(wanted)}", interval=0.05, proc=self.proc)

    def submit(self, config: Mapping[str, Any], **kwargs: Any) -> str:
        return self.client.submit(dict(config), **kwargs).run_id

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return run_events(self.home / "trainer" / "runs" / run_id)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM, then wait; killed if it has not ended after ``timeout`` s."""
        import signal

        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
        finally:
            if self.client is not None:
                self.client.close()


def start_daemon(home: str | Path, *args: str, env: Mapping[str, str] | None = None,
                 timeout: float = 60, command: tuple[str, ...] = ("-m", "mosaic", "daemon")) -> LocalDaemon:
    """Start ``mosaic daemon --port 0 ARGS`` for ``home`` and connect to it.

    The daemon's output goes to a log file in ``home``. It runs without a token unless ``env`` gives
    ``MOSAIC_TOKEN``, and with Ray's token auth off (its runs start private local clusters).
    ``command`` (after the interpreter) may swap ``-m mosaic daemon`` for a wrapper, e.g. a profiler's.
    """
    import sys

    home = Path(home)
    full_env = {**os.environ, "MOSAIC_HOME": str(home), "RAY_AUTH_MODE": "disabled", **(env or {})}
    if "MOSAIC_TOKEN" not in (env or {}):
        full_env.pop("MOSAIC_TOKEN", None)
    home.mkdir(parents=True, exist_ok=True)
    log_path = home / f"daemon-{time.monotonic_ns()}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, *command, "--port", "0", *args],
                                stdout=log, stderr=subprocess.STDOUT, env=full_env)
    daemon = LocalDaemon(home, proc, args, full_env, log_path)
    try:
        daemon.connect(timeout)
    except BaseException:
        daemon.stop()
        raise
    return daemon


def run_under_daemon(home: str | Path, config: Mapping[str, Any], timeout: float = 600.0,
                     env: Mapping[str, str] | None = None) -> tuple[Any, list[dict[str, Any]]]:
    """Start a real daemon for ``home``, validate and submit ``config`` through it, wait for the run's end.

    Returns the daemon's last ``RunInfo`` of the run and the run's telemetry events;
    the daemon is stopped (SIGTERM) before returning, whatever happened.
    """
    daemon = start_daemon(home, env=env)
    try:
        ok, _normalised, error = daemon.client.validate_config(dict(config))
        assert ok, f"the daemon refused the config: {error}"
        run_id = daemon.submit(config)
        info = daemon.wait_state(run_id, {"COMPLETED", "FAILED", "CANCELLED"}, timeout)
        return info, daemon.events(run_id)
    finally:
        daemon.stop()


#: Events that show a run is training (or playing): none may come while it is paused.
PROGRESS_TYPES = ("episode", "metrics", "checkpoint_saved")


def check_pause_resume(run: Path, proc: "subprocess.Popen | None" = None, heartbeats: int = 2,
                       timeout: float = 120.0) -> list[dict[str, Any]]:
    """Pause a training run by signal, see it hold still, resume it and see it train again.

    ``run`` is the folder of a run that is training (its worker's pid is in
    ``analytics.json``); ``proc`` the process that started it (``mosaic run``), so a
    run that dies fails at once. SIGUSR1 must bring a ``paused`` event; ``heartbeats``
    heartbeats after it prove time passed with the worker alive, and no event of
    :data:`PROGRESS_TYPES` may come before ``resumed``; SIGUSR2 must bring ``resumed``
    and then new progress. The run keeps going: the caller ends it. Returns the
    events up to that new progress.
    """
    import signal

    pid = json.loads((Path(run) / "analytics.json").read_text())["pid"]
    wait_until(lambda: any(e["type"] in PROGRESS_TYPES for e in run_events(run)), timeout,
               "the run to make progress before it is paused", proc=proc)
    os.kill(pid, signal.SIGUSR1)
    paused_at = wait_until(lambda: _index_of(run_events(run), "paused"), timeout, "a paused event", proc=proc)

    def since_paused() -> list[str]:
        return [e["type"] for e in run_events(run)[paused_at + 1:]]

    wait_until(lambda: since_paused().count("heartbeat") >= heartbeats, timeout,
               f"{heartbeats} heartbeats while paused", proc=proc)
    moved = set(since_paused()) & set(PROGRESS_TYPES)
    assert not moved, f"the run made progress while paused: {sorted(moved)}"
    os.kill(pid, signal.SIGUSR2)
    resumed_at = wait_until(lambda: _index_of(run_events(run), "resumed"), timeout, "a resumed event", proc=proc)
    assert not set(e["type"] for e in run_events(run)[paused_at + 1:resumed_at]) & set(PROGRESS_TYPES)
    wait_until(lambda: any(e["type"] in PROGRESS_TYPES for e in run_events(run)[resumed_at + 1:]), timeout,
               "progress after resuming", proc=proc)
    return run_events(run)


def check_live_evaluation(home: WorkerHome, config: Path, run_id: str, snapshot: Path,
                          results_file: str = "results.json", timeout: float = 300.0) -> Path:
    """A long evaluation started with ``mosaic run``: its FastLane frames reach ``mosaic watch``, it pauses
    and resumes (:func:`check_pause_resume`), and Ctrl-C cancels it (exit 3, ``run_cancelled``) leaving
    no ``results_file`` and no shared memory. The config must stream frames and outlast the checks.
    Returns the run folder."""
    import signal
    import sys

    import numpy as np

    from mosaic.fastlane.png import read_png
    from mosaic.fastlane.shm import list_segments

    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", run_id],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MOSAIC_HOME": str(home.root)})
    run = home.root / "trainer" / "runs" / run_id
    try:
        wait_until(lambda: list_segments(run_id), timeout, "the FastLane stream", interval=0.1, proc=proc)
        watched = home.cli("watch", run_id, "--snapshot", str(snapshot), timeout=120)
        assert watched.returncode == 0, watched.stderr
        pixels, _meta = read_png(snapshot)
        assert pixels.ndim == 3 and len(np.unique(pixels.reshape(-1, pixels.shape[2]), axis=0)) > 3
        check_pause_resume(run, proc, heartbeats=2, timeout=timeout)
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(120)
    assert code == 3, proc.stderr.read()[-2000:]
    assert run_events(run)[-1]["type"] == "run_cancelled"
    assert not (run / results_file).exists() and not list_segments(run_id)
    return run


def _index_of(events: list[dict[str, Any]], kind: str) -> int | None:
    """Position of the first event of ``kind`` (None when there is none; 0 is never one here)."""
    for position, event in enumerate(events):
        if event["type"] == kind:
            return position
    return None


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02,
               proc: "subprocess.Popen | None" = None) -> Any:
    """Poll ``predicate`` until it returns something truthy, and return that.

    Fails at the deadline naming ``what``, or as soon as ``proc`` (a process
    expected to produce it) has ended. Tests wait on conditions, never on fixed sleeps.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the process ended (exit {proc.returncode}) before {what}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
