""":class:`RayBackend`: cells on the nodes of an existing Ray cluster (docs/cluster.md).

Each cell is one **launcher actor** in MOSAIC's own environment (:class:`mosaic.host.cell_launcher.CellLauncher`
on the node Ray picked): it reserves the cell's CPUs (``resources.cpus``, else the worker's declared
estimate) and GPUs (``resources.gpus``), and does there what ``mosaic run`` does; the worker runs in its
own environment on that node, never inside Ray. The actor is detached and named after the run id, in
the namespace ``mosaic-experiments``, so a coordinator that died is replaced by one that finds it again.

The driver (this process) keeps the run in its own run store (``MOSAIC_HOME/trainer/runs/RUN_ID``): the
folder is created at submit, and one pump thread long-polls every live launcher for its telemetry lines
(a batch at most every 50 ms per run) and appends them through :class:`~mosaic.host.recorder.RunRecorder`,
so the manifest follows the run exactly as for a local one. When a run has ended and every line is here,
its artefacts (checkpoints, logs, tensorboard, ...) are copied from the node (node-local storage) or linked
to the folder every node sees (shared storage), and the launcher is released. One process writes a run's
folder at a time (an exclusive ``flock`` on its ``telemetry.jsonl``); others read it.

A launcher that dies before its run ended fails the run with a cause: ``node lost: ...`` when its node is
gone from the cluster, else ``launcher lost: ...``; the coordinator retries it like any failed cell.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from mosaic.errors import UserError
from mosaic.experiments.backends.base import Backend, BackendUnavailable, RunStatus
from mosaic.host.cell_launcher import NOT_ARTEFACTS, CellLauncher, host_niceness
from mosaic.run_status import JOB_ENDED as TERMINAL
from mosaic.run_status import JobState, RunState
from mosaic.runs import ARTEFACT_DIRS, ManifestFields, RunDir, RunStore

NAMESPACE = "mosaic-experiments"
#: The least time between two telemetry calls to one launcher that brought lines: batches, not a call a line.
BATCH_S = 0.05
#: How long one telemetry call waits on the node for a first line.
POLL_WAIT_S = 1.0
#: Artefacts come over in pieces of this size.
CHUNK_BYTES = 32 << 20
#: Environment variables for what the CLI has no flag for yet (docs/cluster.md).
STORAGE_VAR, NODE_HOME_VAR, GRACE_VAR = "MOSAIC_RAY_STORAGE", "MOSAIC_RAY_HOME", "MOSAIC_RAY_CANCEL_GRACE_S"

log = logging.getLogger(__name__)


class RayCellLauncher(CellLauncher):
    """The launcher as a Ray actor: it knows the node it was placed on."""

    def __init__(self, run_id: str, config: dict[str, Any], home: str, storage: str | None = None,
                 grace_s: float = 10.0) -> None:
        import socket

        import ray

        node = {"id": ray.get_runtime_context().get_node_id(), "ip": ray.util.get_node_ip_address(),
                "hostname": socket.gethostname()}
        # Ray runs its workers (this actor) niced (RAY_worker_niceness, 15): the cell's worker runs at the
        # niceness of the node's raylet instead, as `mosaic run` would on that machine, where allowed
        super().__init__(run_id, config, home, storage, node=node, grace_s=grace_s, niceness=host_niceness())

    def ping(self) -> bool:
        return True


@dataclass
class _Live:
    """A run this process pumps: it holds the lock on the run's folder."""

    run_id: str
    run: RunDir
    lock: Any
    actor: Any = None
    recorder: Any = None
    next_seq: int = 0
    state: str = JobState.QUEUED
    cause: str = ""
    node: dict[str, Any] = field(default_factory=dict)
    node_root: str | None = None
    ref: Any = None
    not_before: float = 0.0
    cancel_reason: str | None = None
    finishing: bool = False
    done: bool = False
    rewrite: tuple[bytes, bytes] | None = None
    linked: bool = False


class RayBackend(Backend):
    """Cells as launcher actors on a Ray cluster; their runs in this machine's run store."""

    name = "ray"

    def __init__(self, home: Path, address: str | None, announce: Callable[[str], None] | None = None,
                 start: bool = True, storage: str | None = None, node_home: str | None = None) -> None:
        if not address:
            raise UserError("--address: the ray backend runs cells on an existing cluster; allowed: the address "
                            "of its head node, HOST:PORT (`ray start --head` prints it), or --backend local")
        self.home = Path(home).absolute()
        self.address = address
        self.announce = announce or (lambda _line: None)
        self.start = start
        self.store = RunStore(self.home)
        self.storage = storage or os.environ.get(STORAGE_VAR) or None
        if self.storage:
            self.storage = str(Path(self.storage).absolute())
            if Path(self.storage).resolve() == self.home.resolve():
                raise UserError(f"{STORAGE_VAR}: {self.storage} is this machine's MOSAIC_HOME, whose run store "
                                "the runs' telemetry arrives in; allowed: another folder every node sees")
        self.node_home = node_home or os.environ.get(NODE_HOME_VAR) or str(self.home)
        self.grace_s = float(os.environ.get(GRACE_VAR) or 10.0)
        self._live: dict[str, _Live] = {}
        self._mu = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._estimates: dict[str, tuple[float, float]] = {}
        self._actor_class: Any = None
        self.reconnect()

    # -- the connection ----------------------------------------------------------------------------------
    def reconnect(self) -> None:
        import ray

        if ray.is_initialized():
            if getattr(self, "_connected", False):
                ray.shutdown()  # asked to reconnect: the old connection is broken
            else:
                return  # one driver connection per process: this process already has one
        _probe(self.address)  # ray.init waits minutes for a head that is not there
        try:
            ray.init(address=self.address, namespace=NAMESPACE, log_to_driver=False,
                     logging_level=logging.WARNING)
        except Exception as exc:  # ConnectionError, RuntimeError, TimeoutError: Ray's are many
            raise BackendUnavailable(f"no Ray cluster answers at {self.address}: {type(exc).__name__}: "
                                     f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}") from None
        self._connected = True
        self._actor_class = None

    def describe(self) -> str:
        import ray

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        cpus = sum(n.get("Resources", {}).get("CPU", 0) for n in nodes)
        where = f"run folders in {self.storage}/trainer/runs (shared)" if self.storage else \
            f"run folders on each node in {self.node_home}/cluster/trainer/runs, copied here when a cell ends"
        return f"the Ray cluster at {self.address} ({len(nodes)} node(s), {cpus:g} CPUs; {where})"

    def _launcher(self) -> Any:
        import ray

        if self._actor_class is None:
            self._actor_class = ray.remote(RayCellLauncher)
        return self._actor_class

    # -- submit --------------------------------------------------------------------------------------------
    def submit(self, run_id: str, config: dict[str, Any]) -> None:
        with _unreachable_is_unavailable(self.address):
            self._submit(run_id, config)

    def _submit(self, run_id: str, config: dict[str, Any]) -> None:
        import ray

        with self._mu:
            if run_id in self._live:
                return
        if self.store.exists(run_id):  # submitted before, by a coordinator that died before journaling it
            self._attach(run_id)
            return
        cpus, gpus = self._reservation(config)
        self._check_feasible(cpus, gpus)
        from mosaic.workerkit.run_fields import summarize

        worker = str(config.get("worker") or "")
        if worker == "ray":  # its own Ray is sized by resources.cpus: inside the reservation, not on top of it
            resources = config.get("resources") if isinstance(config.get("resources"), dict) else {}
            config = {**config, "resources": {**resources, "cpus": cpus}}
        run = self.store.create(run_id, config, ManifestFields.created(
            worker, RunState.QUEUED, summarize(config, worker=worker).to_dict(), submitted_via="ray",
            cluster={"backend": "ray", "address": self.address, "cpus": cpus, "gpus": gpus,
                     "storage": self.storage or "node-local", "node_home": self.node_home, "finalized": False}))
        live = _Live(run_id, run, self._lock(run))
        if live.lock is None:
            raise UserError(f"run_id: the run folder of {run_id!r} is being written by another process")
        try:
            live.actor = self._launcher().options(
                name=run_id, namespace=NAMESPACE, lifetime="detached", num_cpus=cpus, num_gpus=gpus,
                max_restarts=0, max_task_retries=0, max_concurrency=8, scheduling_strategy="SPREAD",
            ).remote(run_id, config, self.node_home, self.storage, self.grace_s)
        except ValueError:  # the name is taken: a launcher for this run exists already
            live.actor = ray.get_actor(run_id, namespace=NAMESPACE)
        except Exception as exc:
            self._unlock(live)
            raise BackendUnavailable(f"could not create the launcher of {run_id}: {exc}") from None
        self._add(live)  # its recorder is opened with its first lines (a queued cell holds one descriptor)

    def _reservation(self, config: dict[str, Any]) -> tuple[float, float]:
        """The CPUs and GPUs a cell reserves: ``resources.cpus`` (else the worker's estimate), ``resources.gpus``.
        A Ray-worker cell runs its own private Ray inside the reservation: at least its env runners' CPUs
        plus one for its learner, and it may not join another cluster."""
        resources = config.get("resources") if isinstance(config.get("resources"), dict) else {}
        worker = str(config.get("worker") or "")
        cpus = _positive(resources.get("cpus"))
        gpus = _positive(resources.get("gpus")) or 0.0
        if cpus is None:
            cpus = self._estimate(worker)
        rllib = config.get("rllib")
        if worker == "ray" and isinstance(rllib, dict):
            if rllib.get("address"):
                raise UserError("rllib.address: a cell on the ray backend starts its own Ray inside the CPUs it "
                                "reserved; allowed: null")
            runners = rllib.get("num_env_runners", 2)
            per_runner = rllib.get("cpus_per_env_runner", 1.0)
            if isinstance(runners, (int, float)) and isinstance(per_runner, (int, float)):
                cpus = max(cpus, runners * per_runner + 1)
        return float(cpus), float(gpus)

    def _estimate(self, worker: str) -> float:
        if worker not in self._estimates:
            from mosaic.host.discovery import discover_workers

            cpus = 1.0
            try:
                found = discover_workers(only=worker)
                if worker in found.names():
                    cpus = float(found.get(worker).capabilities.resources.cpus) or 1.0
            except Exception:  # an estimate only: a worker broken here may still run on the nodes
                pass
            self._estimates[worker] = (cpus, 0.0)
        return self._estimates[worker][0]

    def _check_feasible(self, cpus: float, gpus: float) -> None:
        import ray

        nodes = [n.get("Resources", {}) for n in ray.nodes() if n.get("Alive")]
        if not nodes:
            raise BackendUnavailable(f"the Ray cluster at {self.address} has no live node")
        if not any(n.get("CPU", 0) >= cpus and n.get("GPU", 0) >= gpus for n in nodes):
            most = max(nodes, key=lambda n: (n.get("CPU", 0), n.get("GPU", 0)))
            raise UserError(f"resources: the cell needs {cpus:g} CPUs and {gpus:g} GPUs on one node, but the "
                            f"largest node of the cluster has {most.get('CPU', 0):g} CPUs and {most.get('GPU', 0):g} "
                            "GPUs; allowed: resources.cpus / resources.gpus that fit a node")

    # -- status ----------------------------------------------------------------------------------------------
    def status(self, run_ids: list[str]) -> dict[str, RunStatus | None]:
        out: dict[str, RunStatus | None] = {}
        for run_id in run_ids:
            with self._mu:
                live = self._live.get(run_id)
            if live is not None:
                out[run_id] = (live.state, live.cause)
            else:
                with _unreachable_is_unavailable(self.address):
                    out[run_id] = self._attach(run_id)
        return out

    def _attach(self, run_id: str) -> RunStatus | None:
        """Take up a run this process does not pump yet: its launcher if one is alive, else how it ended."""
        import ray

        try:
            run = RunDir(self.store.path_for(run_id))
        except UserError:
            return None
        if not run.root.is_dir():
            return None
        lock = self._lock(run)
        if lock is None:  # another process pumps it: its folder says how it stands
            return _local_status(run)
        live = _Live(run_id, run, lock)
        local = _local_status(run, final_only=False)
        if local and local[0] in TERMINAL and (run.read_manifest().get("cluster") or {}).get("finalized", True):
            self._unlock(live)
            return local
        try:
            live.actor = ray.get_actor(run_id, namespace=NAMESPACE)
        except ValueError:
            live.actor = None
        live.recorder = self._recorder(run)
        live.next_seq = live.recorder.seq
        live.node = dict(run.read_manifest().get("node") or {})
        if live.actor is None:
            if local and local[0] in TERMINAL:  # ended, and its launcher went before its artefacts came
                self._final(live, local[0], local[1], note="the launcher was gone before its artefacts were copied")
            else:
                self._lost(live, None, "launcher lost: no launcher for this run on the cluster (its node or the "
                                       "cluster may have restarted)")
            return (live.state, live.cause)
        try:  # catch up now, so that a run that ended while no one watched is reported as it ended
            for _ in range(1000 if live.node else 0):  # (a launcher still waiting for CPUs would not answer)
                answer = ray.get(live.actor.events.remote(live.next_seq, 0.0), timeout=30)
                self._absorb(live, answer, finish_inline=True)
                if live.done or live.next_seq >= answer["total"]:
                    break
        except ray.exceptions.RayActorError as exc:
            self._lost(live, exc)
        except ray.exceptions.GetTimeoutError:
            pass  # not placed yet, or slow: the pump thread goes on
        if not live.done:
            self._add(live)
        return (live.state, live.cause)

    # -- cancel ------------------------------------------------------------------------------------------------
    def cancel(self, run_id: str, reason: str) -> None:
        import ray

        reason = reason or "cancelled by request"
        try:
            run = RunDir(self.store.path_for(run_id))
        except UserError:
            return
        with self._mu:
            live = self._live.get(run_id)
        if live is None and run.root.is_dir():
            self._attach(run_id)  # no process follows it: this one does, to its end (close waits for it)
            with self._mu:
                live = self._live.get(run_id)
        if run.root.is_dir():
            manifest = run.read_manifest()
            if _manifest_terminal(manifest):
                return  # it has ended (if its end is still on its way here, close waits for it)
            run.update_manifest(cancel_reason=manifest.get("cancel_reason") or reason)
        if live is not None:
            if live.done:
                return
            live.cancel_reason = live.cancel_reason or reason
            actor, placed = live.actor, bool(live.node)
        else:
            try:
                actor = ray.get_actor(run_id, namespace=NAMESPACE)
            except ValueError:
                return  # no launcher: nothing runs (status says how it ended)
            placed = bool(run.read_manifest().get("node")) if run.root.is_dir() else True
        if actor is None:
            return
        if not placed:  # still waiting for CPUs: nothing has started; a worker that just did dies with it
            ray.kill(actor, no_restart=True)
            return
        try:
            ray.get(actor.cancel.remote(reason), timeout=15)
        except ray.exceptions.GetTimeoutError:
            ray.kill(actor, no_restart=True)
        except ray.exceptions.RayActorError:
            pass

    # -- the pump ------------------------------------------------------------------------------------------------
    def _add(self, live: _Live) -> None:
        with self._mu:
            self._live[live.run_id] = live
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._pump, name="mosaic-ray-pump", daemon=True)
                self._thread.start()
        self._wake.set()

    def _pump(self) -> None:
        import ray

        while not self._stop.is_set():
            now = time.monotonic()
            with self._mu:
                lives = [v for v in self._live.values() if not v.done and not v.finishing and v.actor is not None]
            for live in lives:
                if live.ref is None and now >= live.not_before:
                    live.ref = live.actor.events.remote(live.next_seq, POLL_WAIT_S)
                    live.not_before = now + BATCH_S
            pending = {live.ref: live for live in lives if live.ref is not None}
            if not pending:
                self._wake.wait(BATCH_S)
                self._wake.clear()
                continue
            try:
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=BATCH_S)
            except Exception as exc:  # the connection itself: try again shortly
                log.warning("ray.wait failed: %s", exc)
                time.sleep(0.5)
                continue
            for ref in ready:
                live = pending[ref]
                live.ref = None
                try:
                    answer = ray.get(ref)
                except ray.exceptions.ActorUnavailableError:
                    live.not_before = time.monotonic() + 0.5  # unreachable for now; death is told apart
                    continue
                except ray.exceptions.RayActorError as exc:
                    self._lost(live, exc)
                    continue
                except Exception as exc:
                    log.warning("telemetry of %s: %s", live.run_id, exc)
                    live.not_before = time.monotonic() + 0.5
                    continue
                try:
                    self._absorb(live, answer)
                except Exception:  # a full disk here must not stop the other runs' telemetry
                    log.exception("storing the telemetry of %s", live.run_id)
                    live.not_before = time.monotonic() + 1.0

    def _absorb(self, live: _Live, answer: dict[str, Any], finish_inline: bool = False) -> None:
        state = answer["state"]
        if state.get("node") and not live.node:
            live.node = dict(state["node"])
            live.run.update_manifest(node=live.node)
        if state.get("run_dir") and live.node_root is None:
            live.node_root = state["run_dir"]
            live.rewrite = (json.dumps(live.node_root)[1:-1].encode(), json.dumps(str(live.run.root))[1:-1].encode())
            if state.get("shared"):
                self._link(live)
        lines = answer["lines"]
        if lines:
            old, new = live.rewrite or (b"", b"")
            data = [line.encode("utf-8") for line in lines]
            if old and old != new:
                data = [line.replace(old, new) if old in line else line for line in data]
            if live.recorder is None:
                live.recorder = self._recorder(live.run)
            live.recorder.feed_lines(data)
            live.next_seq = answer["next"]
        if live.state == JobState.QUEUED and state["state"] != JobState.QUEUED:
            live.state = JobState.RUNNING
        if state["state"] in TERMINAL and live.next_seq >= answer["total"] and not live.finishing:
            live.finishing = True
            if finish_inline:
                self._finish(live, state)
            else:
                threading.Thread(target=self._finish, args=(live, state), name=f"finish-{live.run_id}",
                                 daemon=True).start()

    def _link(self, live: _Live) -> None:
        """Shared storage: the run's artefact folders here are links to the node's, live."""
        node_root = Path(live.node_root or "")
        if not node_root.is_dir():
            return  # not visible from here after all: copied at the end instead
        for name in ARTEFACT_DIRS:
            here = live.run.root / name
            try:
                if here.is_symlink():
                    continue  # linked by an earlier driver
                if here.is_dir() and not any(here.iterdir()):
                    here.rmdir()
                    here.symlink_to(node_root / name, target_is_directory=True)
                else:
                    return  # something is here already: copied at the end instead
            except OSError:
                return
        live.linked = True

    def _finish(self, live: _Live, state: dict[str, Any]) -> None:
        """Every line is here: bring the artefacts, note where it ran, release the launcher."""
        import ray

        note = ""
        try:
            if live.linked:
                node_root = Path(live.node_root or "")
                for entry in node_root.iterdir():
                    here = live.run.root / entry.name
                    if entry.name not in NOT_ARTEFACTS and not here.exists() and not here.is_symlink():
                        here.symlink_to(entry, target_is_directory=entry.is_dir())
            else:
                self._copy_artefacts(live)
        except ray.exceptions.RayActorError as exc:
            note = f"its artefacts could not be copied: {_first_line(exc)}"
        except Exception as exc:
            note = f"its artefacts could not be copied: {type(exc).__name__}: {exc}"
        node = {**live.node, "run_dir": live.node_root, "pid": state.get("pid"), "guard_pid": state.get("guard_pid"),
                # when the launcher began, started the worker, saw it end (the node's clock)
                **{f"launcher_{k}": state.get(k) for k in ("created_at", "started_at", "ended_at")}}
        manifest = {k: v for k, v in (state.get("manifest") or {}).items() if v is not None and k != "pid"}
        live.run.update_manifest(node=node, **manifest)
        cause = state.get("cause") or ""
        if state["state"] == JobState.CANCELLED and (live.cancel_reason or state.get("cancel_reason")):
            cause = state.get("cancel_reason") or live.cancel_reason or cause
        try:
            ray.get(live.actor.release.remote(), timeout=30)
        except Exception:
            pass
        try:
            ray.kill(live.actor, no_restart=True)
        except Exception:
            pass
        self._final(live, state["state"], cause, note=note)

    def _copy_artefacts(self, live: _Live) -> None:
        import io

        import ray

        buffer = io.BytesIO()
        offset = 0
        while True:
            piece = ray.get(live.actor.artefacts.remote(offset, CHUNK_BYTES), timeout=600)
            buffer.write(piece)
            offset += len(piece)
            if len(piece) < CHUNK_BYTES:
                break
        buffer.seek(0)
        with tarfile.open(fileobj=buffer, mode="r") as tar:
            tar.extractall(live.run.root, filter="data")

    def _lost(self, live: _Live, exc: BaseException | None, cause: str = "") -> None:
        """The launcher died before its run ended: the run fails (node lost / launcher lost), or ends
        cancelled when a cancel was asked."""
        reason = live.cancel_reason or live.run.read_manifest().get("cancel_reason")
        if reason:
            event = {"type": "run_cancelled", "reason": reason, "origin": "ray-backend"}
            state, cause = JobState.CANCELLED, reason
        else:
            if not cause:
                node = live.node.get("id")
                where = f"{live.node.get('ip', '?')} (node {str(node)[:12]})" if node else "its node"
                if node and not self._node_alive(str(node)):
                    cause = f"node lost: {where} left the cluster while the run was on it"
                else:
                    cause = f"launcher lost on {where}: {_first_line(exc) if exc else 'gone'}"
            kind = "NodeLost" if cause.startswith("node lost") else "LauncherLost"
            event = {"type": "run_failed", "error_type": kind, "message": cause, "origin": "ray-backend"}
            state = JobState.FAILED
        if _manifest_terminal(live.run.read_manifest()) is None:
            if live.recorder is None:
                live.recorder = self._recorder(live.run)
            live.recorder.record(event)
        try:
            if live.actor is not None:
                import ray

                ray.kill(live.actor, no_restart=True)
        except Exception:
            pass
        self._final(live, state, cause)

    def _final(self, live: _Live, state: str, cause: str, note: str = "") -> None:
        cluster = {**(live.run.read_manifest().get("cluster") or {}), "finalized": True, "finalized_at": time.time()}
        if note:
            cluster["note"] = note
        live.run.update_manifest(cluster=cluster, **({"cancel_reason": cause} if state == JobState.CANCELLED else {}))
        if live.recorder is not None:
            live.recorder.close()
        self._unlock(live)
        live.state, live.cause, live.done = state, cause, True

    def _node_alive(self, node_id: str) -> bool:
        import ray

        for _ in range(3):
            try:
                for node in ray.nodes():
                    if node.get("NodeID") == node_id:
                        return bool(node.get("Alive"))
                return False
            except Exception:
                time.sleep(0.2)
        return True

    # -- one writer per run folder -----------------------------------------------------------------------------
    @staticmethod
    def _lock(run: RunDir) -> Any:
        try:
            fh = run.telemetry_path.open("ab")
        except OSError:
            return None
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.close()
            return None
        return fh

    @staticmethod
    def _unlock(live: _Live) -> None:
        if live.lock is not None:
            live.lock.close()
            live.lock = None

    @staticmethod
    def _recorder(run: RunDir) -> Any:
        from mosaic.host.daemon.fastjson import parse_event_line
        from mosaic.host.recorder import RunRecorder

        return RunRecorder(run, parse=parse_event_line)

    # -- the end -------------------------------------------------------------------------------------------------
    def wait_ending(self, timeout_s: float) -> None:
        """Until every run that is ending has ended here (or ``timeout_s``): those this process asked to
        cancel, those whose last telemetry line has arrived, those whose artefacts are on their way."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._mu:
                waiting = [v for v in self._live.values() if not v.done and (
                    v.cancel_reason or v.finishing or (v.recorder is not None and v.recorder.terminal))]
            if not waiting:
                return
            time.sleep(0.05)

    def close(self) -> None:
        """Runs that are ending (cancelled by this process, or their last line here) are followed to their
        end; the others go on without this process (a later ``resume``, ``status`` or ``cancel`` takes them up)."""
        self.wait_ending(self.grace_s + 60)
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._mu:
            for live in self._live.values():
                if not live.done:
                    if live.recorder is not None:
                        live.recorder.close()
                    self._unlock(live)
            self._live.clear()


def _probe(address: str, timeout_s: float = 5.0) -> None:
    """Is something listening at ``HOST:PORT``? :class:`BackendUnavailable` if not (other forms of address,
    such as ``auto``, are left to Ray)."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise BackendUnavailable(f"no Ray cluster answers at {address}: {exc}") from None


@contextlib.contextmanager
def _unreachable_is_unavailable(address: str) -> Iterator[None]:
    """Ray's errors of a lost connection to the cluster become :class:`BackendUnavailable`."""
    import ray

    try:
        yield
    except (ConnectionError, ray.exceptions.RaySystemError, ray.exceptions.GetTimeoutError) as exc:
        raise BackendUnavailable(f"the Ray cluster at {address} does not answer: {_first_line(exc)}") from None


def _positive(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__


def _manifest_terminal(manifest: dict[str, Any]) -> JobState | None:
    state = RunState.from_manifest(manifest.get("status"))
    return JobState.from_run(state) if state is not None and state.terminal else None


def _local_status(run: RunDir, final_only: bool = True) -> RunStatus | None:
    """How a run stands by its folder: queued / running, or how it ended (terminal only once its artefacts
    are here, unless ``final_only`` is false)."""
    manifest = run.read_manifest()
    if not manifest:
        return None
    state = _manifest_terminal(manifest)
    if state is None:
        return JobState.from_run(manifest.get("status")), ""  # running or paused: running; else queued
    if final_only and not (manifest.get("cluster") or {}).get("finalized", True):
        return JobState.RUNNING, ""
    if state == JobState.CANCELLED and manifest.get("cancel_reason"):
        return state, str(manifest["cancel_reason"])
    terminal = run.last_event(f"run_{state}") or {}
    return state, str(terminal.get("message") or terminal.get("reason") or "")


def remote_snapshot(run_id: str, manifest: dict[str, Any], out: Path, stream: str | None = None,
                    timeout_s: float = 30.0) -> str:
    """The newest FastLane frame of a run on the cluster, asked of its launcher on its node (frames stay
    there until a viewer asks), written to ``out`` as a PNG; returns what was written."""
    import ray

    address = (manifest.get("cluster") or {}).get("address")
    if not address:
        raise UserError(f"run {run_id}: its manifest names no cluster address")
    if not ray.is_initialized():
        _probe(address)
        with _unreachable_is_unavailable(address):
            ray.init(address=address, namespace=NAMESPACE, log_to_driver=False, logging_level=logging.WARNING)
    try:
        actor = ray.get_actor(run_id, namespace=NAMESPACE)
    except ValueError:
        raise UserError(f"run {run_id}: its launcher has left the cluster (the run ended); its last frame arrives "
                        "here with its artefacts (`mosaic watch RUN --snapshot` then reads it)") from None
    deadline = time.monotonic() + timeout_s
    while True:
        got = ray.get(actor.frame.remote(stream), timeout=max(5.0, timeout_s))
        if got:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(got["png"])
            return (f"wrote {out}: stream {got['stream']} frame {got['index']} (episode {got['episode']}, step "
                    f"{got['step']}), fetched from the run's node")
        if time.monotonic() > deadline:
            raise UserError(f"no FastLane frame from run {run_id} within {timeout_s:g} s (is \"fastlane\": "
                            "{\"enabled\": true} in its config?)")
        time.sleep(0.1)
