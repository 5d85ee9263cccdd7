"""The run store: one folder per run under ``$MOSAIC_HOME/trainer/runs``.

A run folder holds ``config.json`` (what was asked), ``telemetry.jsonl``
(what happened), ``analytics.json`` (the manifest: what it was and where its
artefacts are) and the artefact folders ``checkpoints/``, ``tensorboard/``,
``logs/``, ``videos/`` and ``eval/``.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from mosaic.errors import UserError

RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
#: The name of an experiment or a tournament (its folder's name under ``$MOSAIC_HOME``).
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: ``NAME_PATTERN`` in words, for the errors that refuse a name.
NAME_RULE = "letters, digits, '.', '_', '-', 1 to 64 characters, starting with a letter or digit"
#: The word for the newest run, wherever a run id goes (``mosaic show latest``): never a run's own id.
LATEST = "latest"
ARTEFACT_DIRS = ("checkpoints", "tensorboard", "logs", "videos", "eval")
MANIFEST_VERSION = 1
#: The run folder's files, named once: what was asked, what happened, the manifest, the worker's stderr.
CONFIG_FILE = "config.json"
TELEMETRY_FILE = "telemetry.jsonl"
MANIFEST_FILE = "analytics.json"
WORKER_LOG = "logs/worker.log"
#: The files a run folder holds besides its artefact folders.
RUN_FILES = (CONFIG_FILE, TELEMETRY_FILE, MANIFEST_FILE)


def mosaic_home() -> Path:
    """``$MOSAIC_HOME``, else :func:`default_home`, made absolute: a run folder's path is handed to libraries
    (RLlib's checkpoints take only absolute paths) and to processes started in other folders."""
    given = os.environ.get("MOSAIC_HOME")
    return Path(given).expanduser().absolute() if given else default_home()


def checkout_root() -> Path | None:
    """The source checkout this package is imported from (an editable install, or ``src`` on the path):
    the folder holding ``pyproject.toml`` above ``src/mosaic``; None for an installed package."""
    package = Path(__file__).resolve().parent
    root = package.parent.parent
    if package.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


def user_data_home() -> Path:
    """The per-user data folder of an installed MOSAIC: ``$XDG_DATA_HOME/mosaic`` (``~/.local/share/mosaic``) on
    Linux and the BSDs, ``~/Library/Application Support/mosaic`` on macOS, ``%LOCALAPPDATA%\\mosaic`` on
    Windows."""
    import sys

    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "mosaic"
    if sys.platform.startswith("win"):
        return Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "mosaic"
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "mosaic"


def default_home() -> Path:
    """Where MOSAIC keeps runs, experiments, tournaments and worker environments when ``MOSAIC_HOME`` is not set,
    the same from any current directory: a checkout's own ``var/`` (each clone has its own, and builds its own
    worker environments there), else the per-user data folder (:func:`user_data_home`)."""
    root = checkout_root()
    return (root / "var") if root is not None else user_data_home()


def new_run_id(prefix: str = "") -> str:
    """A run id that sorts by creation time: ``20261121-233334-123-9f3a1c``."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    millis = int((now % 1) * 1000)
    rid = f"{stamp}-{millis:03d}-{secrets.token_hex(3)}"
    return f"{prefix}{rid}" if prefix else rid


def validate_run_id(run_id: Any, field: str = "run_id") -> str:
    """Return ``run_id`` if it is a safe folder name, else raise :class:`UserError`."""
    if not isinstance(run_id, str):
        raise UserError(f"{field}: must be a string of [A-Za-z0-9._-], got {type(run_id).__name__}")
    if not RUN_ID_PATTERN.match(run_id) or run_id in {".", ".."}:
        raise UserError(
            f"{field}: {run_id!r} is not a valid run id "
            "(allowed: letters, digits, '.', '_', '-'; 1 to 128 characters; not '.' or '..')"
        )
    if run_id == LATEST:
        raise UserError(f"{field}: {LATEST!r} is reserved: it names the newest run wherever a run id goes "
                        "(allowed: any other id of letters, digits, '.', '_', '-')")
    return run_id


def append_jsonl(path: Path, entry: Any) -> None:
    """Append one JSON line to a journal: the whole line in one write, flushed to disk before returning."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (json.dumps(entry, default=str) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: Path) -> list[Any]:
    """A journal's lines (none if it does not exist yet); a torn line from a crash is skipped."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON so readers never see a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2, sort_keys=False, default=str)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


@contextmanager
def staged_folder(final: Path, *, replace: bool = False, suffix: str = "", mode: int | None = None,
                  sweep: bool = False) -> Iterator[Path]:
    """A folder to write ``final``'s files into, put in ``final``'s place only when the block ends without error:
    readers see no folder, or the whole new one (or, replacing, the whole old one).

    The folder is ``final``'s sibling ``.<name>.<random><suffix>`` (hidden: listings skip it), made with
    ``tempfile.mkdtemp`` (mode 0o700 unless ``mode`` is given). Any error, in the block or in the rename,
    removes it and is raised again; ``final`` is then as it was. Without ``replace`` it is renamed to
    ``final`` (the caller has checked that no ``final`` exists). With ``replace`` a ``final`` already there is
    first renamed aside (``.<name>.<random>.old``), put back if the rename fails, and removed only once the new
    one is in place. ``sweep``: first remove the staging folders ``.<name>.*<suffix>`` that a writer killed
    mid-write left (needs a ``suffix``).
    """
    final = Path(final)
    if sweep and not suffix:
        raise ValueError("staged_folder: sweep needs a suffix (it removes .<name>.*<suffix>)")
    final.parent.mkdir(parents=True, exist_ok=True)
    if sweep:
        for stale in final.parent.glob(f".{final.name}.*{suffix}"):
            shutil.rmtree(stale, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=suffix, dir=final.parent))
    try:
        if mode is not None:
            os.chmod(staging, mode)
        yield staging
        if not (replace and final.exists()):
            os.rename(staging, final)
        else:
            old = final.with_name(f".{final.name}.{secrets.token_hex(4)}.old")
            os.rename(final, old)
            try:
                os.rename(staging, final)
            except BaseException:
                os.rename(old, final)
                raise
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _make_loads() -> Any:
    """``json.loads`` of a telemetry line; orjson's where it is installed (the ``daemon`` extra), several times
    faster, with ``json.loads`` for what orjson refuses (NaN, huge integers), so the event is the same either way."""
    try:
        import orjson
    except ImportError:
        return json.loads
    fast, error = orjson.loads, orjson.JSONDecodeError

    def loads(line: bytes) -> Any:
        try:
            return fast(line)
        except error:
            return json.loads(line)

    return loads


_loads = _make_loads()


@dataclass(frozen=True)
class RunDir:
    """Paths of one run folder, plus manifest read/update."""

    root: Path

    @property
    def run_id(self) -> str:
        return self.root.name

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_FILE

    @property
    def telemetry_path(self) -> Path:
        return self.root / TELEMETRY_FILE

    @property
    def manifest_path(self) -> Path:
        return self.root / MANIFEST_FILE

    @property
    def worker_log_path(self) -> Path:
        return self.root / WORKER_LOG

    def artefact(self, name: str) -> Path:
        return self.root / name

    def read_config(self) -> dict[str, Any]:
        return json.loads(self.config_path.read_text(encoding="utf-8"))

    def read_manifest(self) -> dict[str, Any]:
        try:
            return json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def update_manifest(self, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` into the manifest (nested dicts merged one level); the fields come from
        :class:`ManifestFields`, which says what each writer puts there."""
        manifest = self.read_manifest()
        for key, value in fields.items():
            if isinstance(value, dict) and isinstance(manifest.get(key), dict):
                manifest[key] = {**manifest[key], **value}
            else:
                manifest[key] = value
        write_json_atomic(self.manifest_path, manifest)
        return manifest

    def iter_events(self) -> Iterator[dict[str, Any]]:
        """Events stored so far (skipping a torn final line)."""
        try:
            fh = self.telemetry_path.open("rb")
        except FileNotFoundError:
            return
        with fh:
            for line in fh:
                try:
                    yield _loads(line)
                except ValueError:
                    continue

    def last_event(self, event_type: str, tail_bytes: int = 256 * 1024) -> dict[str, Any] | None:
        """The newest event of ``event_type`` within the file's tail (cheap for big logs)."""
        try:
            with self.telemetry_path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - tail_bytes))
                lines = fh.read().splitlines()
        except FileNotFoundError:
            return None
        needle = f'"type":"{event_type}"'.encode()
        for line in reversed(lines):
            if needle in line:
                try:
                    return json.loads(line)
                except ValueError:
                    continue
        return None


def _created_at(run: RunDir) -> float:
    """When the run folder was made: its manifest's ``created_at``, else its config's modification time."""
    created = run.read_manifest().get("created_at")
    if isinstance(created, (int, float)) and not isinstance(created, bool):
        return float(created)
    try:
        return run.config_path.stat().st_mtime
    except OSError:
        return 0.0


class RunStore:
    """Creates, finds and lists run folders below ``home/trainer/runs``."""

    def __init__(self, home: Path | str | None = None) -> None:
        self.home = Path(home).absolute() if home is not None else mosaic_home()
        self.runs_dir = self.home / "trainer" / "runs"

    def path_for(self, run_id: str) -> Path:
        validate_run_id(run_id)
        runs = self.runs_dir.resolve()
        path = (runs / run_id).resolve()
        if path.parent != runs:
            raise UserError(f"run_id: {run_id!r} resolves outside the runs folder")
        return path

    def exists(self, run_id: str) -> bool:
        return self.path_for(run_id).is_dir()

    def create(self, run_id: str, config: Mapping[str, Any], manifest: Mapping[str, Any]) -> RunDir:
        """Make the folder with ``config.json`` and the initial manifest, all or nothing."""
        final = self.path_for(run_id)
        if final.exists():
            raise UserError(f"run_id: a run named {run_id!r} already exists in {self.runs_dir}")
        with staged_folder(final) as staging:
            for name in ARTEFACT_DIRS:
                (staging / name).mkdir()
            write_json_atomic(staging / CONFIG_FILE, dict(config))
            (staging / TELEMETRY_FILE).touch()
            artefacts = {"config": CONFIG_FILE, "telemetry": TELEMETRY_FILE, "manifest": MANIFEST_FILE,
                         **{name: f"{name}/" for name in ARTEFACT_DIRS}}
            write_json_atomic(staging / MANIFEST_FILE, {
                "manifest_version": MANIFEST_VERSION, "run_id": run_id,
                **dict(manifest), "artefacts": artefacts, "checkpoints": [],
            })
        return RunDir(final)

    def get(self, run_id: str) -> RunDir:
        path = self.path_for(run_id)
        if not path.is_dir():
            known = ", ".join(r.run_id for r in self.list()[-5:]) or "none yet"
            raise UserError(f"run {run_id!r} not found in {self.runs_dir} (latest: {known})")
        return RunDir(path)

    def list(self) -> list[RunDir]:
        """All runs, oldest first: by when each was created (its manifest's ``created_at``), then by id. Not by
        id alone: a run named with ``--run-id`` sorts by its name, not by its time."""
        if not self.runs_dir.is_dir():
            return []
        runs = [RunDir(p) for p in self.runs_dir.iterdir() if p.is_dir() and not p.name.startswith(".")]
        return sorted(runs, key=lambda run: (_created_at(run), run.run_id))

    def resolve(self, ref: str) -> RunDir:
        """A run by id, by unique id prefix, or ``latest``."""
        if ref == LATEST:
            runs = self.list()
            if not runs:
                raise UserError(f"no runs yet in {self.runs_dir}")
            return runs[-1]
        validate_run_id(ref, field="RUN")
        if self.exists(ref):
            return self.get(ref)
        matches = [r for r in self.list() if r.run_id.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if len(matches) > 1:
            raise UserError(f"run {ref!r} is ambiguous: {', '.join(m.run_id for m in matches[:5])}")
        return self.get(ref)


class ManifestFields:
    """The manifest's fields, assembled here for every writer (``mosaic run``, the daemon, the cluster's
    launcher and backend, the recorder of telemetry, evaluation, workers): each asks for the fields of what
    happened and hands them to :meth:`RunDir.update_manifest`. ``status`` is spelled by
    :attr:`mosaic.run_status.RunState.manifest`.
    """

    #: The ``run_started`` event's fields the manifest keeps as they are.
    STARTED_EVENT_FIELDS = ("worker", "algorithm", "env", "policy_configuration", "seed", "total_timesteps",
                            "agents", "config_digest", "resources")

    @staticmethod
    def created(worker: str, status: Any, run: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
        """A new run's manifest (:meth:`RunStore.create` adds its id, version and artefacts): its worker, its
        first ``status`` (a ``RunState`` or its manifest spelling), when it was made, and ``run``, the summary
        of its shared fields."""
        from mosaic.run_status import RunState

        state = status if isinstance(status, RunState) else RunState.from_manifest(status)
        if state is None:
            raise ValueError(f"status: {status!r} is not a run state (allowed: "
                             f"{', '.join(s.manifest for s in RunState)})")
        return {"worker": worker, "status": state.manifest, "created_at": time.time(), "run": dict(run),
                **fields}

    @staticmethod
    def status(state: Any, **fields: Any) -> dict[str, Any]:
        """The run is now in ``state`` (a ``RunState``)."""
        return {"status": state.manifest, **fields}

    @staticmethod
    def starting(pid: int, command: list[str] | None = None, **fields: Any) -> dict[str, Any]:
        """Its worker process was started (``command``: its argv)."""
        from mosaic.run_status import RunState

        return {"status": RunState.STARTING.manifest, "pid": pid,
                **({"command": command} if command is not None else {}), **fields}

    @staticmethod
    def exited(exit_code: int | None, exit_signal: str | None) -> dict[str, Any]:
        """How its worker process ended (both None: unknown, it ended unwatched)."""
        return {"exit_code": exit_code, "exit_signal": exit_signal}

    @staticmethod
    def appended(manifest: Mapping[str, Any], key: str, entry: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
        """One more entry in a list of the manifest (``checkpoints``, ``evaluations``)."""
        return {key: [*manifest.get(key, []), dict(entry)], **fields}

    @classmethod
    def for_event(cls, event: Mapping[str, Any], manifest: "Callable[[], Mapping[str, Any]]") -> dict[str, Any]:
        """What a telemetry event changes in the manifest (empty for most); ``manifest`` reads it when needed."""
        from mosaic.run_status import RunState

        kind = event["type"]
        if kind == "run_started":
            fields = {k: event[k] for k in cls.STARTED_EVENT_FIELDS if k in event}
            return cls.status(RunState.RUNNING, started_at=event["ts"], versions=event.get("versions", {}), **fields)
        if kind == "checkpoint_saved":
            entry = {k: event.get(k) for k in ("path", "iteration", "timesteps_total")}
            return cls.appended(manifest(), "checkpoints", entry, latest_checkpoint=event.get("path"))
        if kind in ("paused", "resumed"):
            return cls.status(RunState.PAUSED if kind == "paused" else RunState.RUNNING)
        if kind == "run_completed":
            return cls.status(RunState.COMPLETED, ended_at=event["ts"], summary=event.get("summary", {}))
        if kind == "run_failed":
            return cls.status(RunState.FAILED, ended_at=event["ts"], failure={
                "error_type": event.get("error_type"), "message": event.get("message")})
        if kind == "run_cancelled":
            return cls.status(RunState.CANCELLED, ended_at=event["ts"])
        return {}
