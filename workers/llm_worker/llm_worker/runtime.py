"""The evaluation: episodes of a PettingZoo env whose agents are language models, random players or policies.

Each decision point (an agent's turn in a classic game, every step in MPE) goes:

1. ``message_round``: every model agent about to act writes a message; each then
   acts having read the others'.
2. ``theory_of_mind``: every model agent about to act first predicts each other
   agent's next action (one call); :class:`~llm_worker.coordination.MindReading`
   scores the prediction when its target next acts.
3. The action: one call per model agent (``independent``, ``message_round``), or
   one per team (``central_planner``). A reply naming no legal action is asked
   again, then replaced by a seeded random legal action and counted invalid.
   Random players take a uniformly random legal action; policy players act from
   their Ray checkpoint's module on the observation their network was trained on.

What the run folder gets:

- ``transcripts/episodes.jsonl``: one line per call and per move (episode, step,
  agent, kind: ``message``, ``prediction``, ``action``, ``plan`` or ``move``; the
  prompt, every reply, the calls' tokens and latency, what was played), written as
  the run goes: reset with the episode's seed and replay the ``move`` lines to see
  the game again;
- ``results.json``: per player (``llm``, ``random``, ``policy:<checkpoint>``) and
  per seat, win/draw/loss rates with Wilson intervals (two-player games), mean
  returns with t intervals, the model agents' invalid-action rate, tokens per
  episode, theory-of-mind accuracy, what the model cost. Written once, whole, at
  the end: a failed or cancelled run has transcripts but no results.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from mosaic.workerkit.envs import reward_structure
from mosaic.workerkit.episode_stats import winner
from mosaic.workerkit.evaluation import legal_random
from mosaic.fastlane.config import FastLaneTarget
from mosaic.llm import scores
from mosaic.llm.actions import Choice, choose_action
from mosaic.llm.backends import make_client
from mosaic.workerkit.program import run_started
from mosaic.runs import write_json_atomic
from mosaic.workerkit.cli import WorkerContext
from llm_worker import PACKAGES

from llm_worker import coordination as co
from llm_worker.config import LLMWorkerConfig, PlayerConfig
from llm_worker.players import build_env, close_policies, load_policies
from llm_worker.text import View



class LLMWorkerRuntime:
    def __init__(self, config: LLMWorkerConfig, context: WorkerContext) -> None:
        self.config = config
        self.ctx = context
        self.steps = 0
        self.episodes: list[dict[str, Any]] = []
        self.predictions: list[co.Scored] = []
        self.lane: Any = None
        self.client: Any = None

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        cfg, emit = self.config, self.ctx.emitter
        root = Path(self.ctx.run_dir.root)
        env_cfg = cfg.environment
        rendering = cfg.fastlane.enabled
        self.policies = load_policies(cfg)
        try:
            env, describer = build_env(cfg, self.policies, "rgb_array" if rendering else None)
        except BaseException:
            close_policies(self.policies)
            raise
        self.env, self.describer = env, describer
        self.agents = list(env.possible_agents)
        self.structure = reward_structure(env_cfg.family, env_cfg.env_id)
        self.teams = co.teams(self.agents, self.structure == "competitive")
        llm_seats = [a for a in self.agents if cfg.player(a).kind == "llm"]
        if llm_seats:
            self.client = make_client(cfg.model)
        self.rng = random.Random(cfg.seed)
        self.np_rng = np.random.default_rng(cfg.seed)
        run_started(emit, cfg, worker="mosaic_llm", packages=PACKAGES, resources={"cpus": 1, "gpus": 0},
                    algorithm="llm", env=env_cfg.describe(), policy_configuration="LANGUAGE_MODEL",
                    seed=cfg.seed, agents=self.agents, coordination=cfg.coordination,
                    theory_of_mind=cfg.theory_of_mind,
                    players={a: cfg.player(a).label() for a in self.agents},
                    model={"backend": cfg.model.backend, "model": cfg.model.model,
                           "base_url": cfg.model.base_url} if llm_seats else None,
                    total_episodes=cfg.episodes)
        if rendering:
            from mosaic.fastlane.publisher import Publisher

            self.lane = Publisher(FastLaneTarget(cfg.run_id, str(root), cfg.fastlane), "main",
                                  log=lambda message: emit.log(f"fastlane: {message}", level="warning"))
        (root / "transcripts").mkdir(exist_ok=True)
        block: list[dict[str, Any]] = []
        try:
            with (root / "transcripts" / "episodes.jsonl").open("a", encoding="utf-8") as transcript:
                self.transcript = transcript
                for index in range(cfg.episodes):
                    episode = self._play_episode(index)
                    self.episodes.append(episode)
                    block.append(episode)
                    emit.episode(episode=index, length=episode["length"], returns=episode["returns"],
                                 seed=episode["seed"], players=episode["players"], winner=episode["winner"],
                                 success=episode["success"],
                                 invalid_actions=episode["invalid_actions"], tokens=episode["tokens"],
                                 tom_accuracy=episode["tom"]["accuracy"]["rate"] if episode["tom"] else None,
                                 duration_s=episode["duration_s"])
                    if len(block) == cfg.episodes_per_block or index == cfg.episodes - 1:
                        emit.metrics(iteration=len(self.episodes) // cfg.episodes_per_block
                                     + (1 if len(self.episodes) % cfg.episodes_per_block else 0),
                                     timesteps_total=self.steps, num_episodes_lifetime=len(self.episodes),
                                     **block_metrics(block, self.episodes),
                                     **({"llm": self.client.totals()} if self.client else {}))
                        self.ctx.progress.tick(len(self.episodes))
                        block = []
        finally:
            env.close()
            close_policies(self.policies)
            if self.lane is not None:
                self.lane.close()
        results = summarise(self.episodes, self.predictions, cfg, self.client.totals() if self.client else None)
        write_json_atomic(root / "results.json", results)
        return closing_summary(results, self.steps)

    # -- one episode -------------------------------------------------------------------------------
    def _seating(self, index: int) -> dict[str, PlayerConfig]:
        cfg = self.config
        seats = {a: cfg.player(a) for a in self.agents}
        if cfg.alternate_seats and len(self.agents) == 2 and index % 2 == 1:
            first, second = self.agents
            if seats[first].label() != seats[second].label():
                seats = {first: seats[second], second: seats[first]}
        return seats

    def _play_episode(self, index: int) -> dict[str, Any]:
        cfg, env = self.config, self.env
        seed = cfg.seed + index
        seats = self._seating(index)
        self.episode = {"index": index, "seats": seats, "history": {a: [] for a in self.agents},
                        "invalid": {a: 0 for a in self.agents if seats[a].kind == "llm"},
                        "decisions": {a: 0 for a in self.agents if seats[a].kind == "llm"}, "tokens": 0,
                        "mind": co.MindReading()}
        for policy in self.policies.values():  # a sampling policy repeats with the episode's seed
            policy.process.reset(seed)
        started = time.perf_counter()
        returns = {a: 0.0 for a in self.agents}
        length = 0
        if self.config.environment.api_type == "AEC":
            env.reset(seed=seed)
            for agent in env.agent_iter():
                obs, _, term, trunc, info = env.last()
                if term or trunc:
                    env.step(None)
                    continue
                action = self._decide(length, [agent], {agent: obs}, {agent: info}, returns)
                env.step(action[agent])
                for a, r in env.rewards.items():
                    returns[a] += float(r)
                length += 1
                self._frame(length, returns)
                if cfg.max_steps and length >= cfg.max_steps:
                    break
                self.ctx.control.checkpoint()  # pause holds here; cancel raises
        else:
            obs, infos = env.reset(seed=seed)
            while env.agents:
                actions = self._decide(length, list(env.agents), obs, infos, returns)
                obs, rewards, _term, _trunc, infos = env.step(actions)
                for a, r in rewards.items():
                    returns[a] += float(r)
                length += 1
                self._frame(length, returns)
                if cfg.max_steps and length >= cfg.max_steps:
                    break
                self.ctx.control.checkpoint()
        self.steps += length
        state = self.episode
        state["mind"].end_episode()
        scored = state["mind"].scored
        self.predictions += scored
        players = {a: seats[a].label() for a in self.agents}
        won = winner(returns, self.structure)
        # success: a model agent won a two-player game (None where nobody wins, or no model plays)
        success = None
        if self.structure == "competitive" and len(returns) == 2 and "llm" in players.values():
            success = won is not None and players[won] == "llm"
        return {"episode": index, "seed": seed, "length": length, "returns": returns, "players": players,
                "winner": won, "winner_player": players[won] if won else None, "success": success,
                "invalid_actions": state["invalid"], "decisions": state["decisions"], "tokens": state["tokens"],
                "tom": co.tom_summary(scored) if cfg.theory_of_mind and scored else None,
                "duration_s": round(time.perf_counter() - started, 3)}

    def _frame(self, step: int, returns: dict[str, float]) -> None:
        if self.lane is not None and self.lane.due():
            self.lane.offer(self.env.render, self.episode["index"], step, lambda: {"returns": dict(returns)})

    # -- one decision point ----------------------------------------------------------------------
    def _decide(self, step: int, acting: list[str], obs: dict[str, Any], infos: dict[str, Any],
                returns: dict[str, float]) -> dict[str, Any]:
        cfg, env, describer, state = self.config, self.env, self.describer, self.episode
        seats: dict[str, PlayerConfig] = state["seats"]
        view = View(step, dict(returns))
        models = [a for a in acting if seats[a].kind == "llm"]
        views = {a: describer.view(env, a, view) for a in models}
        legal = {a: describer.legal_names(env, a) for a in acting}
        shown = dict(views)
        if cfg.coordination == "message_round" and models:
            said = {a: self._message(step, a, views[a]) for a in models}
            shown = {a: co.with_messages(views[a], {b: m for b, m in said.items() if b != a}) for a in models}
        if cfg.theory_of_mind:
            for agent in models:
                predicted = self._predict(step, agent, shown[agent])
                shown[agent] = co.with_predictions(shown[agent], predicted)
        names: dict[str, str] = {}
        if cfg.coordination == "central_planner" and models:
            for team in self.teams.values():
                members = [a for a in team if a in models]
                if members:
                    names.update(self._plan(step, members, {a: shown[a] for a in members}, legal))
        else:
            for agent in models:
                names[agent] = self._choose(step, agent, shown[agent], legal[agent])
        actions: dict[str, Any] = {}
        for agent in acting:
            if agent in names:
                actions[agent] = describer.index(agent, names[agent])
                continue
            seat = seats[agent]
            if seat.kind == "policy":
                actor = self.policies[seat.label()].actor_for(agent)
                actions[agent] = actor.compute_action(obs[agent])
            else:
                actions[agent] = int(legal_random(self.np_rng, env.action_space(agent), obs[agent],
                                                  infos.get(agent) if isinstance(infos, dict) else None))
            names[agent] = describer.action_names(agent)[int(actions[agent])]
        for agent in acting:
            state["mind"].acted(agent, names[agent], step)
            self._write({"step": step, "agent": agent, "kind": "move", "player": seats[agent].label(),
                         "action": names[agent], "action_index": int(actions[agent])})
        return actions

    def _record(self, step: int, agent: str, kind: str, prompt: str, choice: Choice | None = None,
                replies: list[str] | None = None, calls: list[Any] | None = None, **extra: Any) -> None:
        calls = choice.calls if choice is not None else (calls or [])
        used = sum(c.prompt_tokens + c.completion_tokens for c in calls)
        self.episode["tokens"] += used
        line = {"step": step, "agent": agent, "kind": kind, "prompt": prompt,
                **(choice.to_dict() if choice is not None else {"replies": replies or [],
                                                                 "calls": [c.to_dict() for c in calls]}),
                "tokens": used, **extra}
        self._write(line)

    def _write(self, line: dict[str, Any]) -> None:
        self.transcript.write(json.dumps({"episode": self.episode["index"], **line}) + "\n")
        self.transcript.flush()

    def _turns(self, agent: str) -> list[tuple[str, str]]:
        history = self.episode["history"][agent]
        return history[-self.config.history:] if self.config.history else []

    def _choose(self, step: int, agent: str, shown: str, legal: list[str]) -> str:
        cfg = self.config
        messages = co.conversation(self.describer.system_prompt(agent), self._turns(agent), shown)
        choice = choose_action(self.client, messages, legal, self.rng, retries=cfg.retries_per_action)
        self._count(agent, choice)
        self._record(step, agent, "action", shown, choice)
        self.episode["history"][agent].append((shown, choice.action))
        return choice.action

    def _count(self, agent: str, choice: Choice) -> None:
        self.episode["decisions"][agent] += 1
        self.episode["invalid"][agent] += 0 if choice.valid else 1

    def _message(self, step: int, agent: str, view: str) -> str:
        cfg = self.config
        messages = co.conversation(self.describer.system_prompt(agent), self._turns(agent),
                                   f"{view}\n{co.message_request(cfg.message_words)}")
        reply = self.client.complete(messages)
        text = co.cut_message(reply.text, cfg.message_words)
        self._record(step, agent, "message", messages[-1]["content"], replies=[reply.text], calls=[reply.call],
                     message=text)
        return text

    def _predict(self, step: int, agent: str, shown: str) -> dict[str, str | None]:
        others = {b: self.describer.action_names(b) for b in self.agents if b != agent}
        prompt = f"{shown}\n{co.prediction_request(others)}"
        messages = co.conversation(self.describer.system_prompt(agent), self._turns(agent), prompt)
        reply = self.client.complete(messages)
        predicted = co.parse_predictions(reply.text, others)
        self.episode["mind"].predict(agent, predicted, step)
        self._record(step, agent, "prediction", prompt, replies=[reply.text], calls=[reply.call],
                     predictions=predicted)
        return predicted

    def _plan(self, step: int, members: list[str], shown: dict[str, str], legal: dict[str, list[str]]
              ) -> dict[str, str]:
        rules = self.describer.rules(members[0])
        messages = co.planner_prompt(rules, shown, {a: legal[a] for a in members})
        choices = co.choose_plan(self.client, messages, {a: legal[a] for a in members}, self.rng,
                                 retries=self.config.retries_per_action)
        out = {}
        for agent, choice in choices.items():
            self._count(agent, choice)
            self._record(step, agent, "plan", messages[-1]["content"], choice, team=members)
            self.episode["history"][agent].append((shown[agent], choice.action))
            out[agent] = choice.action
        return out


# -- scoring ----------------------------------------------------------------------------------------
def _outcomes(episodes: list[dict[str, Any]], who: str, key: str) -> dict[str, Any]:
    """Win/draw/loss of a player (key ``players``) or seat (key ``seat``) over two-player games."""
    games = [e for e in episodes if len(e["returns"]) == 2]
    if key == "seat":
        mine = games
        wins = sum(e["winner"] == who for e in mine)
        losses = sum(e["winner"] is not None and e["winner"] != who for e in mine)
    else:
        mine = [e for e in games if who in e["players"].values()]
        wins = sum(e["winner_player"] == who for e in mine)
        losses = sum(e["winner"] is not None and e["winner_player"] != who for e in mine)
    n = len(mine)
    return {"games": n, "win": scores.rate(wins, n), "draw": scores.rate(n - wins - losses, n),
            "loss": scores.rate(losses, n)}


def player_stats(episodes: list[dict[str, Any]], competitive: bool) -> dict[str, dict[str, Any]]:
    """Per player (``llm``, ``random``, ``policy:...``): mean return; win/draw/loss when two different
    players met in every game of a competitive env (two model agents are scored per seat instead)."""
    labels = sorted({label for e in episodes for label in e["players"].values()})
    mixed = competitive and all(len(e["returns"]) == 2 and len(set(e["players"].values())) == 2 for e in episodes)
    out: dict[str, dict[str, Any]] = {}
    for label in labels:
        returns = [r for e in episodes for a, r in e["returns"].items() if e["players"][a] == label]
        stats: dict[str, Any] = {"return": scores.mean(returns)}
        if mixed:
            stats.update(_outcomes(episodes, label, "players"))
        if label == "llm":
            decisions = sum(sum(e["decisions"].values()) for e in episodes)
            stats["invalid_actions"] = scores.rate(sum(sum(e["invalid_actions"].values()) for e in episodes),
                                                   decisions)
        out[label] = stats
    return out


def block_metrics(block: list[dict[str, Any]], so_far: list[dict[str, Any]]) -> dict[str, Any]:
    """A block's numbers in the shared metric names, plus the evaluator's own (win rates over the run so far)."""
    # the model's agents' mean return where it plays (a zero-sum game's average over both sides says nothing)
    returns = [statistics.fmean([r for a, r in e["returns"].items() if e["players"][a] == "llm"]
                                or list(e["returns"].values())) for e in block]
    decisions = sum(sum(e["decisions"].values()) for e in block)
    out: dict[str, Any] = {
        "episode_return_mean": sum(returns) / len(returns),
        "episode_len_mean": sum(e["length"] for e in block) / len(block),
        "invalid_action_rate": (sum(sum(e["invalid_actions"].values()) for e in block) / decisions
                                if decisions else 0.0),
        "tokens_per_episode": sum(e["tokens"] for e in block) / len(block),
    }
    labels = sorted({label for e in so_far for label in e["players"].values()})
    two_player = [e for e in so_far if len(e["returns"]) == 2 and len(set(e["players"].values())) == 2]
    for label in labels if two_player else ():
        out[f"win_rate/{label}"] = _outcomes(two_player, label, "players")["win"]["rate"]
    toms = [e["tom"] for e in block if e["tom"]]
    if toms:
        made = sum(t["predictions"] for t in toms)
        out["tom_accuracy"] = sum(t["accuracy"]["rate"] * t["predictions"] for t in toms) / made if made else 0.0
    return out


def closing_summary(results: dict[str, Any], steps: int) -> dict[str, Any]:
    """The run's ``run_completed`` summary: every win rate named ``win_rate/<player>``, as in ``metrics``.

    Two different players (``llm`` against ``random`` or a policy): one rate per player. One player in
    both seats of a two-player game (two model agents): one rate per seat, ``win_rate/<player>@<seat>``.
    Games nobody wins (cooperative envs) have none.
    """
    out: dict[str, Any] = {"episodes": results["episodes_played"], "steps": steps, "results": "results.json"}
    for label, stats in results["players"].items():
        if "win" in stats:
            out[f"win_rate/{label}"] = stats["win"]["rate"]
    labels = {label for e in results["episodes"] for label in e["players"].values()}
    if len(labels) == 1:  # the same player in every seat: its rates are told apart by seat
        (label,) = labels
        for seat, stats in results["seats"].items():
            if "win" in stats:
                out[f"win_rate/{label}@{seat}"] = stats["win"]["rate"]
    return out


def summarise(episodes: list[dict[str, Any]], predictions: list[co.Scored], cfg: LLMWorkerConfig,
              llm: dict[str, Any] | None) -> dict[str, Any]:
    structure = reward_structure(cfg.environment.family, cfg.environment.env_id)
    competitive = structure == "competitive"
    agents = list(episodes[0]["returns"]) if episodes else []
    out: dict[str, Any] = {
        "env": cfg.environment.describe(), "reward_structure": structure, "seed": cfg.seed,
        "episodes_played": len(episodes), "coordination": cfg.coordination,
        "model": {"backend": cfg.model.backend, "model": cfg.model.model, "base_url": cfg.model.base_url,
                  "temperature": cfg.model.temperature} if llm is not None else None,
        "players": player_stats(episodes, competitive),
        "seats": {a: {"return": scores.mean([e["returns"][a] for e in episodes]),
                      **(_outcomes(episodes, a, "seat") if competitive and len(agents) == 2 else {})}
                  for a in agents},
        "team_return": scores.mean([sum(e["returns"].values()) for e in episodes]),
        "episode_length": scores.mean([float(e["length"]) for e in episodes]),
        "tokens_per_episode": scores.mean([float(e["tokens"]) for e in episodes]),
        "theory_of_mind": co.tom_summary(predictions) if cfg.theory_of_mind else None,
        "llm": llm,
        "episodes": episodes,
    }
    return out


