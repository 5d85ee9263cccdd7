"""What BenchMARL reports, as MOSAIC telemetry with the shared metric names.

One observation point, BenchMARL's own extension point: a ``benchmarl.experiment.Callback``.

* ``on_batch_collected``: the collected batch (``[envs, steps]``): its frames, and every episode that ended in
  it, each agent's return from BenchMARL's ``episode_reward`` (TorchRL's ``RewardSum``) at the global done,
  its length counted per env across batches: ``episode`` events;
* ``on_train_end``: a group's training tensordict (one row per gradient step): the mean of each loss and
  statistic, as the learner scalars of the module named after the group (BenchMARL's agent group: its agents
  share parameters when ``share_policy_params``);
* ``on_state_dict`` and ``on_load_state_dict``: the optimisers' state, which BenchMARL's own
  ``Experiment.state_dict`` leaves out, saved and restored with it;
* ``on_setup``: the experiment is built; the end of each iteration (one collected batch and its training) is
  where BenchMARL commits its loggers (``Experiment.logger.commit``, after its counters moved on), observed on
  the instance: the run's safe point (``runtime.py``).

An iteration's ``metrics`` event carries the episodes that ended in it (``mosaic.workerkit.episode_stats``:
``episode_return_mean`` is the team's, summed over all agents; ``module_episode_returns_mean`` per group) and
the learner scalars; with ``reporting.every_timesteps`` several BenchMARL iterations make one.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Callable, Mapping, Sequence

from benchmarl.experiment import Callback

from mosaic.workerkit.reporting import IterationReporter


#: Where a checkpoint's experiment state keeps the optimisers' state (beside BenchMARL's own keys).
OPTIMISERS = "mosaic_optimizers"


class Reporter(IterationReporter):
    """Episodes and learner scalars from BenchMARL's batches; a ``metrics`` event per iteration."""

    def __init__(self, emitter: Any, *, groups: Mapping[str, Sequence[str]], total_timesteps: int,
                 report_every: int | None) -> None:
        super().__init__(emitter, total_timesteps=total_timesteps, report_every=report_every or 1)
        self.groups = {g: list(agents) for g, agents in groups.items()}
        self.modules = {agent: group for group, agents in self.groups.items() for agent in agents}
        self.learner: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        self.running: list[int] = []  # steps each env's current episode has taken before this batch

    # -- from BenchMARL ------------------------------------------------------------------------
    def collected(self, batch: Any) -> None:
        """A collected batch: its frames, and its finished episodes in the order they ended."""
        if batch.batch_dims == 1:
            batch = batch.unsqueeze(0)
        envs, steps = batch.batch_size[0], batch.batch_size[1]
        if len(self.running) != envs:
            self.running = [0] * envs
        done = batch.get(("next", "done")).reshape(envs, steps, -1).any(-1)
        returns = {group: self._episode_rewards(batch, group) for group in self.groups}
        ended = sorted((int(t), int(e)) for e, t in done.nonzero().tolist())
        start = [0] * envs  # where each env's current episode began in this batch
        for t, e in ended:
            length = self.running[e] + t - start[e] + 1
            per_agent = {agent: float(returns[group][e, t, i])
                         for group, agents in self.groups.items() for i, agent in enumerate(agents)}
            self.episode(per_agent, length, self.modules, timesteps_total=self.timesteps + (t + 1) * envs)
            self.running[e], start[e] = 0, t + 1
        for e in range(envs):
            self.running[e] += steps - start[e]
        self.timesteps += envs * steps

    @staticmethod
    def _episode_rewards(batch: Any, group: str) -> Any:
        """``[envs, steps, agents]``: each agent's return so far, BenchMARL's reading of it (its Logger's
        ``_get_episode_reward``: the group's own, else the env's shared one)."""
        value = batch.get(("next", group, "episode_reward"), None)
        if value is None:
            value = batch.get(("next", "episode_reward")).expand(*batch.get(group).shape).unsqueeze(-1)
        return value[..., 0].detach().cpu()

    def trained(self, training: Any, group: str) -> None:
        """A group's training tensordict: the mean of each scalar over its gradient steps."""
        for key, value in training.items():
            if hasattr(value, "float"):  # a tensor: one value per gradient step
                self.learner[group][str(key)].append(float(value.float().mean()))

    # -- to MOSAIC -----------------------------------------------------------------------------
    def iteration_values(self) -> dict[str, Any]:
        return {"learner": {g: {k: sum(v) / len(v) for k, v in values.items()} for g, values in self.learner.items()}}

    def iteration_done(self) -> None:
        self.learner.clear()


class MosaicCallback(Callback):
    """Feeds ``reporter``; ``on_iteration_end(experiment)`` runs at the end of every iteration, once BenchMARL's
    counters moved on; ``on_step()`` after a collection and between gradient steps."""

    def __init__(self, reporter: Reporter, on_iteration_end: Callable[[Any], None],
                 on_step: Callable[[], None]) -> None:
        super().__init__()
        self.reporter, self.on_iteration_end, self.on_step = reporter, on_iteration_end, on_step

    def __getstate__(self) -> dict[str, Any]:
        """What BenchMARL's ``config.pkl`` keeps of it: nothing (it pickles its callbacks with its configs; this
        one's telemetry belongs to the run's process)."""
        return {}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.experiment = self.reporter = None

    def on_setup(self) -> None:
        logger = self.experiment.logger
        commit = logger.commit

        def committed() -> None:  # the last thing of an iteration but BenchMARL's own checkpoint (off here)
            commit()
            self.on_iteration_end(self.experiment)

        logger.commit = committed

    def on_batch_collected(self, batch: Any) -> None:
        self.reporter.collected(batch)
        self.on_step()

    def on_train_step(self, batch: Any, group: str) -> None:
        self.on_step()

    def on_train_end(self, training_td: Any, group: str) -> None:
        self.reporter.trained(training_td, group)

    def on_state_dict(self, state_dict: dict[str, Any]) -> None:
        """BenchMARL's experiment state holds no optimiser: the Adam moments go with it, so a resumed run goes on
        where it stopped."""
        state_dict[OPTIMISERS] = {group: {name: optimiser.state_dict() for name, optimiser in by_loss.items()}
                                  for group, by_loss in self.experiment.optimizers.items()}

    def on_load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for group, by_loss in state_dict.get(OPTIMISERS, {}).items():
            for name, state in by_loss.items():
                self.experiment.optimizers[group][name].load_state_dict(state)
