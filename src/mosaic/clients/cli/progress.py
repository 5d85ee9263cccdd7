"""Live progress of a run in the terminal, fed by telemetry events."""

from __future__ import annotations

import sys
import time
from typing import IO, Any

from mosaic.workerkit.episode_stats import zero_sum_returns


def _fmt(value: Any, digits: int = 2) -> str:
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return "-" if value is None else str(value)


class ProgressView:
    """A redrawn progress bar on a TTY; one line per iteration otherwise."""

    def __init__(self, stream: IO[str] | None = None, width: int = 24) -> None:
        self.stream = stream or sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.width = width
        self.total: int | None = None
        self.last_draw = 0.0
        self.episodes = 0
        self.last_return: float | None = None
        self.iteration_returns: list[float] = []  # each iteration's mean episode return, for the summary
        self.zero_sum: list[dict[str, float]] = []  # ... and each agent's, where the agents' returns cancel out
        self.iterations = 0  # every metrics event, with finished episodes or not
        self.checkpoints: list[str] = []
        self.line = ""

    def __call__(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "run_started":
            self.total = event.get("total_timesteps")
            env = event.get("env") or {}
            self._print(f"run {event['run_id']}: {event.get('worker')} "
                        f"{event.get('algorithm', '')} on {env.get('family', '?')}/{env.get('env_id', '?')}")
        elif kind == "episode":
            self.episodes += 1
            returns = event.get("returns") or {}
            self.last_return = sum(v for v in returns.values() if isinstance(v, (int, float)))
        elif kind == "metrics":
            self.iterations += 1
            ret = event.get("episode_return_mean")
            if isinstance(ret, (int, float)) and not isinstance(ret, bool):
                self.iteration_returns.append(float(ret))
                per_agent = zero_sum_returns(event)
                if per_agent is not None:
                    self.zero_sum.append(per_agent)
            self._draw(event, force=not self.tty)
        elif kind == "checkpoint_saved":
            self.checkpoints.append(str(event.get("path")))
            self._print(f"checkpoint: {event.get('path')}")
        elif kind in ("paused", "resumed"):
            self._print(kind)
        elif kind == "log" and event.get("self_play_event"):
            self._print(event.get("message", ""))  # snapshots joining a self-play pool are milestones
        elif kind == "log" and event.get("level") in ("warning", "error") and not event.get("raw"):
            self._print(f"[{event['level']}] {event.get('message', '')}")

    def _draw(self, m: dict[str, Any], force: bool) -> None:
        now = time.monotonic()
        if not force and now - self.last_draw < 0.1:
            return
        self.last_draw = now
        done = m.get("timesteps_total", 0)
        total = m.get("total_timesteps") or self.total
        if total:
            frac = min(1.0, done / total)
            filled = int(frac * self.width)
            bar = f"[{'#' * filled}{'.' * (self.width - filled)}] {frac:4.0%} {done}/{total}"
        else:
            bar = f"{done} steps"
        ret = m.get("episode_return_mean", self.last_return)
        line = (f"{bar} | it {m.get('iteration')} | {_fmt(m.get('env_steps_per_s'), 0)} steps/s"
                f" | return {_fmt(ret)} | episodes {m.get('num_episodes_lifetime', self.episodes)}")
        league = m.get("self_play")
        if isinstance(league, dict):  # zero-sum returns say nothing; main's win rate and the pool do
            line += f" | win {_fmt(league.get('window_win_rate'))} | pool {_fmt(league.get('pool_size'))}"
        if self.tty:
            self.stream.write("\r" + line.ljust(len(self.line)))
            self.line = line
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def _print(self, text: str) -> None:
        if self.tty and self.line:
            self.stream.write("\n")
            self.line = ""
        self.stream.write(text + "\n")
        self.stream.flush()

    def learning_summary(self) -> str | None:
        """How the mean episode return moved: the first iterations against the last ones."""
        returns = self.iteration_returns
        if len(returns) < 2:
            return None
        k = max(1, min(3, len(returns) // 4))  # a few iterations each end: one is noisy
        span = "iteration" if k == 1 else f"{k} iterations"
        if self.zero_sum and len(self.zero_sum) * 2 >= len(returns):  # the sum says nothing: each agent's mean
            agents = list(self.zero_sum[-1])
            ends = [{a: sum(r.get(a, 0.0) for r in part) / len(part) for a in agents}
                    for part in (self.zero_sum[:k], self.zero_sum[-k:])]
            return (f"mean episode return per agent (they sum to 0: a zero-sum game), over the first {span} -> the "
                    f"last: " + ", ".join(f"{a} {ends[0][a]:+.2f} -> {ends[1][a]:+.2f}" for a in agents)
                    + f" ({self.iterations} iterations)")
        first, last = sum(returns[:k]) / k, sum(returns[-k:]) / k
        return (f"mean episode return: {first:.2f} over the first {span}, {last:.2f} over the last "
                f"({last - first:+.2f}; best iteration {max(returns):.2f}, {self.iterations} iterations"
                + (f", {len(returns)} with finished episodes)" if len(returns) != self.iterations else ")"))

    def close(self) -> None:
        if self.tty and self.line:
            self.stream.write("\n")
            self.stream.flush()
            self.line = ""
