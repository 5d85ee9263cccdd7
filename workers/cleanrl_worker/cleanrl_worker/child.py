"""Inside the CleanRL script's process: observe it, change nothing it computes.

``install()`` (called by ``site/sitecustomize.py`` before the script starts)
registers post-import hooks, so each patch is applied right after the module it
patches has been imported by the script:

- ``torch.utils.tensorboard``: ``SummaryWriter.add_scalar`` / ``add_text`` /
  ``close`` still do what they did, and each call is also written as one JSON
  record to the file descriptor ``$MOSAIC_CLEANRL_FD`` (never stdout, which the
  script prints on). Every ``charts/SPS`` scalar ends one iteration; with
  ``$MOSAIC_CLEANRL_CHECKPOINT_EVERY`` the script's networks are checkpointed
  when that many env steps have passed, and when the writer closes (unless
  ``$MOSAIC_CLEANRL_CHECKPOINT_AT_END`` is 0); the closing record carries the
  env steps the script ran (``$MOSAIC_CLEANRL_ENV_STEPS``).
- ``gym`` / ``gymnasium``: with ``$MOSAIC_CLEANRL_FASTLANE``, the first env the
  script makes publishes rendered frames to FastLane from its ``step``; with
  ``$MOSAIC_CLEANRL_ALE``, ALE's Atari ids are registered with gymnasium
  (``algorithms.register_atari``: ale-py 0.12 does that itself only under
  gymnasium >= 1.1) before the script makes its envs.
- ``envpool``: with ``$MOSAIC_CLEANRL_FASTLANE``, the first env ``envpool.make`` returns
  (ppo_atari_envpool's) publishes env 0's newest observation frame (84x84 grey, what the agent sees:
  EnvPool 0.8.4 has no render) from its ``reset`` and ``step``.
- checkpoints: besides the networks, the observation statistics of env 0's
  ``NormalizeObservation`` wrapper (ppo_continuous_action's), which its policy
  needs to act.
- ``stable_baselines3.common.buffers``: SB3 2.x's ``ReplayBuffer`` only takes
  gymnasium spaces; the gym 0.23 spaces of c51, sac and td3 are converted to
  their gymnasium equivalents (same shapes, bounds and dtypes) on the way in.
  SB3 1.2.0 (the overlay c51_atari runs with) takes gym's spaces: left as it is.
- ``gym``, always (also with no ``$MOSAIC_CLEANRL_FD``: the script run directly with
  this folder on ``PYTHONPATH``): ALE's ``NoFrameskip-v4`` ids are registered with
  gym 0.23.1 (``gym_atari``: ale-py's games behind gym's old API), which
  ppo_atari.py and c51_atari.py make their envs from.

Nothing here draws random numbers or touches the script's tensors, so a seed
gives the same run with or without MOSAIC (tests/test_transparency.py).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

_out: Any = None
_lock = threading.Lock()
_HOOKS: dict[str, Callable[[Any], None]] = {}
_state = {"iteration": 0, "episodes": 0, "step": 0, "last_checkpoint_step": -1, "next_checkpoint": 0,
          "every": 0}


#: Records are written in batches: at most every FLUSH_EVERY_S (a background thread), at once for
#: these kinds, and at exit. A write per record woke the MOSAIC runtime for every scalar the
#: script logged, which cost the script measurable time when both shared a CPU.
FLUSH_EVERY_S = 0.1
_URGENT = frozenset({"writer", "text", "checkpoint", "closed", "log"})
_pending: list[str] = []


def send(kind: str, **fields: Any) -> None:
    """One record to the MOSAIC runtime (best effort: a closed pipe means the run is over)."""
    if _out is None:
        return
    line = json.dumps({"kind": kind, **fields}, default=_jsonable)
    with _lock:
        _pending.append(line)
        if kind in _URGENT:
            _flush_locked()


def flush() -> None:
    with _lock:
        _flush_locked()


def _flush_locked() -> None:
    if not _pending or _out is None:
        return
    text = "\n".join(_pending) + "\n"
    _pending.clear()
    try:
        _out.write(text)
        _out.flush()
    except (OSError, ValueError):
        pass


def _flush_loop() -> None:
    while True:
        time.sleep(FLUSH_EVERY_S)
        if _pending:
            flush()


def _jsonable(value: Any) -> Any:
    try:
        import numpy as np

        return np.asarray(value).reshape(-1).tolist()
    except Exception:  # noqa: BLE001
        return repr(value)


def _number(value: Any) -> float:
    """A scalar as CleanRL passes it: float, int, 0-d or 1-element array/tensor (dqn's info returns)."""
    if hasattr(value, "item"):
        try:
            return float(value.item())
        except (TypeError, ValueError):
            pass
    try:
        return float(value)
    except (TypeError, ValueError):
        import numpy as np

        return float(np.asarray(value, dtype=float).reshape(-1)[0])


# -- post-import hooks -------------------------------------------------------------
class _HookedLoader(importlib.abc.Loader):
    def __init__(self, inner: Any, hook: Callable[[Any], None]) -> None:
        self.inner, self.hook = inner, hook

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.inner.exec_module(module)
        try:
            self.hook(module)
        except Exception as exc:  # noqa: BLE001  (an observer must never break the script)
            send("log", level="warning", message=f"MOSAIC hook on {module.__name__} failed: "
                                                 f"{type(exc).__name__}: {exc}")

    def __getattr__(self, name: str) -> Any:  # get_data, get_filename, ... as the real loader has them
        return getattr(self.inner, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        hook = _HOOKS.get(name)
        if hook is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _HookedLoader(spec.loader, hook)
        return spec


# -- TensorBoard -> telemetry, checkpoints -------------------------------------------
def _patch_tensorboard(module: Any) -> None:
    from mosaic.workerkit import startup

    writer_cls = module.SummaryWriter
    add_scalar, add_text, close, init = (writer_cls.add_scalar, writer_cls.add_text, writer_cls.close,
                                         writer_cls.__init__)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        send("writer", log_dir=str(Path(self.log_dir).absolute()))

    def add_scalar_(self: Any, tag: str, scalar_value: Any, global_step: Any = None, *args: Any,
                    **kwargs: Any) -> Any:
        startup.resume()  # the script is set up and logging (mosaic.workerkit.startup)
        result = add_scalar(self, tag, scalar_value, global_step, *args, **kwargs)
        step = int(_number(global_step)) if global_step is not None else _state["step"]
        _state["step"] = max(_state["step"], step)
        send("scalar", tag=tag, value=_number(scalar_value), step=step, wall=time.time())
        if tag == "charts/episodic_return":
            _state["episodes"] += 1
        elif tag == "charts/SPS":
            _state["iteration"] += 1
            if _state["every"] and step >= _state["next_checkpoint"]:
                save_checkpoint()
                _state["next_checkpoint"] = step + _state["every"]
        return result

    def add_text_(self: Any, tag: str, text_string: str, *args: Any, **kwargs: Any) -> Any:
        result = add_text(self, tag, text_string, *args, **kwargs)
        send("text", tag=tag, text=str(text_string))
        return result

    def close_(self: Any) -> Any:
        # The script has finished its loop: it ran exactly the env steps MOSAIC computed from its options
        # (its scalars' global_step labels stop short: the off-policy loops label a step by its index).
        planned = int(os.environ.get("MOSAIC_CLEANRL_ENV_STEPS", "0") or 0)
        _state["step"] = max(_state["step"], planned)
        if os.environ.get("MOSAIC_CLEANRL_CHECKPOINT_AT_END", "1") != "0":
            save_checkpoint()
        send("closed", step=_state["step"], iteration=_state["iteration"], episodes=_state["episodes"])
        return close(self)

    writer_cls.__init__ = __init__
    writer_cls.add_scalar = add_scalar_
    writer_cls.add_text = add_text_
    writer_cls.close = close_
    _state["every"] = _state["next_checkpoint"] = int(os.environ.get("MOSAIC_CLEANRL_CHECKPOINT_EVERY", "0") or 0)


def save_checkpoint() -> None:
    """Every ``nn.Module`` global of ``__main__`` into ``checkpoint_<iteration>/`` (once per iteration)."""
    root = os.environ.get("MOSAIC_CLEANRL_RUN_DIR")
    if not root or _state["last_checkpoint_step"] == _state["step"]:
        return
    import torch

    from cleanrl_worker.checkpoint import MODULES_FILE, OBS_NORM_FILE, CleanRLCheckpointState
    from mosaic.workerkit.checkpoints import checkpoint_folder

    main = sys.modules.get("__main__")
    modules = {name: obj for name, obj in sorted(vars(main).items()) if isinstance(obj, torch.nn.Module)}
    info = json.loads(os.environ.get("MOSAIC_CLEANRL_STATE", "{}"))
    if not modules or info.get("policy") not in modules:
        send("log", level="warning", message=f"no checkpoint: the script holds no {info.get('policy')!r} network")
        return
    folder = checkpoint_folder(root, _state["iteration"])
    staging = folder.with_name(f".{folder.name}.{os.getpid()}")
    staging.mkdir(parents=True, exist_ok=True)
    torch.save({name: module.state_dict() for name, module in modules.items()}, staging / MODULES_FILE)
    stats = _obs_normalization(getattr(main, "envs", None))
    if stats is not None:
        (staging / OBS_NORM_FILE).write_text(json.dumps(stats))
    CleanRLCheckpointState(iteration=_state["iteration"], timesteps_total=_state["step"],
                           episodes=_state["episodes"], run_id=info.get("run_id", ""),
                           algorithm=info.get("algorithm", ""), env_id=info.get("env_id", ""),
                           params=info.get("params", {}),
                           modules={name: type(m).__name__ for name, m in modules.items()},
                           policy=info.get("policy", ""),
                           cleanrl_version=info.get("cleanrl_version", "")).write(staging)
    if folder.exists():
        import shutil

        shutil.rmtree(folder)
    staging.rename(folder)
    _state["last_checkpoint_step"] = _state["step"]
    send("checkpoint", path=str(folder), iteration=_state["iteration"], step=_state["step"],
         episodes=_state["episodes"])


def _obs_normalization(envs: Any) -> dict[str, Any] | None:
    """The running mean and variance of env 0's ``NormalizeObservation`` (None: the script has none).

    Each sub-env of the script's vector env normalises with statistics of its own; env 0's are kept.
    The wrapper chain is walked through ``.env`` (read from each wrapper's own attributes, never through
    gymnasium's forwarding ``__getattr__``).
    """
    env = next(iter(getattr(envs, "envs", None) or []), None)
    while env is not None:
        found = vars(env).get("obs_rms")
        if found is not None:
            return {"mean": _jsonable(found.mean), "var": _jsonable(found.var), "count": float(found.count),
                    "epsilon": float(vars(env).get("epsilon", 1e-8)), "wrapper": type(env).__name__}
        env = vars(env).get("env")
    return None


# -- SB3's replay buffer and gym 0.23 spaces --------------------------------------------
def _to_gymnasium(space: Any) -> Any:
    import gymnasium

    if isinstance(space, gymnasium.spaces.Space):
        return space
    kind = type(space).__name__
    if kind == "Box":
        return gymnasium.spaces.Box(low=space.low, high=space.high, shape=space.shape, dtype=space.dtype)
    if kind == "Discrete":
        return gymnasium.spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiDiscrete":
        return gymnasium.spaces.MultiDiscrete(space.nvec)
    if kind == "MultiBinary":
        return gymnasium.spaces.MultiBinary(space.n)
    return space


def _patch_buffers(module: Any) -> None:
    if not getattr(module, "spaces", None) or not module.spaces.__name__.startswith("gymnasium"):
        return  # SB3 1.x (the sb3-gym overlay): gym's spaces are what it takes
    original = module.ReplayBuffer.__init__

    def __init__(self: Any, buffer_size: int, observation_space: Any, action_space: Any, *args: Any,
                 **kwargs: Any) -> None:
        original(self, buffer_size, _to_gymnasium(observation_space), _to_gymnasium(action_space),
                 *args, **kwargs)

    module.ReplayBuffer.__init__ = __init__


# -- FastLane: frames of the first env the script makes -----------------------------------
_lane: dict[str, Any] = {}


def _patch_gymnasium(module: Any) -> None:
    if os.environ.get("MOSAIC_CLEANRL_ALE"):
        from cleanrl_worker.algorithms import register_atari

        register_atari()
    _patch_make(module)


def _register_gym_atari(module: Any) -> None:
    from cleanrl_worker import gym_atari

    gym_atari.register()


def _patch_gym(module: Any) -> None:
    _register_gym_atari(module)
    _patch_make(module)


def _patch_make(module: Any) -> None:
    spec = os.environ.get("MOSAIC_CLEANRL_FASTLANE")
    if not spec:
        return
    make = module.make
    gymnasium_api = module.__name__ == "gymnasium"

    def make_(*args: Any, **kwargs: Any) -> Any:
        first = not _lane
        if first and gymnasium_api:
            kwargs.setdefault("render_mode", "rgb_array")  # rendering only: dynamics do not change
        env = make(*args, **kwargs)
        if first:
            _lane["env"] = env
            from cleanrl_worker.fastlane import stream_env

            stream_env(env, json.loads(spec), gymnasium_api, send)
        return env

    module.make = make_


def _patch_envpool(module: Any) -> None:
    """ppo_atari_envpool.py's envs come from ``envpool.make``: with FastLane, the first env it makes streams what
    its agent sees (``fastlane.stream_envpool``); the env the script gets is the one EnvPool made."""
    spec = os.environ.get("MOSAIC_CLEANRL_FASTLANE")
    if not spec:
        return
    make = module.make

    def make_(*args: Any, **kwargs: Any) -> Any:
        env = make(*args, **kwargs)
        if not _lane:
            _lane["env"] = env
            from cleanrl_worker.fastlane import stream_envpool

            stream_envpool(env, json.loads(spec), send)
        return env

    module.make = make_


def install() -> None:
    global _out
    import atexit

    from mosaic.workerkit import startup

    startup.pause()  # until the script logs its first scalar: its imports and set-up without the collector
    _out = os.fdopen(int(os.environ["MOSAIC_CLEANRL_FD"]), "w", encoding="utf-8")
    atexit.register(flush)
    threading.Thread(target=_flush_loop, name="mosaic-telemetry-flush", daemon=True).start()
    _HOOKS.update({"torch.utils.tensorboard": _patch_tensorboard,
                   "stable_baselines3.common.buffers": _patch_buffers,
                   "gym": _patch_gym, "gymnasium": _patch_gymnasium, "envpool": _patch_envpool})
    sys.meta_path.insert(0, _PostImportFinder())


def install_registration() -> None:
    """Outside a MOSAIC run (the script run directly, this folder on ``PYTHONPATH``): only gym's Atari ids
    (``gym_atari.register``), right after the script imports gym; nothing is observed or sent."""
    if "gym" in sys.modules:
        return
    _HOOKS["gym"] = _register_gym_atari
    sys.meta_path.insert(0, _PostImportFinder())
