"""Playing trained policies for evaluation, the same way for every worker.

A worker loads its checkpoint into a :class:`Controller` (agent -> an
:class:`Actor`, or None for a uniformly random legal move) and builds the env;
this module plays the episodes (AEC or parallel PettingZoo, agents that share
an actor batched into one forward pass), records returns, lengths, seats and
winners (:class:`EpisodeMetrics`), aggregates them with 95% confidence
intervals and win/draw/loss rates (:class:`EvaluationResults`), writes
``summary.json``, ``episodes.csv`` and GIF videos, and lists the evaluation in
the run's manifest. Frames can go to FastLane too (:class:`FrameSink`).
"""

from __future__ import annotations

import contextlib
import contextvars
import csv
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

import numpy as np

from mosaic.workerkit.contract import SINGLE_AGENT
from mosaic.workerkit.episode_stats import winner
from mosaic.workerkit.progress_line import ProgressLine

RANDOM = "random"
#: What ``--opponent`` named for the evaluation this process plays (the kit's ``--evaluate`` sets it), so that
#: every worker's results record it.
_OPPONENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("evaluation_opponent", default=None)
#: Inside ``mosaic eval`` (the kit's ``--evaluate``): the label of the episodes' progress line on a terminal and
#: the lines drawn; None elsewhere (a match's games, which their caller counts).
_PROGRESS: contextvars.ContextVar[tuple[str, list[ProgressLine]] | None] = contextvars.ContextVar(
    "evaluation_progress", default=None)


@contextlib.contextmanager
def evaluating(target: str, opponent: str | None) -> Iterator[None]:
    """``mosaic eval TARGET``: episodes played inside draw their progress on a terminal, and results made inside
    record ``opponent`` (what ``--opponent`` named) where they name none themselves."""
    from pathlib import Path

    lines: list[ProgressLine] = []
    tokens = _OPPONENT.set(opponent), _PROGRESS.set((f"eval {Path(target).name}", lines))
    try:
        yield
    finally:
        for line in lines:  # a line an error cut short ends before the error is said
            line.close()
        _OPPONENT.reset(tokens[0])
        _PROGRESS.reset(tokens[1])


def episode_progress(num_episodes: int) -> ProgressLine | None:
    """The progress line of ``num_episodes`` episodes of ``mosaic eval`` (None outside it)."""
    context = _PROGRESS.get()
    if context is None:
        return None
    label, lines = context
    lines.append(ProgressLine(label, num_episodes, "episodes"))
    return lines[-1]


class Actor(Protocol):
    module_id: str

    def compute_action(self, obs: Any) -> Any: ...

    def compute_actions(self, observations: Sequence[Any]) -> Sequence[Any]: ...


class Controller(Protocol):
    """Who plays each agent: an actor, or None for a random legal move."""

    def actor_for(self, agent: str) -> Actor | None: ...


def player_name(actor: Actor | None) -> str:
    """Who an actor is in the results: the opponent it was lent by (its ``player``: what ``--opponent`` named),
    else its module id; ``random`` for no actor (a random legal move)."""
    if actor is None:
        return RANDOM
    return getattr(actor, "player", None) or getattr(actor, "module_id", RANDOM)


@dataclass
class EpisodeMetrics:
    episode: int
    seed: int
    returns: dict[str, float]
    length: int
    duration_s: float
    players: dict[str, str]  # agent -> who played it (module id, the opponent as --opponent named it, "random")
    winner: str | None = None  # 2-player games: the agent with the higher return; None = draw
    #: The env's own measures of the episode besides its return (a tour's length, a bin's
    #: volume utilisation, ...), by name; empty where the env has none.
    measures: dict[str, float] = field(default_factory=dict)


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
    #: What ``--opponent`` named (``random``, a run, ``scripted:M:F``); None: the run played alone. Default: the
    #: one :func:`opponent_given` set.
    opponent: str | None = field(default_factory=_OPPONENT.get)

    @property
    def seats(self) -> list[dict[str, Any]]:
        """Who played which agent: each seating (agent -> player: module id, run or opponent) with the
        episodes it played, in the order first played."""
        found: dict[tuple, list[int]] = {}
        for e in self.episodes:
            found.setdefault(tuple(sorted(e.players.items())), []).append(e.episode)
        label = self._opponent_label()
        return [{"players": dict(key), "opponent_agents": [agent for agent, player in key if label and player == label],
                 "episodes": len(eps), "first_episode": eps[0]} for key, eps in found.items()]

    def _opponent_label(self) -> str | None:
        """The name the opponent's episodes record it by: a match's second player (mosaic.host.head_to_head),
        else what ``--opponent`` named (``random``)."""
        players = self.env.get("players")
        if self.opponent and isinstance(players, list) and len(players) == 2:
            return str(players[1])
        return self.opponent

    @property
    def per_agent(self) -> dict[str, dict[str, float]]:
        agents = sorted({a for e in self.episodes for a in e.returns})
        return {a: _stats([e.returns[a] for e in self.episodes if a in e.returns]) for a in agents}

    @property
    def episode_length(self) -> dict[str, float]:
        return _stats([float(e.length) for e in self.episodes])

    @property
    def measures(self) -> dict[str, dict[str, float]]:
        """Statistics (mean, 95% CI, ...) of each of the env's own per-episode measures."""
        names = sorted({m for e in self.episodes for m in e.measures})
        return {m: _stats([e.measures[m] for e in self.episodes if m in e.measures]) for m in names}

    @property
    def outcomes(self) -> dict[str, dict[str, float]] | None:
        """Win/draw/loss rates per player (module id or "random") in 2-player games.

        None where nobody wins: more or fewer than two agents, or an env whose
        agents share their goal (``mosaic.workerkit.envs.reward_structure`` is cooperative).
        """
        from mosaic.workerkit.envs import reward_structure

        if not self.episodes or any(len(e.returns) != 2 for e in self.episodes):
            return None
        if reward_structure(str(self.env.get("family")), str(self.env.get("env_id"))) in ("cooperative", "single"):
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
                "opponent": self.opponent, "seats": self.seats, "per_agent_return": self.per_agent,
                "episode_length": self.episode_length, "outcomes": self.outcomes, "videos": self.videos,
                **({"measures": self.measures} if self.measures else {})}

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "summary.json").write_text(json.dumps(self.summary(), indent=2))
        agents = sorted({a for e in self.episodes for a in e.returns})
        measures = sorted(self.measures)
        with (folder / "episodes.csv").open("w", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["episode", "seed", "length", "duration_s", "winner",
                             *(f"return_{a}" for a in agents), *(f"player_{a}" for a in agents),
                             *(f"measure_{m}" for m in measures)])
            for e in self.episodes:
                writer.writerow([e.episode, e.seed, e.length, f"{e.duration_s:.4f}", e.winner or "",
                                 *(e.returns.get(a, "") for a in agents), *(e.players.get(a, "") for a in agents),
                                 *(e.measures.get(m, "") for m in measures)])
        self.output_dir = str(folder)

    def table(self) -> str:
        """Plain-text results for the terminal."""
        lines = [f"{len(self.episodes)} episodes of {self.env.get('family')}/{self.env.get('env_id')}"
                 + (f" against {self.opponent}" if self.opponent else "")]
        if self.opponent:
            for seating in self.seats:
                theirs = seating["opponent_agents"]
                ours = [agent for agent in seating["players"] if agent not in theirs]
                played = (f"the opponent plays {', '.join(theirs)}; the run plays {', '.join(ours) or 'none'}"
                          if theirs else ", ".join(f"{a}: {p}" for a, p in seating["players"].items()))
                lines.append(f"seats in {seating['episodes']} episode{'' if seating['episodes'] == 1 else 's'}: "
                             f"{played}")
        lines += [f"{'agent':<16}{'mean':>10}{'std':>9}{'min':>9}{'max':>9}   95% CI"]
        for agent, s in self.per_agent.items():
            lines.append(f"{agent:<16}{s['mean']:>10.3f}{s['std']:>9.3f}{s['min']:>9.3f}{s['max']:>9.3f}"
                         f"   [{s['ci95_low']:.3f}, {s['ci95_high']:.3f}]")
        for name, s in self.measures.items():
            lines.append(f"{name:<16}{s['mean']:>10.3f}{s['std']:>9.3f}{s['min']:>9.3f}{s['max']:>9.3f}"
                         f"   [{s['ci95_low']:.3f}, {s['ci95_high']:.3f}]")
        if self.outcomes:
            lines.append(f"{'player':<16}{'win':>8}{'draw':>8}{'loss':>8}{'games':>8}")
            for player, o in self.outcomes.items():
                lines.append(f"{player:<16}{o['win_rate']:>8.2f}{o['draw_rate']:>8.2f}{o['loss_rate']:>8.2f}"
                             f"{o['games']:>8}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {**self.summary(), "episodes": [asdict(e) for e in self.episodes]}


# -- playing -----------------------------------------------------------------------
def legal_random(rng: np.random.Generator, space: Any, obs: Any, info: Any) -> Any:
    mask = obs.get("action_mask") if isinstance(obs, dict) else (info or {}).get("action_mask")
    if mask is not None:
        return int(rng.choice(np.flatnonzero(mask)))
    space.seed(int(rng.integers(2**31)))
    return space.sample()


def run_folder_of(checkpoint: Path) -> Path | None:
    parent = checkpoint.parent
    return parent.parent if parent.name == "checkpoints" else None


def eval_lane(checkpoint: Path, fps: float = 30.0) -> Any:
    """A FastLane publisher for an evaluation's frames: stream ``eval`` of the checkpoint's run
    (``mosaic watch RUN --stream eval``; its last frame stays in the run folder), or of a run id of
    its own for a checkpoint outside any run. Every worker's ``mosaic eval --fastlane`` uses it."""
    import time

    from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
    from mosaic.fastlane.publisher import Publisher

    run = run_folder_of(Path(checkpoint))
    run_id = run.name if run is not None else f"eval-{time.strftime('%Y%m%d-%H%M%S')}"
    target = FastLaneTarget(run_id, str(run) if run is not None else None,
                            FastLaneConfig(enabled=True, fps=fps, max_overhead=0.0))
    return Publisher(target, "eval")


def _act(controller: Controller, agent: str, obs: Any, info: Any, rng: np.random.Generator,
         space: Any) -> Any:
    actor = controller.actor_for(agent)
    if actor is None:
        return legal_random(rng, space, obs, info)
    return actor.compute_action(obs)


def play_aec(env: Any, controller: Controller, rng: np.random.Generator, seed: int,
              max_steps: int | None, frames: "FrameSink | None",
              on_actions: "Callable[[dict[str, Any]], None] | None" = None) -> tuple[dict[str, float], int]:
    env.reset(seed=seed)
    returns = {a: 0.0 for a in env.possible_agents}
    length = 0
    for agent in env.agent_iter():
        obs, _, term, trunc, info = env.last()
        action = None if term or trunc else _act(controller, agent, obs, info, rng, env.action_space(agent))
        if on_actions is not None and action is not None:
            on_actions({agent: action})
        env.step(action)
        for a, r in env.rewards.items():
            returns[a] += float(r)
        if action is not None:
            length += 1
            if frames is not None:
                frames.append(env.render, length, returns)
        if max_steps and length >= max_steps:
            break
    return returns, length


def play_parallel(env: Any, controller: Controller, rng: np.random.Generator, seed: int,
                   max_steps: int | None, frames: "FrameSink | None",
                   on_actions: "Callable[[dict[str, Any]], None] | None" = None) -> tuple[dict[str, float], int]:
    obs, infos = env.reset(seed=seed)
    returns = {a: 0.0 for a in env.possible_agents}
    length = 0
    while env.agents:
        # Batch agents that share a module: one forward pass per module and step.
        actions: dict[str, Any] = {}
        groups: dict[int, list[str]] = {}
        for agent in env.agents:
            actor = controller.actor_for(agent)
            if actor is None:
                actions[agent] = legal_random(rng, env.action_space(agent), obs[agent], infos.get(agent))
            else:
                groups.setdefault(id(actor), []).append(agent)
        for agents in groups.values():
            actor = controller.actor_for(agents[0])
            for agent, action in zip(agents, actor.compute_actions([obs[a] for a in agents])):
                actions[agent] = action
        if on_actions is not None:
            on_actions(dict(actions))
        obs, rewards, _, _, infos = env.step(actions)
        for a, r in rewards.items():
            returns[a] += float(r)
        length += 1
        if frames is not None:
            frames.append(env.render, length, returns)
        if max_steps and length >= max_steps:
            break
    return returns, length


class FrameSink:
    """Where rendered frames go: the episode's video and/or a FastLane stream."""

    def __init__(self, video: list | None, lane: Any, episode: int) -> None:
        self.video, self.lane, self.episode = video, lane, episode

    def append(self, render: Any, step: int, returns: dict[str, float]) -> None:
        if self.video is not None:
            self.video.append(render())
            if self.lane is not None:
                frame = self.video[-1]
                self.lane.offer(lambda: frame, self.episode, step, {"returns": dict(returns)})
        elif self.lane is not None:
            self.lane.offer(render, self.episode, step, lambda: {"returns": dict(returns)})


def write_gif(frames: list[np.ndarray], path: Path, fps: int = 15) -> Path:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    images = [Image.fromarray(np.asarray(f, dtype=np.uint8)) for f in frames if f is not None]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return path


def record_in_manifest(run: Path, folder: Path, results: EvaluationResults) -> None:
    from mosaic.runs import ManifestFields, RunDir

    run_dir = RunDir(run)
    entry = {"path": str(folder.relative_to(run)), "checkpoint": results.checkpoint,
             "num_episodes": len(results.episodes), "opponent": results.opponent, "outcomes": results.outcomes,
             "videos": [str(Path(v).relative_to(run)) for v in results.videos]}
    run_dir.update_manifest(**ManifestFields.appended(run_dir.read_manifest(), "evaluations", entry))


def play_episodes(env: Any, seatings: Sequence[Controller], num_episodes: int, seed: int = 0,
                  max_steps: int | None = None, video_episodes: int = 0,
                  lane: Any = None, on_actions: "Callable[[int, dict[str, Any]], None] | None" = None,
                  ) -> tuple[list[EpisodeMetrics], list[list[np.ndarray]]]:
    """Play ``num_episodes`` (episode i seeded ``seed + i``, seated by ``seatings[i % n]``).

    Returns the episodes and the frames of the first ``video_episodes``. The
    env is not closed here. ``on_actions(episode, actions)``, when given, sees every
    env step's actions before the step: ``{agent: action}`` of the one agent that
    moves in an AEC env (agents already done, stepped with None, are left out), of
    every live agent in a parallel env.
    """
    import time

    from mosaic.workerkit import startup

    startup.resume()  # the policy and the env are built: the process is set up
    rng = np.random.default_rng(seed)
    is_aec = hasattr(env, "agent_iter")
    episodes: list[EpisodeMetrics] = []
    videos: list[list[np.ndarray]] = []
    progress = episode_progress(num_episodes)
    for i in range(num_episodes):
        record = i < video_episodes
        frames: list[np.ndarray] = []
        start = time.perf_counter()
        sink = FrameSink(frames if record else None, lane, i)
        seating = seatings[i % len(seatings)]
        players = {a: player_name(seating.actor_for(a)) for a in env.possible_agents}
        returns, length = (play_aec if is_aec else play_parallel)(
            env, seating, rng, seed + i, max_steps, sink if (record or lane is not None) else None,
            None if on_actions is None else (lambda actions, i=i: on_actions(i, actions)))
        episodes.append(EpisodeMetrics(i, seed + i, returns, length, time.perf_counter() - start,
                                       players, winner(returns)))
        if record:
            videos.append(frames)
        if progress is not None:
            progress.advance()
    if progress is not None:
        progress.close()
    return episodes, videos


def play_requested(env: Any, seatings: Sequence[Controller], request: Any,
                   checkpoint: Path) -> tuple[list[EpisodeMetrics], list[list[np.ndarray]]]:
    """The episodes an ``--evaluate`` request (:class:`mosaic.workerkit.program.EvaluateRequest`) asks for, played
    on ``env`` by :func:`play_episodes`: its number of episodes, first seed and videos, and with ``--fastlane`` the
    frames streamed as ``checkpoint``'s run's ``eval`` stream (:func:`eval_lane`). ``env`` is closed after."""
    lane = eval_lane(checkpoint) if request.fastlane else None
    try:
        return play_episodes(env, seatings, request.episodes, seed=request.seed, video_episodes=request.video,
                             lane=lane)
    finally:
        env.close()
        if lane is not None:
            lane.close()


def play_single_agent(play: Callable[[int, "FrameSink | None"], tuple[float, int]], num_episodes: int,
                      seed: int = 0, agent: str = SINGLE_AGENT, module: str = "policy", video_episodes: int = 0,
                      lane: Any = None) -> tuple[list[EpisodeMetrics], list[list[np.ndarray]]]:
    """Play ``num_episodes`` of a single-agent env, episode i seeded ``seed + i``.

    ``play(seed, frames)`` plays one episode with the worker's policy and returns its
    return and length, rendering each step into ``frames`` when it is not None (the
    first ``video_episodes`` episodes, and every episode while ``lane`` streams).
    Returns the episodes (``agent`` played by ``module``) and the recorded videos.
    """
    import time

    from mosaic.workerkit import startup

    startup.resume()  # the policy and the env are built: the process is set up
    episodes: list[EpisodeMetrics] = []
    videos: list[list[np.ndarray]] = []
    progress = episode_progress(num_episodes)
    for i in range(num_episodes):
        video: list | None = [] if i < video_episodes else None
        sink = FrameSink(video, lane, i) if video is not None or lane is not None else None
        start = time.perf_counter()
        total, length = play(seed + i, sink)
        episodes.append(EpisodeMetrics(i, seed + i, {agent: total}, length, time.perf_counter() - start,
                                       {agent: module}))
        if video is not None:
            videos.append(video)
        if progress is not None:
            progress.advance()
    if progress is not None:
        progress.close()
    return episodes, videos


def print_results(results: EvaluationResults, as_json: bool) -> None:
    """What ``mosaic eval`` prints: the results as JSON (with ``saved_to``), or the table, where they were saved
    and each GIF recorded."""
    import json

    if as_json:
        print(json.dumps({**results.to_dict(), "saved_to": results.output_dir}, indent=2))
        return
    print(results.table() + f"\nsaved to {results.output_dir}"
          + "".join(f"\nvideo: {path}" for path in results.videos))


def save_results(results: EvaluationResults, checkpoint: Path, output_dir: str | Path | None,
                 videos: Sequence[Sequence[np.ndarray]] = ()) -> Path:
    """Write results and videos (default: ``<run>/eval/<timestamp>/``) and list them in the run's manifest."""
    import time

    from mosaic.errors import UserError

    folder = Path(output_dir) if output_dir else None
    run = run_folder_of(checkpoint)
    if folder is None:
        if run is None:
            raise UserError("output_dir: the checkpoint is not inside a run folder; give an output_dir")
        folder = run / "eval" / time.strftime("%Y%m%d-%H%M%S")
    for n, frames in enumerate(videos):
        if frames:
            results.videos.append(str(write_gif(list(frames), folder / "videos" / f"episode_{n:03d}.gif")))
    results.save(folder)
    if run is not None and folder.resolve().is_relative_to(run.resolve()):
        record_in_manifest(run, folder, results)
    return folder
