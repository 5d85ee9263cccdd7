"""What ``jumanji.training`` logs, as MOSAIC telemetry with the shared metric names.

``train.py`` hands every value it logs to its logger's ``write(data, label,
env_steps)``: per epoch, the stochastic evaluation (``eval_stochastic``), the
greedy one (``eval_greedy``, A2C only) and the epoch's training statistics
(``train``: A2C's losses, Jumanji's timer). The worker's logger is a subclass of
Jumanji's ``TerminalLogger`` (:func:`make_logger`), so nothing of Jumanji's own
logging changes; it passes each write to a :class:`Reporter`.

One epoch is one MOSAIC iteration: after its ``train`` write, a ``metrics``
event carries

* ``timesteps_total``: env steps taken, epochs × n_steps × num_envs (total_batch_size) ×
  num_learner_steps_per_epoch (Jumanji's own count);
* ``episode_return_mean`` / ``episode_len_mean`` / ``num_episodes``: the
  stochastic evaluation logged in that epoch (Jumanji evaluates before training,
  so iteration *k* shows the policy after *k - 1* epochs); ``greedy``: the same
  from the greedy evaluation;
* ``measures``: the env's own measures of those episodes, e.g. ``tour_length``
  (TSP: minus the return) or ``volume_utilization`` (BinPack, from the env's
  ``extras``), each ``<name>`` (stochastic) and ``<name>_greedy``;
* ``learner.policy``: A2C's losses under Jumanji's names and MOSAIC's
  (``critic_loss`` also as ``vf_loss``); ``env_steps_per_s``: Jumanji's timer of
  the epoch's training;
* ``jumanji``: every value Jumanji logged in the epoch, by its label.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from mosaic.workerkit.contract import SINGLE_AGENT
from mosaic.workerkit.reporting import IterationReporter

AGENT = SINGLE_AGENT
MODULE = "policy"
#: A2C's names that MOSAIC also has (docs/telemetry.md).
NAMES = {"critic_loss": "vf_loss"}
#: What Jumanji's timer adds to every write: not a measure of the policy.
TIMER_KEYS = ("time", "steps_per_second")
#: Per-episode values of the evaluation that are not the env's own measures.
EPISODE_KEYS = ("episode_return", "episode_length")


def env_measures(environment: str, values: Mapping[str, float]) -> dict[str, float]:
    """The env's own measures of evaluated episodes: its ``extras`` (BinPack's ``volume_utilization``, ...),
    and TSP's ``tour_length`` (its reward is minus the distance travelled)."""
    out = {k: v for k, v in values.items() if k not in EPISODE_KEYS and k not in TIMER_KEYS}
    if environment == "tsp" and "episode_return" in values:
        out["tour_length"] = -values["episode_return"]
    return out


def scalars(data: Mapping[str, Any]) -> dict[str, float]:
    """Jumanji's logged values that are numbers (it logs 0-d arrays), as floats; NaN and inf dropped."""
    out = {}
    for key, value in data.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            continue
        if getattr(value, "ndim", 0) == 0 and math.isfinite(number):
            out[key] = number
    return out


class Reporter(IterationReporter):
    """Gathers one epoch's writes; emits its ``metrics`` event after the ``train`` write.

    One epoch is one iteration (``epoch`` is the kit's ``iteration``: epochs completed, a restored run starting
    where its checkpoint was); ``episodes`` is Jumanji's own count of training episodes; env steps/s come from
    Jumanji's timer, and the episode statistics from its evaluation, not from the kit's window and clock.
    """

    def __init__(self, emitter: Any, *, environment: str, steps_per_epoch: int, total_epochs: int,
                 first_epoch: int = 0) -> None:
        super().__init__(emitter, total_timesteps=total_epochs * steps_per_epoch, report_every=steps_per_epoch,
                         iteration=first_epoch, timesteps=first_epoch * steps_per_epoch)
        self.environment = environment
        self.steps_per_epoch, self.total_epochs = steps_per_epoch, total_epochs
        self.logged: dict[str, dict[str, float]] = {}

    @property
    def epoch(self) -> int:
        return self.iteration

    def write(self, data: Mapping[str, Any], label: str | None) -> dict[str, Any] | None:
        """One ``logger.write``; the ``metrics`` event when it closed an epoch."""
        self.logged[label or "values"] = scalars(data)
        return self.report() if label == "train" else None

    def report(self) -> dict[str, Any] | None:
        self.iteration += 1
        self.timesteps = self.iteration * self.steps_per_epoch
        logged, self.logged = self.logged, {}
        train = logged.get("train", {})
        values: dict[str, Any] = {"total_timesteps": self.total,
                                  "num_episodes_lifetime": self.episodes, "jumanji": logged}
        if "steps_per_second" in train:
            values["env_steps_per_s"] = train["steps_per_second"]
        stochastic, greedy = logged.get("eval_stochastic", {}), logged.get("eval_greedy", {})
        # Jumanji's agents add the env's extras of their training rollouts (BinPack's volume_utilization, Cleaner's
        # ratio_dirty_tiles) to the training statistics; those are the env's measures, not the learner's: they stay
        # under ``jumanji.train`` only. The env's extras are what its evaluation reports beside return and length.
        extras = set(env_measures(self.environment, stochastic)) | set(env_measures(self.environment, greedy))
        learner = {k: v for k, v in train.items() if k not in TIMER_KEYS and k not in extras}
        learner.update({NAMES[k]: v for k, v in learner.items() if k in NAMES})
        if learner:
            values["learner"] = {MODULE: learner}
        if "episode_return" in stochastic:
            ret = stochastic["episode_return"]
            values.update(episode_return_mean=ret, episode_len_mean=stochastic.get("episode_length"),
                          agent_episode_returns_mean={AGENT: ret}, module_episode_returns_mean={MODULE: ret})
        measures = env_measures(self.environment, stochastic)
        if greedy:
            values["greedy"] = {"episode_return_mean": greedy.get("episode_return"),
                                "episode_len_mean": greedy.get("episode_length")}
            measures.update({f"{k}_greedy": v for k, v in env_measures(self.environment, greedy).items()})
        if measures:
            values["measures"] = measures
        return self.emitter.metrics(iteration=self.iteration, timesteps_total=self.timesteps, **values)


def make_logger(reporter: Reporter, after_epoch: Callable[[Any], None]) -> Any:
    """A Jumanji logger that also feeds ``reporter``; ``after_epoch(training_state)`` runs after each epoch.

    ``train.py``'s loop keeps its ``TrainingState`` in a local variable named ``training_state``; Jumanji's
    own checkpointing logger reads it from the loop's frame, and so does this one, after each ``train`` write.
    """
    import inspect

    from jumanji.training.loggers import TerminalLogger

    class MosaicLogger(TerminalLogger):
        def write(self, data: dict, label: str | None = None, env_steps: int | None = None) -> None:
            super().write(data, label, env_steps)
            if label != "train":
                reporter.write(data, label)
                return
            caller = inspect.currentframe().f_back  # train.py's loop
            state = caller.f_locals.get("training_state") if caller is not None else None
            if state is not None:
                reporter.episodes = int(state.acting_state.episode_count.sum())
            reporter.write(data, label)
            after_epoch(state)

    return MosaicLogger(name="", save_checkpoint=False)
