"""An in-process worker's iteration reporting: one ``metrics`` event per iteration, the same for every worker.

A worker that drives its library in its own process (XuanCe, Tianshou, Jumanji) counts iterations, episodes
and env steps, keeps the episodes that finished since the last report (the *window*: an iteration's
statistics are over those, not a moving average) and clocks env steps per second between reports.
:class:`IterationReporter` is that; a worker's reporter builds on it with what its library hands over (the
learner's scalars, a test's return) through :meth:`IterationReporter.iteration_values`.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

from mosaic.workerkit.episode_stats import episode_statistics


class IterationReporter:
    """Counters, the episode window and the steps/s clock; :meth:`report` emits one iteration's ``metrics``."""

    def __init__(self, emitter: Any, *, total_timesteps: int, report_every: int, iteration: int = 0,
                 episodes: int = 0, timesteps: int = 0) -> None:
        self.emitter = emitter
        self.total, self.every = total_timesteps, report_every
        self.iteration, self.episodes, self.timesteps = iteration, episodes, timesteps
        #: the episodes that finished since the last report: ``episode_statistics`` records
        self.window: list[dict[str, Any]] = []
        self.next_report = timesteps + report_every
        self._t, self._steps_at = time.perf_counter(), timesteps

    def resume_at(self, iteration: int, episodes: int, timesteps: int) -> None:
        """Go on from a restored checkpoint's counters."""
        self.iteration, self.episodes, self.timesteps = iteration, episodes, timesteps
        self.next_report = timesteps + self.every
        self._steps_at = timesteps

    def start_clock(self) -> None:
        """Training starts now: the first iteration's env steps/s counts from here."""
        self._t, self._steps_at = time.perf_counter(), self.timesteps

    def episode(self, returns: dict[str, float], length: int, modules: Mapping[str, str],
                **fields: Any) -> dict | None:
        """An episode finished: its ``episode`` event (with ``fields``), and a record in the window."""
        event = self.emitter.episode(episode=self.episodes, length=length, returns=returns, **fields)
        self.window.append({"returns": returns, "length": length, "modules": modules})
        self.episodes += 1
        return event

    def reached(self, timesteps: int) -> bool:
        """The library's loop is at a safe point, ``timesteps`` env steps in: a ``metrics`` event when
        ``report_every`` steps passed since the last one or the budget is reached; True when it reported."""
        self.timesteps = timesteps
        if timesteps < self.next_report and timesteps < self.total:
            return False
        self.report()
        return True

    def pending(self) -> bool:
        """Something happened since the last report."""
        return bool(self.window) or self.timesteps > self._steps_at

    def flush(self) -> None:
        """Report what the last, partial iteration saw, if anything."""
        if self.pending():
            self.report()

    def iteration_values(self) -> dict[str, Any]:
        """A worker's own values of the iteration ending now (its learner's scalars, ...)."""
        return {}

    def iteration_done(self) -> None:
        """Forget what :meth:`iteration_values` gathered: the next iteration starts."""

    def report(self) -> dict[str, Any] | None:
        self.iteration += 1
        elapsed = time.perf_counter() - self._t
        event = self.emitter.metrics(
            iteration=self.iteration, timesteps_total=self.timesteps, total_timesteps=self.total,
            env_steps_per_s=(self.timesteps - self._steps_at) / max(elapsed, 1e-9),
            num_episodes_lifetime=self.episodes, **self.iteration_values(), **episode_statistics(self.window))
        self.window.clear()
        self.iteration_done()
        self._t, self._steps_at = time.perf_counter(), self.timesteps
        self.next_report = self.timesteps + self.every
        return event
