"""What XuanCe reports, as MOSAIC telemetry with the Ray worker's names.

Two observation points, neither an edit of XuanCe:

* a ``MultiAgentBaseCallback`` (XuanCe's own extension point): an episode's
  per-agent returns and length when it ends, and the end of every vector step,
  which is also the run's safe point (pause, cancel, periodic checkpoints);
* the agent's ``log_infos`` (what XuanCe sends to TensorBoard), wrapped on the
  instance: learner scalars such as ``agent_0/actor_loss`` or ``loss_Q``.

An "iteration" is ``reporting.every_timesteps`` env steps: one ``metrics`` event
with the episodes that ended in it (``mosaic.workerkit.episode_stats``) and the mean of
each learner scalar over its updates, keyed by module like the Ray worker's
``learner`` field: ``shared`` when agents share parameters, else the agent's id;
scalars that belong to no single agent (a mixer's ``loss_Q``, the learning rate
of a shared optimiser) go under ``joint``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Callable

from mosaic.workerkit.envs import reward_structure
from mosaic.workerkit.episode_stats import episode_statistics, winner

EPISODE_KEYS = "Train-Results/"  # XuanCe's per-episode scalars: reported as episodes, not learner values
JOINT = "joint"
SHARED = "shared"


def module_of(agent: str, shared: bool) -> str:
    return SHARED if shared else agent


class Reporter:
    """Collects episodes and learner scalars; emits a ``metrics`` event per iteration."""

    def __init__(self, emitter: Any, *, agents: list[str], shared: bool, total_timesteps: int,
                 report_every: int, family: str, env_id: str, iteration: int = 0, episodes: int = 0,
                 timesteps: int = 0) -> None:
        self.emitter = emitter
        self.agents = agents
        self.shared = shared
        self.total = total_timesteps
        self.every = report_every
        self.structure = reward_structure(family, env_id)
        self.iteration, self.episodes, self.timesteps = iteration, episodes, timesteps
        self.window: list[dict[str, Any]] = []
        self.learner: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.next_report = timesteps + report_every
        self._t, self._steps_at = time.perf_counter(), timesteps

    def start_clock(self) -> None:
        """Training starts now: the first iteration's env steps/s counts from here."""
        self._t, self._steps_at = time.perf_counter(), self.timesteps

    # -- from XuanCe ---------------------------------------------------------
    def learner_values(self, info: dict[str, Any]) -> None:
        for key, value in info.items():
            if key.startswith(EPISODE_KEYS) or value is None:
                continue
            if isinstance(value, dict):
                continue  # XuanCe's grouped scalars (per env) are episode data
            try:
                number = float(value)
            except (TypeError, ValueError):
                continue
            agent, sep, name = key.partition("/")
            if sep and agent in self.agents:
                self.learner[module_of(agent, self.shared)][name].append(number)
            else:
                self.learner[SHARED if self.shared else JOINT][key].append(number)

    def episode(self, returns: dict[str, float], length: int, timesteps: int) -> None:
        returns = {a: float(returns[a]) for a in self.agents}
        self.emitter.episode(episode=self.episodes, length=int(length), returns=returns,
                             winner=winner(returns, self.structure), timesteps_total=timesteps)
        self.window.append({"returns": returns, "length": int(length),
                            "modules": {a: module_of(a, self.shared) for a in self.agents}})
        self.episodes += 1

    def step_end(self, timesteps: int) -> bool:
        """A vector step ended at ``timesteps``; True when it completed an iteration."""
        self.timesteps = timesteps
        if timesteps < self.next_report and timesteps < self.total:
            return False
        self.report()
        return True

    # -- to MOSAIC -----------------------------------------------------------
    def flush(self) -> None:
        """Report what the last, partial iteration saw, if anything."""
        if self.window or self.timesteps > self._steps_at:
            self.report()

    def report(self) -> dict[str, Any] | None:
        self.iteration += 1
        elapsed = time.perf_counter() - self._t
        learner = {m: {k: sum(v) / len(v) for k, v in values.items()} for m, values in self.learner.items()}
        event = self.emitter.metrics(
            iteration=self.iteration, timesteps_total=self.timesteps, total_timesteps=self.total,
            env_steps_per_s=(self.timesteps - self._steps_at) / max(elapsed, 1e-9),
            num_episodes_lifetime=self.episodes, learner=learner, **episode_statistics(self.window))
        self.window.clear()
        self.learner.clear()
        self._t, self._steps_at = time.perf_counter(), self.timesteps
        self.next_report = self.timesteps + self.every
        return event


def make_callback(reporter: Reporter, on_step_end: Callable[[int], None]) -> Any:
    """A XuanCe callback feeding ``reporter``; ``on_step_end(timesteps)`` runs at every safe point."""
    from xuance.common.callback import MultiAgentBaseCallback

    class MosaicCallback(MultiAgentBaseCallback):
        def on_train_episode_info(self, **kwargs: Any) -> None:
            info = kwargs["infos"][kwargs["env_id"]]
            reporter.episode(info["episode_score"], info["episode_step"], int(kwargs["current_step"]))

        def on_train_step_end(self, current_step: int, **kwargs: Any) -> None:
            on_step_end(int(current_step))

    return MosaicCallback()
