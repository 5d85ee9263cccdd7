"""``mosaic eval RUN --opponent X`` for any worker: the run and its opponent meet as players in a match.

A worker's own ``--evaluate`` plays its run's policies; an opponent from another library (or a language
model, or a scripted heuristic) cannot be loaded there, since no worker imports another. So the core plays
it: both sides are served as players (:mod:`mosaic.workerkit.player`, each in its own worker's
environment; ``random`` in MOSAIC's own process, :class:`RandomSeats`), the env is built raw in MOSAIC's
process on what the run was trained on, and the episodes go through the same
:func:`mosaic.workerkit.evaluation.play_episodes` (videos and FastLane included) and into the same results as
every evaluation: the run's ``eval/<time>/`` folder and its manifest. On a terminal, a line shows the episodes
played, their rate and the time left (mosaic.workerkit.progress_line).

Seats: in a two-player game the run and the opponent swap seats every episode (episode ``i`` seeded
``seed + i``); in a game of more agents ``seats`` names the agents the run plays and the opponent plays the
rest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from mosaic.errors import UserError
from mosaic.host.match import Seating
from mosaic.workerkit.player import PlayerProcess
from mosaic.workerkit.progress_line import ProgressLine


class RandomSeats:
    """``--opponent random``, played in the match's own process (no process to start): every agent it sits at
    has no actor, so :func:`mosaic.workerkit.evaluation.play_episodes` draws its move from the env's action space
    (a legal one where the env masks its moves) with the episode's seed. These are the draws MOSAIC's random
    player process (``python -m mosaic.workerkit.player random``, a tournament's ``random``) makes, reset with
    that seed: from the action mask where the observation carries one (the classic games), else from the agent's
    action space in the env the match tells it (MPE)."""

    label = "random"
    agents: list[str] = []
    environment: dict[str, Any] = {}

    def check_environment(self, *args: Any) -> None:
        return None

    def tell_environment(self, environment: Mapping[str, Any]) -> None:
        return None

    def seat(self, agents: Sequence[str]) -> "RandomSeats":
        return self

    def actor_for(self, agent: str) -> None:
        return None

    def reset(self, seed: int) -> None:
        return None

    def close(self) -> None:
        return None


def seatings(agents: Sequence[str], run: PlayerProcess, opponent: PlayerProcess,
             seats: Sequence[str] | None) -> list[Seating]:
    """Who plays which agent, per episode (alternating); refuses seats the env does not have."""
    if seats:
        unknown = [a for a in seats if a not in agents]
        if unknown or len(set(seats)) == len(agents):
            why = f"{', '.join(unknown)} not agents" if unknown else "the run would play every agent"
            raise UserError(f"--seats: {why}; allowed: a subset of {', '.join(agents)}")
        return [Seating({a: run if a in seats else opponent for a in agents})]
    if len(agents) != 2:
        raise UserError(f"--seats: {len(agents)} agents in this env; name the ones the run plays (allowed: "
                        f"{', '.join(agents)}), the opponent plays the rest")
    first, second = agents
    return [Seating({first: run, second: opponent}), Seating({first: opponent, second: run})]


def evaluate(target: Path, opponent: str, episodes: int, seed: int = 0, seats: Sequence[str] | None = None,
             video: int = 0, fastlane: bool = False, options: Mapping[str, Any] | None = None,
             opponent_options: Mapping[str, Any] | None = None, home: Path | str | None = None) -> Any:
    """Play ``episodes`` episodes of the run (or checkpoint) ``target`` against ``opponent`` (any player
    target of :func:`mosaic.host.match.player_command`); returns the saved
    :class:`mosaic.workerkit.evaluation.EvaluationResults`."""
    from mosaic.host.match import match_api_type, open_player
    from mosaic.workerkit.envs import make_env
    from mosaic.workerkit.evaluation import EvaluationResults, eval_lane, play_episodes, save_results

    if episodes < 1:
        raise UserError(f"--episodes: {episodes} is not a positive number of episodes")
    run = open_player(str(target), options, home)
    try:
        environment = dict(run.environment)
        if not environment.get("family") or not environment.get("env_id"):
            raise UserError(f"--opponent: {run.label!r} names no environment it was trained on, so there is no "
                            "game to play it in")
        other = RandomSeats() if opponent == "random" else open_player(opponent, opponent_options, home)
        try:
            if other.label == run.label:
                other.label = f"{other.label} (opponent)"
            family, env_id = str(environment["family"]), str(environment["env_id"])
            kwargs = dict(environment.get("env_kwargs") or {})
            api = match_api_type(environment, [run, other])
            for player in (run, other):
                player.check_environment(family, env_id, kwargs)
                player.tell_environment({"family": family, "env_id": env_id, "env_kwargs": kwargs, "api_type": api})
            env = make_env(family, env_id, api, kwargs, "rgb_array" if video or fastlane else None)
            lane = eval_lane(_as_checkpoint(target)) if fastlane else None
            try:
                seated = seatings(list(env.possible_agents), run, other, seats)
                played, frames = [], []
                with ProgressLine(f"eval {run.label} vs {other.label}", episodes, "episodes") as progress:
                    for i in range(episodes):  # every player reset with the episode's seed: a match repeats
                        for player in (run, other):
                            player.reset(seed + i)
                        got, clips = play_episodes(env, [seated[i % len(seated)]], 1, seed=seed + i,
                                                   video_episodes=1 if i < video else 0, lane=lane)
                        got[0].episode = i
                        played += got
                        frames += clips
                        progress.advance()
            finally:
                env.close()
                if lane is not None:
                    lane.close()
            results = EvaluationResults(played, {"family": family, "env_id": env_id, "env_kwargs": kwargs,
                                                 "opponent": opponent, "players": [run.label, other.label]},
                                        str(target), opponent=opponent)
            save_results(results, _as_checkpoint(target), None, frames)
            return results
        finally:
            other.close()
    finally:
        run.close()


def _as_checkpoint(target: Path) -> Path:
    """``target`` where the evaluation helpers expect a checkpoint: a run folder's results and FastLane
    stream belong to the run (``RUN/checkpoints/...`` is how they find it), a checkpoint's to its run."""
    from mosaic.runs import MANIFEST_FILE

    target = Path(target)
    if (target / MANIFEST_FILE).is_file():
        return target / "checkpoints" / "latest"
    return target
