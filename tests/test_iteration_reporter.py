"""The worker kit's iteration reporter: one ``metrics`` event per iteration, the same for every in-process worker."""

from __future__ import annotations

from typing import Any

from mosaic.workerkit.reporting import IterationReporter


class Emitter:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def metrics(self, **fields: Any) -> dict[str, Any]:
        self.events.append(fields)
        return fields


def test_a_safe_point_reports_once_report_every_steps_passed_and_at_the_budget():
    emitter = Emitter()
    reporter = IterationReporter(emitter, total_timesteps=1000, report_every=300)
    reached = [reporter.reached(steps) for steps in (100, 200, 300, 500, 700, 900, 1000)]
    assert reached == [False, False, True, False, True, False, True]
    assert [(e["iteration"], e["timesteps_total"]) for e in emitter.events] == [(1, 300), (2, 700), (3, 1000)]
    every = IterationReporter(Emitter(), total_timesteps=250, report_every=1)  # every safe point reports
    assert all(every.reached(steps) for steps in (100, 200, 300))
