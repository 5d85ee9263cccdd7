"""What one run scored: its learning curve and final score, read back from its run folder.

A trainer's ``metrics`` events give the curve (``timesteps_total`` against a metric such as
``episode_return_mean``); the final score is the mean of the metric over the last stretch of
training, so one lucky iteration does not decide it. An evaluator's curve may have no env-step
axis; its score then comes from the run's ``run_completed`` summary, or its last ``metrics`` event.
:data:`MOSAIC_UNITS` says what ``episode_return_mean`` and ``timesteps_total`` count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic.scoring.curves import RunCurves, flatten, increasing
from mosaic.run_status import RunState
from mosaic.runs import RunDir


#: What a score's return can count (``Units.returns``): the team's, every agent's reward added; or one agent's,
#: the mean over the agents.
RETURN_UNITS = {"summed": "the return summed over agents", "per_agent": "the return per agent (the mean over agents)"}
#: What a curve's x axis can count (``Units.steps``): steps of the env, every agent acting in one; or agents' actions.
STEP_UNITS = {"env_steps": "env steps", "agent_steps": "agent steps"}


@dataclass(frozen=True)
class Units:
    """What a return and the x axis of its curve count: ``returns`` a key of :data:`RETURN_UNITS`, ``steps`` one
    of :data:`STEP_UNITS`. A score in one set of units is not comparable with one in another."""

    returns: str
    steps: str

    def __post_init__(self) -> None:
        if self.returns not in RETURN_UNITS:
            raise ValueError(f"returns: {self.returns!r} is not one of {', '.join(RETURN_UNITS)}")
        if self.steps not in STEP_UNITS:
            raise ValueError(f"steps: {self.steps!r} is not one of {', '.join(STEP_UNITS)}")

    def describe(self) -> str:
        """``the return summed over agents, over env steps``."""
        return f"{RETURN_UNITS[self.returns]}, over {STEP_UNITS[self.steps]}"


#: The metric whose units MOSAIC states: every training worker's ``episode_return_mean`` (docs/telemetry.md).
MOSAIC_RETURN = "episode_return_mean"
#: The units of :data:`MOSAIC_RETURN`, the one place they are written down: the team's return (every agent's reward
#: in the episode added), against ``timesteps_total``, env steps (one step of the env, however many agents act;
#: a worker that plays an env through PettingZoo's AEC API may count each agent's move, as its doc says).
MOSAIC_UNITS = Units(returns="summed", steps="env_steps")


@dataclass(frozen=True)
class RunResult:
    """One run's outcome for a report: status, final score, learning curve and env steps."""

    run_id: str
    status: str  # the run's status from its manifest ("completed", "failed", ...) or "unknown"
    final_score: float | None  # mean metric over the last ``final_fraction`` of env steps (at least the last point)
    xs: tuple[float, ...]  # the learning curve: x axis ...
    ys: tuple[float, ...]  # ... and the metric
    env_steps: float | None  # the last ``timesteps_total`` logged
    worker: str | None = None
    versions: tuple[tuple[str, str], ...] = ()  # (package, version) from the run's manifest
    env_family: str | None = None
    #: the final window's mean minus the mean of the window just before it (:func:`late_change`); None: no curve
    late_change: float | None = None
    #: the final window's mean minus the first logged value (:func:`whole_gain`); None: too few points
    gain: float | None = None


def final_window(xs: tuple[float, ...], ys: tuple[float, ...], final_fraction: float) -> list[float]:
    """The metric values of the points at ``x >= (1 - final_fraction) * last x``, the last point always included.

    Env steps count from 0, so the window is the last ``final_fraction`` of the steps taken.
    """
    if not xs:
        return []
    start = (1.0 - final_fraction) * xs[-1]
    window = [y for x, y in zip(xs, ys) if x >= start]
    return window or [ys[-1]]


def final_score(xs: tuple[float, ...], ys: tuple[float, ...], final_fraction: float) -> float | None:
    """A run's final score: the mean metric over its final window (:func:`final_window`); None without points."""
    window = final_window(xs, ys, final_fraction)
    return math.fsum(window) / len(window) if window else None


def late_change(xs: tuple[float, ...], ys: tuple[float, ...], final_fraction: float) -> float | None:
    """How much a run still moved at the end of its budget: the mean metric over its final window (the last
    ``final_fraction`` of its env steps, as :func:`final_window`) minus the mean over the window of the same share
    just before it (``(1 - 2f) L <= x < (1 - f) L``, ``L`` the last x). None when either window holds no point
    (too few points, or ``final_fraction`` 0 or above 0.5)."""
    if not xs or not 0.0 < final_fraction <= 0.5:
        return None
    start = (1.0 - final_fraction) * xs[-1]
    first = (1.0 - 2.0 * final_fraction) * xs[-1]
    final = [y for x, y in zip(xs, ys) if x >= start]
    before = [y for x, y in zip(xs, ys) if first <= x < start]
    if not final or not before:
        return None
    return math.fsum(final) / len(final) - math.fsum(before) / len(before)


def whole_gain(xs: tuple[float, ...], ys: tuple[float, ...], final_fraction: float) -> float | None:
    """How far a run came: the mean metric over its final window (as :func:`final_window`) minus its first
    logged value (what it scored before it had learned much; a window at the start would begin later in
    training the larger the budget). None with fewer than two points, or ``final_fraction`` 0 or above 0.5."""
    if len(xs) < 2 or not 0.0 < final_fraction <= 0.5:
        return None
    final = final_window(xs, ys, final_fraction)
    return math.fsum(final) / len(final) - ys[0]


def _read(run: RunDir) -> tuple[RunCurves, dict[str, Any] | None]:
    curves = RunCurves(run_id=run.run_id)
    terminal: dict[str, Any] | None = None
    for event in run.iter_events():
        if not isinstance(event, dict):
            continue
        kind = curves.add(event)
        if RunState.from_terminal_event(kind) is not None:
            terminal = event
    return curves, terminal


def run_result(run_dir: "RunDir | Path | str", metric: str = "episode_return_mean", x: str = "timesteps_total",
               final_fraction: float = 0.1, before: tuple[tuple[Path, float | None], ...] = ()) -> RunResult:
    """Read ``run_dir``'s manifest and telemetry into a :class:`RunResult` (never raises for a missing file).

    ``before``: the runs this one continued from a checkpoint of, oldest first, each with the env steps of the
    checkpoint the next one started from (None: unknown). Their points up to there come first in the curve, so
    the curve, final score and late change are those of the whole chain; status and env steps are this run's."""
    if not 0.0 <= final_fraction <= 1.0:
        raise ValueError(f"final_fraction: must lie in [0, 1], got {final_fraction!r}")
    run = run_dir if isinstance(run_dir, RunDir) else RunDir(Path(run_dir))
    manifest = run.read_manifest()
    curves, terminal = _read(run)
    xs, ys = (tuple(v) for v in increasing(*curves.series(metric, x)))
    for earlier, cut in reversed(before):  # newest first: each goes before what is already there
        first = xs[0] if xs else math.inf
        limit = first if cut is None else min(cut, first)
        ex, ey = increasing(*_read(RunDir(Path(earlier)))[0].series(metric, x))
        kept = [(a, b) for a, b in zip(ex, ey) if a <= limit and a < first]
        xs = tuple(a for a, _ in kept) + xs
        ys = tuple(b for _, b in kept) + ys
    steps = [p["timesteps_total"] for p in curves.points if "timesteps_total" in p]
    final = final_score(xs, ys, final_fraction) if ys else _fallback_score(metric, manifest, terminal, curves)
    return RunResult(run_id=str(manifest.get("run_id") or run.run_id), status=_status(manifest, terminal),
                     final_score=final, xs=xs, ys=ys, env_steps=steps[-1] if steps else None,
                     worker=_text(manifest.get("worker")), versions=_versions(manifest.get("versions")),
                     env_family=_text((manifest.get("env") or {}).get("family")
                                      if isinstance(manifest.get("env"), dict) else None),
                     late_change=late_change(xs, ys, final_fraction) if ys else None,
                     gain=whole_gain(xs, ys, final_fraction))


def _fallback_score(metric: str, manifest: dict[str, Any], terminal: dict[str, Any] | None,
                    curves: RunCurves) -> float | None:
    """No curve: the ``run_completed`` summary's value of ``metric``, else the last ``metrics`` event's."""
    for summary in ((terminal or {}).get("summary"), manifest.get("summary")):
        if isinstance(summary, dict):
            value = flatten(summary).get(metric)
            if value is not None:
                return value
    for point in reversed(curves.points):
        if metric in point:
            return point[metric]
    return None


def _status(manifest: dict[str, Any], terminal: dict[str, Any] | None) -> str:
    state = RunState.from_manifest(manifest.get("status"))
    if state is None and terminal is not None:
        state = RunState.from_terminal_event(terminal.get("type"))
    return state.manifest if state is not None else "unknown"


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def _versions(value: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in value.items()))
