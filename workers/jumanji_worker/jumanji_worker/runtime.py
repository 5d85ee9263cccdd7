"""``JumanjiRuntime``: one run of ``jumanji.training``'s own ``train``, in this process.

``python -m jumanji.training.train env=tsp agent=a2c`` is a hydra entry point
around ``train(cfg)``. The worker calls that same function with the hydra
config composed from Jumanji's yaml and the MOSAIC config (``config.py``), and
replaces two of the helpers ``train.py`` looks up in its own module:

1. ``setup_logger``: returns the worker's subclass of Jumanji's logger
   (``telemetry.py``), whose ``write`` after each epoch is the run's safe point:
   the ``metrics`` event, the progress tick, a FastLane frame, periodic
   checkpoints, pause and cancel;
2. ``setup_training_state`` (restored runs only): returns the checkpoint's
   ``TrainingState`` instead of a fresh one;
3. ``setup_agent`` (``agent=ppo`` only, which Jumanji does not have): builds
   ``ppo.PPOAgent`` on the env's A2C networks; other agents are Jumanji's.

Checkpoints are Jumanji's own format, a pickle of the ``TrainingState`` (its
``Logger`` saves one the same way), with arrays moved to host memory, plus
MOSAIC's state file. A restored run goes on with the saved networks, optimiser
and env states; only the evaluation keys of ``train`` start again from the seed.

JAX compiles the epoch before running it, for seconds to minutes, inside native
code where Python's signal handlers do not run: :func:`relay_cancel` passes a
SIGTERM or Ctrl-C to MOSAIC's run control at once, so the watchdog ends a run
cancelled during compilation within its bound instead of after it.
"""

from __future__ import annotations

import os
import pickle
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

from mosaic.workerkit.checkpoints import STATE_FILE as CHECKPOINT_STATE
from mosaic.workerkit.checkpoints import CheckpointCadence, is_checkpoint, resolve
from mosaic.errors import ConfigError
from mosaic.workerkit.deferred import defer
from mosaic.workerkit.devices import devices_used
from mosaic.workerkit.lifecycle import RunCancelled, RunControl
from mosaic.workerkit.program import run_started
from mosaic.workerkit.cli import WorkerContext
from jumanji_worker import PACKAGES

from jumanji_worker.config import JumanjiConfig, compose
from jumanji_worker.frames import EpochFrames, headless
from jumanji_worker.checkpoint import STATE_FILE, JumanjiCheckpointState  # noqa: F401  (re-exported)
from jumanji_worker.telemetry import AGENT, Reporter, make_logger

_RELAY_SOCKETS: list[tuple[socket.socket, socket.socket]] = []


def xla_environment(threads: int | None, gpus: float = 0.0) -> dict[str, str]:
    """Environment variables for JAX (before it is imported): the CPU with ``threads`` threads, or, with
    ``gpus`` > 0 (``resources.gpus``), JAX's own choice of platform (its GPU backend first) limited to the
    GPUs the run asked for: the first N it sees, or a share of one GPU's memory for a fraction."""
    out = {"JAX_PLATFORMS": "cpu"} if gpus <= 0 else {}
    if gpus > 0:
        out["JAX_CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(devices_used(gpus)))
        if gpus < 1:  # JAX preallocates 75 % of a GPU's memory; a share of the GPU takes that share of it
            out["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{0.75 * gpus:.2f}"
    if threads is not None:
        eigen = "false" if threads == 1 else "true"
        out["XLA_FLAGS"] = f"--xla_cpu_multi_thread_eigen={eigen} intra_op_parallelism_threads={threads}"
    return out


#: The persistent compilation cache's bound: JAX then evicts the least recently used entries, and reads and writes
#: each entry under a file lock, so runs side by side (an experiment's cells) share it safely.
XLA_CACHE_MAX_BYTES = 2 << 30


def compilation_cache_environment() -> dict[str, str]:
    """Environment variables (for JAX, before it is imported) that keep what XLA compiles in MOSAIC's cache folder
    (``$MOSAIC_CACHE_DIR/xla``, default ``~/.cache/mosaic/xla``), so a later run of the same programs (another seed,
    a resumed or evaluated run, the next cell of an experiment) loads them instead of compiling again. XLA's output
    for the same program, options and versions is the same executable, so the numbers are the same; JAX's key
    holds the program, the compile options (XLA_FLAGS, JAX_DISABLE_MOST_OPTIMIZATIONS), the backend and the
    versions. Measured on TSP (one epoch, 2 CPUs): 36.6 CPU-s compiling, 11.0 loading. Every program is kept
    (JAX's default keeps only those that took a second to compile). JAX's own variables win: the user's
    ``JAX_COMPILATION_CACHE_DIR``, or ``JAX_ENABLE_COMPILATION_CACHE=false`` to turn it off. Nothing is set
    without the ``filelock`` package (JAX needs it to bound the cache, and its lock is what makes sharing safe)."""
    from importlib.util import find_spec

    from mosaic.diskcache import cache_root

    if find_spec("filelock") is None:
        return {}
    return {"JAX_COMPILATION_CACHE_DIR": str(cache_root() / "xla"),
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_COMPILATION_CACHE_MAX_SIZE": str(XLA_CACHE_MAX_BYTES)}


#: Env configs whose env loads data from the Hugging Face Hub when it is made (repo, file): not in Jumanji's wheel.
HUB_DATA = {"sokoban": ("InstaDeepAI/boxoban-levels", "unfiltered-train.npy")}


def _resolves(url: str) -> bool:
    """Whether the host of ``url`` has an address: a machine that cannot resolve the Hub will not reach it, and
    huggingface_hub would retry for about 23 s before saying so."""
    import socket
    from urllib.parse import urlparse

    try:
        socket.getaddrinfo(urlparse(url).hostname or url, 443)
    except (socket.gaierror, UnicodeError):
        return False
    return True


def fetch_hub_data(environment: str) -> None:
    """Have the data an env loads from the Hugging Face Hub at hand before anything compiles (from the local cache,
    else downloaded, as Jumanji would), or fail naming it: Jumanji's own error is a bare cache miss. Where the Hub's
    address does not resolve and the cache lacks them, the run fails at once."""
    if environment not in HUB_DATA:
        return
    from huggingface_hub import constants, hf_hub_download, try_to_load_from_cache

    repo, filename = HUB_DATA[environment]
    cause = None
    if not _resolves(constants.ENDPOINT) and not isinstance(try_to_load_from_cache(repo, filename), str):
        cause = f"{constants.ENDPOINT} does not resolve"
    else:
        try:
            hf_hub_download(repo_id=repo, filename=filename)  # with the Hub out of reach: the cached file
        except Exception as exc:
            cause = type(exc).__name__
    if cause is not None:
        raise RuntimeError(f"{environment}: Jumanji's env loads its levels from the Hugging Face Hub ({repo}, "
                           f"{filename}) when it is made; they are not in this machine's Hugging Face cache and "
                           f"could not be downloaded ({cause}); fetch them once where the Hub is "
                           f"reachable (`hf download {repo} {filename}`)")


#: Imported by jumanji.training.loggers for its NeptuneLogger, which a MOSAIC run never uses (the worker's own
#: logger replaces it): about 2.5 s of every run's start, deferred to a first use that never comes.
DEFERRED = ("neptune", "neptune.new")


def prepare_process(config: JumanjiConfig) -> None:
    """What must be set before JAX, matplotlib and jumanji.training are imported."""
    for key, value in xla_environment(config.resources.threads, config.resources.gpus).items():
        os.environ.setdefault(key, value)
    for key, value in compilation_cache_environment().items():
        os.environ.setdefault(key, value)
    headless()
    defer(*DEFERRED)


def xla_cache_dir() -> str | None:
    """Where JAX keeps what it compiles for this process, or None when it keeps nothing."""
    import jax

    enabled = jax.config.jax_enable_compilation_cache
    return (jax.config.jax_compilation_cache_dir or None) if enabled else None


def relay_cancel(control: RunControl) -> None:
    """Pass SIGTERM and SIGINT to ``control`` even while the main thread is inside native code.

    Python runs a signal's handler only when the main thread is back in the interpreter; XLA
    compiling an epoch can keep it away for minutes. The C-level handler writes the signal's
    number to the wakeup fd at once; a thread reading it requests the cancel (the Python handler,
    when it runs later, asks again, which changes nothing).
    """
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)

    def relay() -> None:
        while True:
            data = reader.recv(64)
            if not data:
                return
            for signum in data:
                if signum in (signal.SIGTERM, signal.SIGINT):
                    control.request_cancel(f"received {signal.Signals(signum).name}")

    threading.Thread(target=relay, name="jumanji-signal-relay", daemon=True).start()
    _RELAY_SOCKETS.append((reader, writer))  # open for the process's life


def load_state(folder: Path, state: JumanjiCheckpointState) -> Any:
    with open(folder / state.state_file, "rb") as fh:
        return pickle.load(fh)


#: Fields of configs saved before the shared run vocabulary (mosaic.workerkit.run_fields) -> where they went.
_OLD_FIELDS = {"checkpoint_every_timesteps": ("checkpoint", "every_timesteps"),
               "checkpoint_at_end": ("checkpoint", "at_end"), "restore_from": ("checkpoint", "restore_from"),
               "heartbeat_interval_s": ("reporting", "heartbeat_interval_s"),
               "xla_cpu_threads": ("resources", "threads")}


def saved_config(config: dict[str, Any]) -> dict[str, Any]:
    """The config a checkpoint saved, in today's shape: checkpoints saved before the shared fields still load."""
    data = {k: v for k, v in config.items() if k != "run_id"}
    if not isinstance(data.get("environment"), str):
        return data
    data["environment"] = {"family": "jumanji", "env_id": data["environment"]}
    if "total_batch_size" in data:
        data["num_envs"] = data.pop("total_batch_size")
    for old, (section, name) in _OLD_FIELDS.items():
        if old in data:
            data.setdefault(section, {})[name] = data.pop(old)
    return data


def read_checkpoint(path: str | Path, field: str) -> tuple[Path, JumanjiCheckpointState, JumanjiConfig]:
    """(folder, state, the config that trained it) of a jumanji checkpoint or run folder."""
    folder = resolve(path, field, "the jumanji worker")
    state = JumanjiCheckpointState.read(folder, field, "the jumanji worker")
    data = saved_config(state.config)
    data.update(run_id=state.run_id or "restored", fastlane={"enabled": False})
    data["checkpoint"] = {**data.get("checkpoint", {}), "restore_from": None}
    # played on the CPU wherever it trained: evaluation needs no GPU (the state was saved with jax.device_get)
    data["resources"] = {**data.get("resources", {}), "gpus": 0.0}
    return folder, state, JumanjiConfig.from_dict(data)


def check_restore(config: JumanjiConfig) -> tuple[Path, JumanjiCheckpointState]:
    """``checkpoint.restore_from``'s folder and state, when it is a checkpoint of the same agent, env and network."""
    field_name = "checkpoint.restore_from"
    path = config.checkpoint.restore_from
    assert path
    if not is_checkpoint(path):
        raise ConfigError(field_name, f"{path!r} is not a checkpoint (no {CHECKPOINT_STATE} in it); allowed: a "
                                      "checkpoint folder of a jumanji run (<run folder>/checkpoints/<name>)")
    from mosaic.workerkit.checkpoints import TrainedAs, read_for_restore
    from jumanji_worker.checkpoint import trained_as

    read_for_restore(JumanjiCheckpointState, path, TrainedAs("jumanji", config.algorithm, config.env_name),
                     trained_as, field_name)
    folder, state, saved = read_checkpoint(path, field_name)
    for key in ("network", "num_envs"):
        if getattr(saved, key) != getattr(config, key):
            raise ConfigError(key, f"{getattr(config, key)!r} differs from the checkpoint's {getattr(saved, key)!r}: "
                                   "its networks and env batch would not fit")
    if config.algorithm == "ppo":  # the optimiser's state has a clipping stage or not (ppo.make_optimizer)
        now, then = config.ppo_params()["max_grad_norm"], saved.ppo_params()["max_grad_norm"]
        if (now > 0) != (then > 0):
            raise ConfigError("algo_params.max_grad_norm", f"{now!r}: the checkpoint's optimiser "
                                                           f"{'clips' if then > 0 else 'does not clip'} gradients "
                                                           f"(max_grad_norm {then!r}); allowed: "
                                                           f"{'a number > 0' if then > 0 else '0'}")
    if state.iteration >= config.num_epochs:
        raise ConfigError("total_timesteps", f"the checkpoint has {state.timesteps_total} env steps already; "
                                             "ask for more to go on training")
    return folder, state


class JumanjiRuntime:
    def __init__(self, config: JumanjiConfig, context: WorkerContext) -> None:
        self.config = config
        self.ctx = context
        self.reporter: Reporter | None = None
        self.frames: EpochFrames | None = None
        self.state: Any = None  # the TrainingState after the last epoch
        self.cadence = CheckpointCadence.of(config.checkpoint)

    # -- checkpoints -------------------------------------------------------------
    def save_checkpoint(self, periodic: bool = False) -> Path:
        import jax

        rep = self.reporter
        assert rep is not None and self.state is not None
        def write_files(folder: Path) -> None:
            with open(folder / STATE_FILE, "wb") as fh:
                pickle.dump(jax.device_get(self.state), fh)

        state = JumanjiCheckpointState(iteration=rep.epoch, timesteps_total=rep.timesteps, episodes=rep.episodes,
                                       run_id=self.config.run_id, algorithm=self.config.algorithm,
                                       environment=self.config.env_name, config=self.config.to_dict())
        return self.cadence.save(self.ctx.emitter, self.ctx.run_dir.root, state, write_files, periodic)

    # -- the safe point: after every epoch ------------------------------------------
    def after_epoch(self, training_state: Any) -> None:
        rep = self.reporter
        assert rep is not None
        self.state = training_state
        self.ctx.progress.tick(rep.epoch)
        if self.frames is not None:
            self.frames.offer(training_state, rep.epoch, {"iteration": rep.epoch, "timesteps_total": rep.timesteps})
        if self.cadence.due(rep.timesteps) and rep.epoch < rep.total_epochs:
            self.save_checkpoint(periodic=True)
        self.ctx.control.checkpoint()

    # -- the run ---------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, emit = self.config, self.ctx.emitter
        prepare_process(cfg)
        relay_cancel(self.ctx.control)
        fetch_hub_data(cfg.env_name)
        import jax
        import jumanji.training.train as jumanji_train

        first_epoch, restored, restored_state = 0, None, None
        restore_from = cfg.checkpoint.restore_from
        if restore_from:
            folder, restored = check_restore(cfg)
            restored_state = load_state(folder, restored)
            first_epoch = restored.iteration
        hydra_cfg = compose(cfg, num_epochs=cfg.num_epochs - first_epoch)
        self.reporter = rep = Reporter(emit, environment=cfg.env_name, steps_per_epoch=cfg.steps_per_epoch,
                                       total_epochs=cfg.num_epochs, first_epoch=first_epoch)
        if restored is not None:
            rep.episodes = restored.episodes
            self.cadence.last_saved = restored.timesteps_total
        if cfg.fastlane.enabled:
            self.frames = EpochFrames(cfg.run_id, str(self.ctx.run_dir.root), cfg.fastlane,
                                      hydra_cfg.env.registered_version)
        run_started(
            emit, cfg, worker="jumanji", packages=PACKAGES,
            resources={"cpus": cfg.resources.cpus or 1.0, "gpus": cfg.resources.gpus, "devices": [str(d) for d in jax.local_devices()],
                       "num_envs": hydra_cfg.env.training.total_batch_size,
                       "xla_flags": os.environ.get("XLA_FLAGS", ""), "xla_cache": xla_cache_dir()},
            algorithm=cfg.algorithm, env={"family": "jumanji", "env_id": hydra_cfg.env.registered_version,
                                          "api_type": "JUMANJI", "env_kwargs": {}, "config": cfg.env_name},
            policy_configuration="INDEPENDENT", seed=cfg.seed, total_timesteps=cfg.num_epochs * cfg.steps_per_epoch,
            agents=[AGENT], restored_from=restore_from, jumanji_overrides=cfg.overrides(cfg.num_epochs - first_epoch),
            steps_per_epoch=cfg.steps_per_epoch, epochs=cfg.num_epochs)
        if restored is not None:  # run_started is the run's first event; then what it resumed from
            emit.log(f"restored from {restore_from} at epoch {restored.iteration} "
                     f"({restored.timesteps_total} env steps)")

        logger = make_logger(rep, self.after_epoch)
        saved_helpers = (jumanji_train.setup_logger, jumanji_train.setup_training_state, jumanji_train.setup_agent)
        jumanji_train.setup_logger = lambda _cfg: logger
        if restored_state is not None:
            jumanji_train.setup_training_state = lambda env, agent, key: restored_state
        if cfg.algorithm == "ppo":
            from jumanji_worker.ppo import setup_agent

            jumanji_train.setup_agent = setup_agent
        # The first epoch compiles the evaluation and the training step: minutes on a busy machine.
        self.ctx.progress.start(cfg.epoch_timeout_s, "epoch_timeout_s")
        t0 = time.perf_counter()
        try:
            jumanji_train.train(hydra_cfg)
        except RunCancelled:
            if self.state is not None and self.cadence.final_due(rep.timesteps):
                self.save_checkpoint()
            raise
        finally:
            jumanji_train.setup_logger, jumanji_train.setup_training_state, jumanji_train.setup_agent = saved_helpers
            if self.frames is not None:
                self.frames.close()
        if self.state is not None and self.cadence.final_due(rep.timesteps):
            self.save_checkpoint()
        return {"timesteps_total": rep.timesteps, "epochs": rep.epoch, "training_episodes": rep.episodes,
                "train_seconds": round(time.perf_counter() - t0, 3)}
