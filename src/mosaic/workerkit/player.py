"""Players: a policy served to a match running in another process, over JSON lines on stdin/stdout.

A match (the arena, ``mosaic eval --opponent``, the LLM worker's mixed games) runs the env in a neutral
process and asks each seat's player for actions. A player runs in its own worker's environment (its
library, its checkpoint) and nothing but JSON crosses between them:

* the player starts and writes one hello line::

      {"type": "hello", "protocol": 1, "label": "...", "worker": "...", "agents": [...],
       "environment": {"family": ..., "env_id": ..., "env_kwargs": {...}}, "needs": [...]}

  ``agents`` are the agents it can act for (empty: any); ``environment`` is what it was trained on (empty:
  any env), so that a match on another env is refused before it starts, naming the difference; ``needs``
  (absent: nothing) lists what the match must tell it: ``environment``, the env the match plays;
* then it answers requests, one line each::

      {"op": "environment", "environment": ENV}            -> {"type": "ok"}
      {"op": "reset", "seed": 7}                          -> {"type": "ok"}
      {"op": "act", "agent": "player_0", "observation": OBS} -> {"type": "action", "action": ACTION}
      {"op": "close"}                                     -> {"type": "ok"}, and it exits

  ``environment`` is sent only to a player whose hello ``needs`` it, before its first ``reset`` on that env
  (again only when a later match plays another): ``ENV`` is ``{"family", "env_id", "env_kwargs",
  "api_type"}``, what the match built. A player trained on an env knows it already; the built-in random
  player needs it, to draw from an agent's action space where the env masks no moves (MPE);

  ``OBS`` is the env's own observation for that agent, raw (for PettingZoo's classic games the
  ``{"observation", "action_mask"}`` dict): a player that was trained on another encoding (one-hot,
  flattened, preprocessed images) applies it itself, with the same code it was trained with;
* anything wrong is answered ``{"type": "error", "message": "..."}`` (the match ends naming the player).

Numbers and nested lists travel as JSON; a numpy array as ``{"__ndarray__": BASE64, "dtype": ..., "shape":
[...]}`` (exact, and an order of magnitude smaller than a list of floats), see :func:`to_wire`.

This module is both sides: :func:`serve` runs a :class:`Player` (a worker's ``--player TARGET`` calls it), and
:class:`PlayerProcess` starts one and plays it as a :class:`mosaic.workerkit.evaluation.Controller`.
``python -m mosaic.workerkit.player random`` serves random legal play (:class:`RandomPlayer`); ``... scripted
MODULE:FUNCTION`` serves a function ``(agent, observation) -> action`` (a scripted heuristic).
"""

from __future__ import annotations

import base64
import importlib
import json
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from typing import IO, Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from mosaic.errors import UserError

PROTOCOL = 1
HELLO_TIMEOUT_S = 300.0


# -- the wire --------------------------------------------------------------------------------------------
def to_wire(value: Any) -> Any:
    """``value`` as JSON-able data: arrays exact (base64 of their bytes), numpy scalars as numbers."""
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return {"__ndarray__": base64.b64encode(data.tobytes()).decode("ascii"), "dtype": data.dtype.str,
                "shape": list(data.shape)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): to_wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    return value


def from_wire(value: Any) -> Any:
    """The inverse of :func:`to_wire`."""
    if isinstance(value, dict):
        if "__ndarray__" in value:
            raw = base64.b64decode(value["__ndarray__"])
            return np.frombuffer(raw, dtype=np.dtype(value["dtype"])).reshape(value["shape"]).copy()
        return {k: from_wire(v) for k, v in value.items()}
    if isinstance(value, list):
        return [from_wire(v) for v in value]
    return value


# -- the player side -------------------------------------------------------------------------------------
class Player(Protocol):
    """What a worker serves: ``act`` gets the env's raw observation of ``agent`` and returns its action.

    A player that needs the env the match plays lists ``"environment"`` in a ``needs`` attribute and is given
    it by ``on_environment(environment)`` (``{"family", "env_id", "env_kwargs", "api_type"}``) before the
    first ``reset`` on it."""

    label: str
    agents: Sequence[str]
    environment: Mapping[str, Any]

    def reset(self, seed: int) -> None: ...

    def act(self, agent: str, observation: Any) -> Any: ...


def action_mask(observation: Any) -> Any:
    """The observation's ``action_mask`` (PettingZoo's classic games), or None."""
    return observation.get("action_mask") if isinstance(observation, Mapping) else None


def legal_random_action(rng: np.random.Generator, observation: Any, action_space: Any = None) -> Any:
    """A uniform choice among the moves the observation's action mask allows; without a mask, a draw from
    ``action_space`` seeded from ``rng`` (as :func:`mosaic.workerkit.evaluation.legal_random` draws: the same
    ``rng`` and space give the same action)."""
    mask = action_mask(observation)
    if mask is not None:
        return int(rng.choice(np.flatnonzero(np.asarray(mask))))
    if action_space is None:
        raise UserError("random player: the observation carries no action_mask and no action space was given")
    action_space.seed(int(rng.integers(2**31)))
    return action_space.sample()


def player_options(options: Mapping[str, Any] | None, allowed: Sequence[str], worker: str) -> dict[str, Any]:
    """A worker's ``--player-options``: only the options it ``allowed``, or a :class:`UserError` naming the unknown
    ones and the allowed."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise UserError(f"--player-options: {', '.join(map(repr, unknown))} not known to the {worker} worker's "
                        f"player; allowed: {', '.join(allowed)}")
    return options


def deterministic_option(options: Mapping[str, Any]) -> bool:
    """The ``deterministic`` player option: default true (the greedy actions ``mosaic eval`` plays); anything but a
    boolean is a :class:`UserError`."""
    deterministic = options.get("deterministic", True)
    if not isinstance(deterministic, bool):
        raise UserError(f"--player-options: deterministic: {deterministic!r} is not a boolean; allowed: true, false")
    return deterministic


@dataclass
class RandomPlayer:
    """Random legal play, seeded by each reset: a uniform choice among the moves the observation's action mask
    allows (the classic games), else a draw from the agent's action space (MPE, which masks none). Its hello
    ``needs`` the match's ``environment``: the first observation without a mask builds that env raw in this
    process (:func:`mosaic.workerkit.envs.make_env`, once per env) for its agents' action spaces. Either way a
    move is what ``mosaic eval --opponent random`` draws in the match's own process
    (:func:`mosaic.workerkit.evaluation.legal_random`) from a generator seeded alike."""

    label: str = "random"
    agents: Sequence[str] = ()
    environment: Mapping[str, Any] = field(default_factory=dict)
    needs: Sequence[str] = ("environment",)
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    #: the env the match plays, as it told it (None: not told)
    played: dict[str, Any] | None = None
    spaces: dict[str, Any] = field(default_factory=dict)

    def on_environment(self, environment: Mapping[str, Any]) -> None:
        if dict(environment) != self.played:
            self.played, self.spaces = dict(environment), {}

    def reset(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)

    def action_space(self, agent: str) -> Any:
        """``agent``'s action space in the env the match plays (built on the first call)."""
        if not self.spaces:
            if self.played is None:
                raise UserError(f"random player: the observation of {agent} carries no action_mask and the match "
                                "named no environment to draw from (the match sends it when the hello needs it)")
            from mosaic.workerkit.envs import load_env_module, make_env, supported_api_types

            family, env_id = str(self.played.get("family")), str(self.played.get("env_id"))
            api = self.played.get("api_type") or supported_api_types(load_env_module(family, env_id))[0]
            env = make_env(family, env_id, str(api), dict(self.played.get("env_kwargs") or {}), None)
            try:
                self.spaces = {a: env.action_space(a) for a in env.possible_agents}
            finally:
                env.close()
        if agent not in self.spaces:
            raise UserError(f"random player: {self.played.get('env_id')} has no agent {agent!r}; its agents: "
                            f"{', '.join(self.spaces)}")
        return self.spaces[agent]

    def act(self, agent: str, observation: Any) -> Any:
        if action_mask(observation) is not None:
            return legal_random_action(self.rng, observation)
        return legal_random_action(self.rng, observation, self.action_space(agent))


@dataclass
class ScriptedPlayer:
    """A function ``(agent, observation) -> action`` as a player (a heuristic written by hand)."""

    function: Callable[[str, Any], Any]
    label: str = "scripted"
    agents: Sequence[str] = ()
    environment: Mapping[str, Any] = field(default_factory=dict)

    def reset(self, seed: int) -> None:
        reset = getattr(self.function, "reset", None)
        if callable(reset):
            reset(seed)

    def act(self, agent: str, observation: Any) -> Any:
        return self.function(agent, observation)


def scripted(target: str) -> ScriptedPlayer:
    """``MODULE:FUNCTION`` as a :class:`ScriptedPlayer`."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UserError(f"player: {target!r} is not MODULE:FUNCTION")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UserError(f"player: cannot import {module_name!r} ({exc})") from None
    function = getattr(module, attr, None)
    if not callable(function):
        raise UserError(f"player: 'scripted:{target}' names no function; allowed: scripted:MODULE:FUNCTION with "
                        "FUNCTION defined in MODULE")
    return ScriptedPlayer(function, label=f"scripted:{target}")


def serve(player: Player, worker: str, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    """Answer requests until ``close`` or the end of stdin; returns the exit code."""
    stdin = stdin or sys.stdin
    stdout = stdout or sys.stdout

    def say(message: Mapping[str, Any]) -> None:
        stdout.write(json.dumps(message) + "\n")
        stdout.flush()

    hello = {"type": "hello", "protocol": PROTOCOL, "label": player.label, "worker": worker,
             "agents": list(player.agents), "environment": dict(player.environment)}
    needs = list(getattr(player, "needs", ()))
    if needs:
        hello["needs"] = needs
    say(hello)
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "act":
                action = player.act(str(request["agent"]), from_wire(request.get("observation")))
                say({"type": "action", "action": to_wire(action)})
            elif op == "reset":
                player.reset(int(request.get("seed", 0)))
                say({"type": "ok"})
            elif op == "environment":
                environment = request.get("environment")
                if not isinstance(environment, Mapping) or not environment.get("family") or \
                        not environment.get("env_id"):
                    raise UserError(f"environment: {environment!r} is not an env; allowed: {{family, env_id, "
                                    "env_kwargs, api_type}")
                told = getattr(player, "on_environment", None)
                if told is not None:
                    told(dict(environment))
                say({"type": "ok"})
            elif op == "close":
                say({"type": "ok"})
                return 0
            else:
                say({"type": "error", "message": f"unknown op {op!r}; allowed: act, reset, environment, close"})
        except Exception as exc:  # every failure is an answer: the match names the player and stops
            say({"type": "error", "message": f"{type(exc).__name__}: {exc}"})
    return 0


# -- the match side --------------------------------------------------------------------------------------
class PlayerError(UserError):
    """A player refused, broke the protocol or died; the message names it."""


@dataclass
class _RemoteActor:
    process: "PlayerProcess"
    agent: str

    @property
    def module_id(self) -> str:
        return self.process.label

    def compute_action(self, obs: Any) -> Any:
        return self.process.act(self.agent, obs)

    def compute_actions(self, observations: Sequence[Any]) -> list[Any]:
        return [self.compute_action(o) for o in observations]


class PlayerProcess:
    """A player started as a process (``command``), played as a ``Controller`` of
    :mod:`mosaic.workerkit.evaluation` for the agents it is seated at."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str] | None = None,
                 timeout_s: float = HELLO_TIMEOUT_S, label: str | None = None) -> None:
        self.command = list(command)
        self.proc = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=dict(env) if env else None,
                                     bufsize=1, start_new_session=True)
        self._stderr: list[str] = []
        threading.Thread(target=self._drain, daemon=True).start()
        self.seats: set[str] = set()
        try:
            hello = self._read(timeout_s)
        except PlayerError:
            self.close()
            raise
        if hello.get("type") != "hello" or hello.get("protocol") != PROTOCOL:
            self.close()
            raise PlayerError(f"player {' '.join(self.command[-2:])}: expected a protocol {PROTOCOL} hello, "
                              f"got {hello}")
        self.hello = hello
        self.label = label or str(hello.get("label") or "player")
        self.agents: list[str] = list(hello.get("agents") or [])
        self.environment: dict[str, Any] = dict(hello.get("environment") or {})
        #: what the hello says the match must tell the player (``environment``: :meth:`tell_environment`)
        self.needs: list[str] = list(hello.get("needs") or [])
        self._told: dict[str, Any] | None = None

    def _drain(self) -> None:
        for line in self.proc.stderr:  # keep the last lines for errors; never let the pipe fill
            self._stderr = (self._stderr + [line.rstrip()])[-20:]

    def _read(self, timeout_s: float | None = None) -> dict[str, Any]:
        result: list[str] = []
        reader = threading.Thread(target=lambda: result.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if reader.is_alive():
            raise PlayerError(f"player {self.command[-1]!r} did not answer within {timeout_s:g} s")
        line = result[0] if result else ""
        if not line:
            self.proc.wait(5)
            tail = " | ".join(self._stderr[-3:])
            raise PlayerError(f"player {self.command[-1]!r} exited ({self.proc.returncode}): {tail}")
        try:
            return json.loads(line)
        except ValueError:
            raise PlayerError(f"player {self.command[-1]!r} wrote a line that is not JSON: {line[:200]!r}") from None

    def request(self, message: Mapping[str, Any], timeout_s: float | None = 60.0) -> dict[str, Any]:
        if self.proc.poll() is not None:
            raise PlayerError(f"player {self.label!r} has exited ({self.proc.returncode})")
        self.proc.stdin.write(json.dumps(message) + "\n")
        self.proc.stdin.flush()
        answer = self._read(timeout_s)
        if answer.get("type") == "error":
            raise PlayerError(f"player {self.label!r}: {answer.get('message')}")
        return answer

    def check_environment(self, family: str, env_id: str, env_kwargs: Mapping[str, Any] | None = None) -> None:
        """Refuse a match on an env other than the one the player was trained on, naming the difference."""
        trained = self.environment
        if not trained:
            return
        for key, mine in (("family", family), ("env_id", env_id)):
            if trained.get(key) and trained.get(key) != mine:
                raise PlayerError(f"player {self.label!r} was trained on {trained.get('family')}/"
                                  f"{trained.get('env_id')}, not {family}/{env_id}")
        theirs = dict(trained.get("env_kwargs") or {})
        ours = dict(env_kwargs or {})
        differ = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
        if differ:
            raise PlayerError(f"player {self.label!r} was trained with env_kwargs {theirs}, the match has {ours} "
                              f"(they differ in {', '.join(differ)})")

    def tell_environment(self, environment: Mapping[str, Any]) -> None:
        """Send the env the match plays (``{family, env_id, env_kwargs, api_type}``) to a player whose hello
        ``needs`` it, once per env; any other player is sent nothing."""
        if "environment" not in self.needs:
            return
        told = json.loads(json.dumps(to_wire(dict(environment))))
        if told != self._told:
            self.request({"op": "environment", "environment": told})
            self._told = told

    def seat(self, agents: Sequence[str]) -> "PlayerProcess":
        unknown = [a for a in agents if self.agents and a not in self.agents]
        if unknown:
            raise PlayerError(f"player {self.label!r} cannot act for {', '.join(unknown)}; it plays "
                              f"{', '.join(self.agents)}")
        self.seats.update(agents)
        return self

    def actor_for(self, agent: str) -> _RemoteActor | None:
        return _RemoteActor(self, agent) if agent in self.seats else None

    def reset(self, seed: int) -> None:
        self.request({"op": "reset", "seed": int(seed)})

    def act(self, agent: str, observation: Any) -> Any:
        return from_wire(self.request({"op": "act", "agent": agent, "observation": to_wire(observation)})["action"])

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "close"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(10)
            except (OSError, subprocess.TimeoutExpired, ValueError):
                self.proc.kill()
                self.proc.wait(10)
        for pipe in (self.proc.stdin, self.proc.stdout):  # stderr is the drain thread's to finish
            try:
                pipe.close()
            except OSError:
                pass

    def __enter__(self) -> "PlayerProcess":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m mosaic.workerkit.player random|scripted MODULE:FUNCTION``: the built-in players."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["random"]:
            return serve(RandomPlayer(), "mosaic")
        if args[:1] == ["scripted"] and len(args) == 2:
            return serve(scripted(args[1]), "mosaic")
        raise UserError("player: expected `random` or `scripted MODULE:FUNCTION`")
    except UserError as exc:
        print(f"mosaic: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
