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
