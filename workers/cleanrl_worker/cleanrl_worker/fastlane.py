"""FastLane frames of the env a CleanRL script trains on (runs inside the script's process).

The first env the script makes (env 0 of its vector env) gets its ``step``
wrapped on the instance: after each step a frame is offered to a FastLane
:class:`~mosaic.fastlane.publisher.Publisher` (throttled to the configured fps
and overhead, and never raising: a failing render turns streaming off with one
log line). Rendering reads the env's state and draws no random numbers, so
training is unchanged.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

STREAM = "main"


def stream_env(env: Any, spec: Mapping[str, Any], gymnasium_api: bool, send: Callable[..., None]) -> None:
    from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
    from mosaic.fastlane.publisher import Publisher

    target = FastLaneTarget(spec["run_id"], spec["run_dir"], FastLaneConfig(**spec["config"]))
    lane = Publisher(target, STREAM, log=lambda message: send("log", level="warning", message=message),
                     owner={"worker": "cleanrl", "env": "env_0"})
    render: Callable[[], Any] = env.render if gymnasium_api else (lambda: env.render(mode="rgb_array"))
    step = env.step
    counters = {"episode": 0, "step": 0, "return": 0.0}

    def step_(action: Any) -> Any:
        result = step(action)
        counters["step"] += 1
        try:
            counters["return"] += float(result[1])
        except (TypeError, ValueError):
            pass
        lane.offer(render, counters["episode"], counters["step"],
                   lambda: {"return": counters["return"]})
        done = bool(result[2] or result[3]) if gymnasium_api else bool(result[2])
        if done:
            counters.update(episode=counters["episode"] + 1, step=0, **{"return": 0.0})
        return result

    env.step = step_


def agent_view(obs: Any, row: int, gray: bool = True) -> Any:
    """The newest frame of sub-env ``row`` in an EnvPool Atari observation batch ``(N, stack, H, W)``.

    Grey frames (EnvPool's default) are the last plane, HxW; colour ones the last three planes, as HxWx3.
    A copy: EnvPool may reuse its buffers on the next step.
    """
    import numpy as np

    planes = np.asarray(obs)[row]
    return np.array(planes[-1] if gray else np.moveaxis(planes[-3:], 0, -1))


def stream_envpool(env: Any, spec: Mapping[str, Any], send: Callable[..., None]) -> None:
    """Frames of env 0 of an EnvPool env: what its agent sees, read from the observations ``reset`` and ``step``
    return (EnvPool 0.8.4 has no ``render``). The env's ``reset`` and ``step`` are wrapped on the instance and
    return exactly what they returned; nothing is drawn, stepped or copied into the script's arrays.

    Env 0's row is the one whose ``info["env_id"]`` is 0 (EnvPool returns its envs in that order in the
    synchronous mode the script uses). Its game is over when a ``done`` comes with no lives left, as the
    script counts episodes; the frame's ``return`` is the game's unclipped score so far (``info["reward"]``).
    """
    import numpy as np

    from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
    from mosaic.fastlane.publisher import Publisher

    target = FastLaneTarget(spec["run_id"], spec["run_dir"], FastLaneConfig(**spec["config"]))
    lane = Publisher(target, STREAM, log=lambda message: send("log", level="warning", message=message),
                     owner={"worker": "cleanrl", "env": "env_0", "view": "agent observation (EnvPool)"})
    gray = bool(getattr(getattr(getattr(env, "spec", None), "config", None), "gray_scale", True))
    reset, step = env.reset, env.step
    counters = {"episode": 0, "step": 0, "return": 0.0}

    def offer(obs: Any, row: int) -> None:
        lane.offer(lambda: agent_view(obs, row, gray), counters["episode"], counters["step"],
                   lambda: {"return": counters["return"]})

    def reset_(*args: Any, **kwargs: Any) -> Any:
        result = reset(*args, **kwargs)
        try:
            obs = result[0] if isinstance(result, tuple) else result  # (obs, info) with gym_reset_return_info
            counters.update(step=0, **{"return": 0.0})
            offer(obs, 0)
        except Exception as exc:  # noqa: BLE001  (an observer never breaks the script)
            lane.fail(f"{type(exc).__name__}: {exc}")
        return result

    def step_(*args: Any, **kwargs: Any) -> Any:
        result = step(*args, **kwargs)
        try:
            obs, _, done, info = result[:4]
            rows = np.flatnonzero(np.asarray(info["env_id"]) == 0) if "env_id" in info else np.array([0])
            if len(rows):
                row = int(rows[0])
                counters["step"] += 1
                if "reward" in info:
                    counters["return"] += float(np.asarray(info["reward"])[row])
                offer(obs, row)
                if bool(np.asarray(done)[row]) and int(np.asarray(info.get("lives", [0] * (row + 1)))[row]) == 0:
                    counters.update(episode=counters["episode"] + 1, step=0, **{"return": 0.0})
        except Exception as exc:  # noqa: BLE001
            lane.fail(f"{type(exc).__name__}: {exc}")
        return result

    env.reset, env.step = reset_, step_
