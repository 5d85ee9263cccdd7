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

from collections import defaultdict
from typing import Any, Callable

from mosaic.workerkit.envs import reward_structure
from mosaic.workerkit.episode_stats import winner
from mosaic.workerkit.reporting import IterationReporter

EPISODE_KEYS = "Train-Results/"  # XuanCe's per-episode scalars: reported as episodes, not learner values
JOINT = "joint"
SHARED = "shared"


def module_of(agent: str, shared: bool) -> str:
    return SHARED if shared else agent


class Reporter(IterationReporter):
    """Collects episodes and learner scalars; emits a ``metrics`` event per iteration."""

    def __init__(self, emitter: Any, *, agents: list[str], shared: bool, total_timesteps: int,
                 report_every: int, family: str, env_id: str, iteration: int = 0, episodes: int = 0,
                 timesteps: int = 0) -> None:
        super().__init__(emitter, total_timesteps=total_timesteps, report_every=report_every, iteration=iteration,
                         episodes=episodes, timesteps=timesteps)
        self.agents = agents
        self.shared = shared
        self.structure = reward_structure(family, env_id)
        self.learner: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))

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

    def episode(self, returns: dict[str, float], length: int, timesteps: int) -> None:  # type: ignore[override]
        returns = {a: float(returns[a]) for a in self.agents}
        super().episode(returns, int(length), {a: module_of(a, self.shared) for a in self.agents},
                        winner=winner(returns, self.structure), timesteps_total=timesteps)

    def step_end(self, timesteps: int) -> bool:
        """A vector step ended at ``timesteps``; True when it completed an iteration."""
        self.timesteps = timesteps
        if timesteps < self.next_report and timesteps < self.total:
            return False
        self.report()
        return True

    # -- to MOSAIC -----------------------------------------------------------
    def iteration_values(self) -> dict[str, Any]:
        return {"learner": {m: {k: sum(v) / len(v) for k, v in values.items()} for m, values in self.learner.items()}}

    def iteration_done(self) -> None:
        self.learner.clear()


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
