"""What Tianshou reports, as MOSAIC telemetry with the shared metric names.

Two observation points, neither an edit of Tianshou:

* the training collector's ``collect``, wrapped on the instance: each call's
  ``CollectStats`` carries the env steps taken and the return and length of
  every episode that ended, in order: ``episode`` events;
* a Tianshou logger (a ``TensorboardLogger`` subclass, so Tianshou's own
  TensorBoard files are still written): the trainer hands it every update's
  training statistics (losses, ...) before its own interval filter: learner
  scalars under the module ``policy``; and every test step's statistics
  (``test_every_timesteps``): a ``log`` event with the test's returns, and
  ``test_return_mean`` in the next ``metrics`` event.

An "iteration" is ``report_every_timesteps`` env steps (offline: gradient
steps): one ``metrics`` event with the episodes that ended in it
(``mosaic.workerkit.episode_stats``) and the mean of each learner scalar over its updates.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Callable

from mosaic.workerkit.episode_stats import winner
from mosaic.workerkit.reporting import IterationReporter
from mosaic.workerkit.contract import SINGLE_AGENT

AGENT = SINGLE_AGENT
MODULE = "policy"
#: Tianshou's learner scalars that have a MOSAIC name (docs/telemetry.md, the Ray worker's).
NAMES = {"loss": "total_loss", "actor_loss": "policy_loss", "ent_loss": "entropy"}


class Reporter(IterationReporter):
    """Collects episodes and learner scalars; emits a ``metrics`` event per iteration."""

    def __init__(self, emitter: Any, *, total_timesteps: int, report_every: int,
                 modules: dict[str, str] | None = None) -> None:
        super().__init__(emitter, total_timesteps=total_timesteps, report_every=report_every)
        #: agent -> who plays it; a classic game's episode returns hold one number per agent, in this order
        self.modules = modules or {AGENT: MODULE}
        self.updates = 0
        self.learner: dict[str, list[float]] = defaultdict(list)
        #: when training (warm-up included) started: after the envs, networks and replay buffer were made
        self.training_started: float | None = None
        self.tests: list[dict[str, Any]] = []  # every test step's result, in order
        self._test_in_window: dict[str, Any] | None = None

    def start_clock(self) -> None:
        """Training starts now: the first iteration's env steps/s counts from here."""
        super().start_clock()
        self.training_started = self._t

    # -- from Tianshou -------------------------------------------------------
    def collected(self, stats: Any) -> None:
        """One ``collect`` call's ``CollectStats``: its env steps, and its episodes in the order they ended
        (a two-player game's returns are a row of every agent's return)."""
        self.timesteps += int(stats.n_collected_steps)
        agents = list(self.modules)
        for ret, length in zip(stats.returns, stats.lens):
            row = [float(r) for r in ret] if hasattr(ret, "__len__") else [float(ret)]
            self.episode(dict(zip(agents, row)), int(length))

    def episode(self, returns: dict[str, float], length: int) -> None:  # type: ignore[override]
        extra = {"winner": winner(returns)} if len(returns) == 2 else {}
        super().episode(returns, length, self.modules, timesteps_total=self.timesteps, **extra)

    def learner_values(self, data: dict[str, Any]) -> None:
        """A ``TrainingStats`` as a dict (``asdict``): its numbers under Tianshou's names, and MOSAIC's.

        Statistics over an update's minibatches (PPO's ``loss/mean``, ``loss/std``, ...) count by their
        mean; where MOSAIC has a name for a scalar (:data:`NAMES`) it is reported under both.
        """
        self.updates += 1
        for key, value in _flatten(data):
            base, _, stat = key.rpartition("/")
            if stat in ("std", "max", "min"):
                continue
            key = base if stat == "mean" else key
            if key in ("train_time", "smoothed_loss") or key.startswith("smoothed_loss/"):
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                self.learner[key].append(float(value))
                if key in NAMES:
                    self.learner[NAMES[key]].append(float(value))

    def tested(self, data: dict[str, Any]) -> dict[str, Any]:
        """A test step's ``CollectStats`` (as a dict): its mean return, reported now and in the next metrics."""
        stat = data.get("returns_stat") or {}
        test = {"timesteps_total": self.timesteps, "episodes": int(data.get("n_collected_episodes") or 0),
                "return_mean": float(stat.get("mean", math.nan)), "return_std": float(stat.get("std", math.nan))}
        self.tests.append(test)
        self._test_in_window = test
        self.emitter.log(f"test at {self.timesteps} steps: mean return {test['return_mean']:.2f} "
                         f"± {test['return_std']:.2f} over {test['episodes']} episodes", test=test)
        return test

    def gradient_step(self) -> None:
        """Offline: each update is one 'timestep' of the budget."""
        self.timesteps += 1

    # -- to MOSAIC -----------------------------------------------------------
    def due(self) -> bool:
        """An iteration is over: ``report_every`` steps since the last report, or the budget reached (once:
        Tianshou's epochs collect whole collection steps, so the last steps may run past it)."""
        return self.timesteps >= self.next_report or self._steps_at < self.total <= self.timesteps

    def pending(self) -> bool:
        return super().pending() or bool(self._test_in_window)

    def iteration_values(self) -> dict[str, Any]:
        learner = {k: sum(v) / len(v) for k, v in self.learner.items()}
        test = {"test_return_mean": self._test_in_window["return_mean"]} if self._test_in_window else {}
        return {"learner": {MODULE: learner} if learner else {}, **test}

    def iteration_done(self) -> None:
        self._test_in_window = None
        self.learner.clear()


def _flatten(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(data, dict):
        out = []
        for k, v in data.items():
            out += _flatten(v, f"{prefix}{k}/" if isinstance(v, dict) else f"{prefix}{k}")
        return out
    return [(prefix, data)]


def observe_collector(collector: Any, reporter: Reporter) -> None:
    """Wrap ``collector.collect`` on the instance: every call's stats go to ``reporter``."""
    collect = collector.collect

    def observed(*args: Any, **kwargs: Any) -> Any:
        stats = collect(*args, **kwargs)
        reporter.collected(stats)
        return stats

    collector.collect = observed


def observe_learner(algorithm: Any, reporter: Reporter) -> None:
    """A classic game's learning seat: Tianshou's multi-agent training statistics keep each seat's losses out
    of the dict its logger is given, so the seat's own update is wrapped on the instance instead."""
    from dataclasses import asdict

    update = algorithm._update_with_batch

    def observed(*args: Any, **kwargs: Any) -> Any:
        stats = update(*args, **kwargs)
        reporter.learner_values(asdict(stats))
        return stats

    algorithm._update_with_batch = observed


def make_logger(tensorboard_dir: str, reporter: Reporter, on_update: Callable[[], None]) -> Any:
    """A Tianshou logger that also feeds ``reporter``; ``on_update()`` runs after every update step.

    Both hooks see Tianshou's data before the logger's own interval filters, then hand it on unchanged."""
    from torch.utils.tensorboard import SummaryWriter
    from tianshou.utils.logger.tensorboard import TensorboardLogger

    class MosaicLogger(TensorboardLogger):
        def log_update_data(self, log_data: dict, step: int) -> None:
            reporter.learner_values(log_data)
            super().log_update_data(log_data, step)
            on_update()

        def log_test_data(self, log_data: dict, step: int) -> None:
            reporter.tested(log_data)
            super().log_test_data(log_data, step)

    return MosaicLogger(SummaryWriter(tensorboard_dir))
