"""What the CleanRL script did (records from ``child.py``) -> MOSAIC telemetry events.

The script's TensorBoard calls arrive as records on their own pipe, in order:

- ``charts/episodic_return`` then ``charts/episodic_length`` at the same step
  are one finished episode: an ``episode`` event (agent ``agent_0``);
- every ``charts/SPS`` closes an iteration: a ``metrics`` event with the
  episodes since the last one (``mosaic.workerkit.episode_stats``), the throughput, the
  losses under MOSAIC's names (``learner.policy.*``, mapping in
  ``algorithms.py``) and every scalar of the iteration as the script named it
  (``scalars``);
- ``add_text("hyperparameters")`` becomes a ``log`` event with the options;
- the writer's closing record (the script finished) carries the env steps
  the script ran: a last ``metrics`` event reports them, with any episodes
  since the last SPS;
- a checkpoint becomes ``checkpoint_saved``; the writer's folder is remembered
  for the manifest.

The script's own stdout is kept in ``logs/script.stdout``, not relayed.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from mosaic.workerkit.episode_stats import episode_statistics
from mosaic.workerkit.script_runtime import Relay
from mosaic.workerkit.contract import SINGLE_AGENT

from cleanrl_worker.algorithms import Algorithm

AGENT = SINGLE_AGENT
MODULE = "policy"


class Translator:
    def __init__(self, algorithm: Algorithm, total_timesteps: int) -> None:
        self.algorithm = algorithm
        self.total_timesteps = total_timesteps
        self.losses = dict(algorithm.losses)
        self.iteration = 0
        self.episodes_lifetime = 0
        self.step = 0
        self.reported_step = 0  # timesteps_total of the last metrics event
        self.episodes: list[dict[str, Any]] = []
        self.scalars: dict[str, float] = {}
        self.pending_return: tuple[int, float] | None = None
        self.last_return_mean: float | None = None
        self.log_dir: str | None = None
        self.checkpoints: list[str] = []

    def __call__(self, line: str, stream: str) -> Iterator[Relay]:
        if stream != "telemetry":
            return
        record = json.loads(line)
        kind = record.pop("kind")
        if kind == "scalar":
            yield from self._scalar(record["tag"], float(record["value"]), int(record["step"]))
        elif kind == "text":
            if record["tag"] == "hyperparameters":
                yield "log", {"level": "info", "message": "script options:\n" + record["text"]}
        elif kind == "writer":
            self.log_dir = record["log_dir"]
        elif kind == "checkpoint":
            self.checkpoints.append(record["path"])
            yield "checkpoint_saved", {"path": record["path"], "iteration": int(record["iteration"]),
                                       "timesteps_total": int(record["step"])}
        elif kind == "closed":
            # The script finished: the closing count is the env steps it ran. Episodes after the last
            # SPS, and steps after it, still count.
            self.step = max(self.step, int(record.get("step", 0)))
            if self.episodes or self.step > self.reported_step:
                yield self._metrics(None)
        elif kind == "log":
            yield "log", {"level": record.get("level", "info"), "message": record.get("message", "")}

    def _scalar(self, tag: str, value: float, step: int) -> Iterator[Relay]:
        self.step = max(self.step, step)
        if tag == "charts/episodic_return":
            self.pending_return = (step, value)
            return
        if tag == "charts/episodic_length" and self.pending_return is not None:
            ret_step, ret = self.pending_return
            self.pending_return = None
            if ret_step == step:
                episode = {"returns": {AGENT: ret}, "length": int(value), "modules": {AGENT: MODULE}}
                self.episodes.append(episode)
                self.episodes_lifetime += 1
                yield "episode", {"episode": self.episodes_lifetime - 1, "length": int(value),
                                  "returns": {AGENT: ret}, "timesteps_total": step}
            return
        self.scalars[tag] = value
        if tag == "charts/SPS":
            yield self._metrics(value)

    def _metrics(self, sps: float | None) -> Relay:
        self.iteration += 1
        stats = episode_statistics(self.episodes)
        if "episode_return_mean" in stats:
            self.last_return_mean = stats["episode_return_mean"]
        learner: dict[str, float] = {}
        for tag, value in self.scalars.items():
            group, _, name = tag.partition("/")
            if group == "losses":
                learner[self.losses.get(name, name)] = value
        fields: dict[str, Any] = {"iteration": self.iteration, "timesteps_total": self.step,
                                  "total_timesteps": self.total_timesteps,
                                  "num_episodes_lifetime": self.episodes_lifetime, **stats,
                                  "scalars": dict(self.scalars)}
        if sps is not None:
            fields["env_steps_per_s"] = sps
        if learner:
            fields["learner"] = {MODULE: learner}
        self.episodes, self.scalars = [], {}
        self.reported_step = self.step
        return "metrics", fields

    def summary(self) -> dict[str, Any]:
        return {"timesteps_total": self.step, "iterations": self.iteration,
                "num_episodes": self.episodes_lifetime, "episode_return_mean": self.last_return_mean,
                "checkpoints": len(self.checkpoints), "tensorboard": self.log_dir}
