"""Envs as text: what each agent sees, which actions it may name, and the game's rules.

A :class:`Describer` turns the env's state into the text one agent is shown and
gives its actions names a model can say (``b2`` in tic-tac-toe, ``4`` in connect
four, ``up`` in MPE). It reads the env beneath any wrapper (``env.unwrapped``), so
the same text comes whether the env was built plainly or by the Ray worker's factory
for a policy player (whose observations are encoded for its network).

Covered, and why the rest is not:

- classic ``tictactoe_v3``, ``connect_four_v3`` and ``rps_v2``: the board (or the
  opponent's last throw) and the legal moves;
- every MPE env whose agents all move with MPE's five discrete actions: positions
  and velocities as numbers, with what the agent is told of its goal. MPE envs
  whose agents also speak (``simple_reference``, ``simple_speaker_listener``,
  ``simple_crypto``, ``simple_world_comm``) are refused: their actions carry
  communication symbols that need a describer of their own;
- the other classic games (chess, go, poker, gin rummy, hanabi) are refused: their
  action sets (up to 4,672 moves) need move notations of their own.

:func:`describer_for` returns the describer or raises :class:`Unsupported` with
the reason, and :func:`coverage` says it for every id the installed packages have.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

ANSWER = "End your reply with one line 'ACTION: <action>', <action> being one of the legal actions."


class Unsupported(Exception):
    """This env has no text describer; the message says why."""


@dataclass
class View:
    """What the runtime knows beyond the env: the step, and each agent's return so far."""

    step: int
    returns: dict[str, float]


class Describer:
    """One env as text. Subclasses fill the three methods and ``rules``."""

    env_id = ""

    def __init__(self, env: Any) -> None:
        self.agents: list[str] = list(env.possible_agents)

    def rules(self, agent: str) -> str:
        raise NotImplementedError

    def action_names(self, agent: str) -> list[str]:
        """Every action of ``agent``'s space by index, as the model names it."""
        raise NotImplementedError

    def legal(self, env: Any, agent: str) -> list[int]:
        return list(range(len(self.action_names(agent))))

    def view(self, env: Any, agent: str, view: View) -> str:
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------
    def legal_names(self, env: Any, agent: str) -> list[str]:
        names = self.action_names(agent)
        return [names[i] for i in self.legal(env, agent)]

    def index(self, agent: str, name: str) -> int:
        return self.action_names(agent).index(name)

    def system_prompt(self, agent: str) -> str:
        return f"{self.rules(agent)}\nYou are {agent}. {ANSWER}"


def _mask(env: Any, agent: str) -> list[int]:
    observed = env.unwrapped.observe(agent)
    return [int(i) for i in np.flatnonzero(observed["action_mask"])]


# -- classic games -----------------------------------------------------------------------------
class TicTacToe(Describer):
    """``tictactoe_v3``: squares are stored column by column (square 3 is the top of the middle column)."""

    env_id = "tictactoe_v3"
    COLUMNS = "abc"
    MARKS = {0: ".", 1: "X", 2: "O"}

    def mark(self, agent: str) -> str:
        return self.MARKS[self.agents.index(agent) + 1]

    def rules(self, agent: str) -> str:
        return ("You play tic-tac-toe on a 3x3 board. Squares are named by column a, b, c (left to right) and row "
                "1, 2, 3 (top to bottom), e.g. b2 is the centre. Players take turns marking an empty square; "
                f"three marks in a row, column or diagonal win. You play {self.mark(agent)}.")

    def action_names(self, agent: str) -> list[str]:
        return [f"{self.COLUMNS[i // 3]}{i % 3 + 1}" for i in range(9)]

    def legal(self, env: Any, agent: str) -> list[int]:
        return _mask(env, agent)

    def view(self, env: Any, agent: str, view: View) -> str:
        squares = env.unwrapped.board.squares
        rows = ["   a b c"] + [f"{r + 1}  " + " ".join(self.MARKS[squares[c * 3 + r]] for c in range(3))
                                 for r in range(3)]
        return (f"Board ('.' is empty), you are {self.mark(agent)}:\n" + "\n".join(rows)
                + f"\nLegal moves: {', '.join(self.legal_names(env, agent))}")


class ConnectFour(Describer):
    """``connect_four_v3``: a 6x7 board stored row by row from the top; an action is a column."""

    env_id = "connect_four_v3"
    MARKS = {0: ".", 1: "X", 2: "O"}

    def mark(self, agent: str) -> str:
        return self.MARKS[self.agents.index(agent) + 1]

    def rules(self, agent: str) -> str:
        return ("You play connect four on a board of 6 rows and 7 columns, numbered 1 to 7 from the left. A move "
                "drops your disc into a column; it falls to the lowest empty cell. Four of your discs in a row, "
                f"column or diagonal win. You play {self.mark(agent)}.")

    def action_names(self, agent: str) -> list[str]:
        return [str(c + 1) for c in range(7)]

    def legal(self, env: Any, agent: str) -> list[int]:
        return _mask(env, agent)

    def view(self, env: Any, agent: str, view: View) -> str:
        board = env.unwrapped.board
        rows = [" ".join(str(c + 1) for c in range(7))]
        rows += [" ".join(self.MARKS[board[r * 7 + c]] for c in range(7)) for r in range(6)]
        return (f"Board, top row first ('.' is empty), you are {self.mark(agent)}:\n" + "\n".join(rows)
                + f"\nLegal columns: {', '.join(self.legal_names(env, agent))}")


class RockPaperScissors(Describer):
    """``rps_v2``: both throw at once; each sees the other's previous throw."""

    env_id = "rps_v2"
    THROWS = ("rock", "paper", "scissors", "lizard", "spock")

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self.n = int(env.action_space(self.agents[0]).n)

    def rules(self, agent: str) -> str:
        game = "rock-paper-scissors" if self.n == 3 else "rock-paper-scissors-lizard-spock"
        return (f"You play repeated rounds of {game} against one opponent; both throw at the same time. "
                "A win scores +1, a loss -1, a tie 0.")

    def action_names(self, agent: str) -> list[str]:
        return list(self.THROWS[:self.n])

    def view(self, env: Any, agent: str, view: View) -> str:
        last = int(np.asarray(env.unwrapped.observe(agent)))
        said = "nothing yet" if last >= self.n else self.THROWS[last]
        return (f"Round {view.step // 2 + 1}. Your opponent's previous throw: {said}. Your score so far: "
                f"{view.returns.get(agent, 0.0):+g}.\nLegal throws: {', '.join(self.action_names(agent))}")


# -- MPE ---------------------------------------------------------------------------------------
MPE_MOVES = ("stay", "left", "right", "down", "up")  # MPE's discrete action order: no-op, -x, +x, -y, +y

#: What each agent is told of the task, by env and by whether it is an adversary.
MPE_GOALS: dict[str, Callable[[bool], str]] = {
    "simple_v3": lambda adv: "Move onto the landmark.",
    "simple_spread_v3": lambda adv: ("Your team must cover every landmark, one agent on each; the team is "
                                     "rewarded for how close the landmarks' nearest agents are, and penalised "
                                     "for collisions."),
    "simple_adversary_v3": lambda adv: (
        "You are the adversary: find out which landmark is the target (you are not told) and get close to it."
        if adv else "Your team is rewarded when one of you is close to the target landmark and the adversary "
                    "is far from it: cover the target and mislead the adversary."),
    "simple_push_v3": lambda adv: (
        "You are the adversary: keep the other agent away from its target landmark (you are not told which "
        "it is) by pushing it." if adv else "Reach your target landmark; an adversary tries to push you away."),
    "simple_tag_v3": lambda adv: (
        "You are a (slower) adversary: catch the good agents by touching them; obstacles block the way."
        if adv else "You are a (faster) good agent: avoid being touched by the adversaries and stay in the "
                    "area; obstacles block the way."),
    "simple_formation_v1": lambda adv: "Your team must spread evenly on a circle around the landmark.",
    "simple_line_v1": lambda adv: "Your team must spread evenly along a line between the two landmarks.",
    "collect_treasure_v1": lambda adv: ("Collectors pick up treasures by touching them and deliver them to the "
                                        "bank (deposit) of the treasure's colour; the team is rewarded for "
                                        "deliveries and penalised for collisions."),
}


def _xy(p: Sequence[float]) -> str:
    return f"({p[0]:+.2f}, {p[1]:+.2f})"


class MPE(Describer):
    """Any MPE env whose agents all move with the five discrete actions."""

    def __init__(self, env: Any, env_id: str) -> None:
        super().__init__(env)
        self.env_id = env_id
        self.goal = MPE_GOALS.get(env_id, lambda adv: "Maximise your reward.")

    @staticmethod
    def _world(env: Any) -> Any:
        return env.unwrapped.world

    def _agent(self, env: Any, name: str) -> Any:
        return next(a for a in self._world(env).agents if a.name == name)

    def rules(self, agent: str) -> str:
        return ("You control one agent in a 2-D world (x to the right, y up; the area is about -1 to +1 on each "
                "axis). Each turn you choose a move: stay, left, right, down or up; moves accelerate you, so "
                "velocity carries over. " + self.goal(bool(getattr(self._agents.get(agent), "adversary", False))))

    def bind(self, env: Any) -> "MPE":
        self._agents = {a.name: a for a in self._world(env).agents}
        return self

    def action_names(self, agent: str) -> list[str]:
        return list(MPE_MOVES)

    def view(self, env: Any, agent: str, view: View) -> str:
        world = self._world(env)
        me = self._agent(env, agent)
        pos = me.state.p_pos
        lines = [f"Step {view.step}. You are at {_xy(pos)}, moving at {_xy(me.state.p_vel)}."]
        goal = getattr(me, "goal_a", None) if not getattr(me, "adversary", True) else None
        for landmark in world.landmarks:
            offset = landmark.state.p_pos - pos
            tag = " (your target)" if goal is landmark else ""
            lines.append(f"- {landmark.name}{tag} at {_xy(landmark.state.p_pos)}, offset {_xy(offset)}")
        for other in world.agents:
            if other is me:
                continue
            role = " (adversary)" if getattr(other, "adversary", False) else ""
            lines.append(f"- {other.name}{role} at {_xy(other.state.p_pos)}, offset {_xy(other.state.p_pos - pos)}")
        lines.append(f"Your reward so far: {view.returns.get(agent, 0.0):+.2f}. Moves: {', '.join(MPE_MOVES)}")
        return "\n".join(lines)


CLASSIC: dict[str, type[Describer]] = {cls.env_id: cls for cls in (TicTacToe, ConnectFour, RockPaperScissors)}
COMMUNICATING_MPE = "its agents' actions include communication symbols, which need a describer of their own"


def describer_for(family: str, env_id: str, env: Any) -> Describer:
    """The env's describer, or :class:`Unsupported` saying why there is none."""
    if family == "classic":
        if env_id not in CLASSIC:
            raise Unsupported(f"{env_id} has no text describer (its moves need a notation of their own); "
                              f"classic games with one: {', '.join(sorted(CLASSIC))}")
        return CLASSIC[env_id](env)
    if family == "mpe":
        odd = {a: env.action_space(a) for a in env.possible_agents
               if getattr(env.action_space(a), "n", None) != len(MPE_MOVES)}
        if odd:
            agent, space = next(iter(odd.items()))
            raise Unsupported(f"{env_id}: agent {agent} acts in {space}, not MPE's five moves ({COMMUNICATING_MPE}, "
                              "or continuous actions were asked for)")
        return MPE(env, env_id).bind(env)
    raise Unsupported(f"the {family} family has no text describer; families with one: classic, mpe")


def api_type(family: str) -> str:
    from llm_worker.config import API_TYPE_OF_FAMILY

    return API_TYPE_OF_FAMILY.get(family, "AEC")


def coverage(family: str) -> dict[str, str | None]:
    """Every installed id of ``family`` -> None when it can be played, else why not."""
    from mosaic.workerkit.envs import available_env_ids, make_env

    out: dict[str, str | None] = {}
    for env_id in available_env_ids(family):
        env = make_env(family, env_id, api_type(family))
        try:
            env.reset(seed=0)
            describer_for(family, env_id, env)
            out[env_id] = None
        except Unsupported as exc:
            out[env_id] = str(exc)
        finally:
            env.close()
    return out
