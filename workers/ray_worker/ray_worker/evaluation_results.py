"""Results of evaluating policies: per episode, and aggregated with 95% confidence intervals."""

from __future__ import annotations

import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class EpisodeMetrics:
    episode: int
    seed: int
    returns: dict[str, float]
    length: int
    duration_s: float
    players: dict[str, str]  # agent -> who played it (module id or "random")
    winner: str | None = None  # 2-player games: the agent with the higher return; None = draw


def _stats(values: list[float]) -> dict[str, float]:
    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    half = 1.96 * std / math.sqrt(n) if n > 1 else 0.0
    return {"mean": mean, "std": std, "min": min(values), "max": max(values),
            "ci95_low": mean - half, "ci95_high": mean + half, "n": n}


@dataclass
class EvaluationResults:
    episodes: list[EpisodeMetrics]
    env: dict[str, Any]
    checkpoint: str
    output_dir: str | None = None
    videos: list[str] = field(default_factory=list)

    @property
    def per_agent(self) -> dict[str, dict[str, float]]:
        agents = sorted({a for e in self.episodes for a in e.returns})
        return {a: _stats([e.returns[a] for e in self.episodes if a in e.returns]) for a in agents}

    @property
    def episode_length(self) -> dict[str, float]:
        return _stats([float(e.length) for e in self.episodes])

    @property
    def outcomes(self) -> dict[str, dict[str, float]] | None:
        """Win/draw/loss rates per player (module id or "random") in 2-player games."""
        if not self.episodes or any(len(e.returns) != 2 for e in self.episodes):
            return None
        tally: dict[str, dict[str, int]] = {}
        for e in self.episodes:
            for agent, player in e.players.items():
                t = tally.setdefault(player, {"win": 0, "draw": 0, "loss": 0, "games": 0})
                t["games"] += 1
                t["draw" if e.winner is None else "win" if e.winner == agent else "loss"] += 1
        return {p: {"win_rate": t["win"] / t["games"], "draw_rate": t["draw"] / t["games"],
                    "loss_rate": t["loss"] / t["games"], "games": t["games"]} for p, t in tally.items()}

    def summary(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "env": self.env, "num_episodes": len(self.episodes),
                "per_agent_return": self.per_agent, "episode_length": self.episode_length,
                "outcomes": self.outcomes, "videos": self.videos}

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "summary.json").write_text(json.dumps(self.summary(), indent=2))
        agents = sorted({a for e in self.episodes for a in e.returns})
        with (folder / "episodes.csv").open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["episode", "seed", "length", "duration_s", "winner",
                             *(f"return_{a}" for a in agents), *(f"player_{a}" for a in agents)])
            for e in self.episodes:
                writer.writerow([e.episode, e.seed, e.length, f"{e.duration_s:.4f}", e.winner or "",
                                 *(e.returns.get(a, "") for a in agents), *(e.players.get(a, "") for a in agents)])
        self.output_dir = str(folder)

    def table(self) -> str:
        """Plain-text results for the terminal."""
        lines = [f"{len(self.episodes)} episodes of {self.env.get('family')}/{self.env.get('env_id')}",
                 f"{'agent':<16}{'mean':>10}{'std':>9}{'min':>9}{'max':>9}   95% CI"]
        for agent, s in self.per_agent.items():
            lines.append(f"{agent:<16}{s['mean']:>10.3f}{s['std']:>9.3f}{s['min']:>9.3f}{s['max']:>9.3f}"
                         f"   [{s['ci95_low']:.3f}, {s['ci95_high']:.3f}]")
        if self.outcomes:
            lines.append(f"{'player':<16}{'win':>8}{'draw':>8}{'loss':>8}{'games':>8}")
            for player, o in self.outcomes.items():
                lines.append(f"{player:<16}{o['win_rate']:>8.2f}{o['draw_rate']:>8.2f}{o['loss_rate']:>8.2f}"
                             f"{o['games']:>8}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "episodes": [asdict(e) for e in self.episodes]}
