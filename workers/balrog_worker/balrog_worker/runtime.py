"""The evaluation: every task, its episodes, the model choosing each action from text.

For each step the model gets the system prompt, the last ``history`` turns and the
current observation as text (``text.py``); ``mosaic.llm.actions.choose_action`` reads
its action, asks again when the reply names none, and otherwise plays a seeded
random action counted as invalid. Pause and cancel take effect between steps.

What the run folder gets:

- ``transcripts/<task>.jsonl``: one line per step (episode, step, the observation
  text, every reply, the action played, whether the model chose it, the calls'
  tokens and latency), written as the run goes, so an evaluation can be audited and
  replayed;
- ``results.json``: per task and overall, success rate and progression with 95%
  intervals, invalid-action rate, tokens per episode, and what the model cost. It is
  written once, complete, when every episode has been played (through a temporary
  file and a rename): a failed or cancelled run has transcripts but no results.

A success is an episode the env ends with a positive reward (MiniGrid's reward is
``1 - 0.9 * steps / max_steps`` when the mission is done, 0 otherwise). On BabyAI
and MiniGrid, BALROG's progression is the same 0 or 100%: it is reported as such.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import minigrid  # noqa: F401  (registers the MiniGrid-* and BabyAI-* ids)

from mosaic.fastlane.config import FastLaneTarget
from mosaic.llm import scores
from mosaic.llm.actions import choose_action
from mosaic.llm.backends import make_client
from mosaic.workerkit.program import run_started
from mosaic.workerkit.cli import WorkerContext
from balrog_worker import PACKAGES

from balrog_worker.config import BalrogConfig
from balrog_worker.text import ACTION_INDEX, ACTION_NAMES, build_messages, describe, observation_prompt

AGENT = "agent"


class BalrogRuntime:
    def __init__(self, config: BalrogConfig, context: WorkerContext) -> None:
        self.config = config
        self.ctx = context
        self.steps = 0
        self.episodes: list[dict[str, Any]] = []
        self.lane: Any = None

    def run(self) -> dict[str, Any]:
        cfg, emit = self.config, self.ctx.emitter
        root = Path(self.ctx.run_dir.root)
        client = make_client(cfg.model)
        rng = random.Random(cfg.seed)
        total_episodes = cfg.episodes * len(cfg.tasks)
        run_started(emit, cfg, worker="balrog", packages=PACKAGES, resources={"cpus": 1, "gpus": 0},
                    algorithm="llm", env={"family": cfg.environment.family, "env_id": cfg.tasks[0],
                                          "tasks": list(cfg.tasks)},
                    policy_configuration="LANGUAGE_MODEL", seed=cfg.seed, agents=[AGENT],
                    model={"backend": cfg.model.backend, "model": cfg.model.model,
                           "base_url": cfg.model.base_url},
                    total_episodes=total_episodes)
        if cfg.fastlane.enabled:
            from mosaic.fastlane.publisher import Publisher

            self.lane = Publisher(FastLaneTarget(cfg.run_id, str(root), cfg.fastlane), "main",
                                  log=lambda message: emit.log(f"fastlane: {message}", level="warning"))
        (root / "transcripts").mkdir(exist_ok=True)
        try:
            for iteration, task in enumerate(cfg.tasks, start=1):
                block = self._play_task(task, client, rng)
                emit.metrics(iteration=iteration, timesteps_total=self.steps, task=task,
                             num_episodes_lifetime=len(self.episodes), **block_metrics(block),
                             llm=client.totals())
                self.ctx.progress.tick(iteration)
        finally:
            if self.lane is not None:
                self.lane.close()
        results = summarise(self.episodes, cfg, client.totals())
        write_atomically(root / "results.json", results)
        return {"episodes": len(self.episodes), "steps": self.steps,
                "success_rate": results["overall"]["success"]["rate"], "results": "results.json"}

    def _play_task(self, task: str, client: Any, rng: random.Random) -> list[dict[str, Any]]:
        cfg, emit = self.config, self.ctx.emitter
        env = gym.make(task, render_mode="rgb_array" if self.lane is not None else None, **cfg.gym_kwargs())
        block = []
        path = Path(self.ctx.run_dir.root) / "transcripts" / f"{task}.jsonl"
        try:
            with path.open("a", encoding="utf-8") as transcript:
                for index in range(cfg.episodes):
                    started = time.perf_counter()
                    episode = self._play_episode(env, task, cfg.seed + index, client, rng, transcript)
                    episode.update(episode=len(self.episodes), duration_s=round(time.perf_counter() - started, 3))
                    self.episodes.append(episode)
                    block.append(episode)
                    emit.episode(episode=episode["episode"], length=episode["length"],
                                 returns={AGENT: episode["return"]}, task=task, seed=episode["seed"],
                                 success=episode["success"], progression=episode["progression"],
                                 invalid_actions=episode["invalid_actions"], tokens=episode["tokens"],
                                 duration_s=episode["duration_s"])
        finally:
            env.close()
        return block

    def _play_episode(self, env: Any, task: str, seed: int, client: Any, rng: random.Random,
                      transcript: Any) -> dict[str, Any]:
        cfg = self.config
        obs, _info = env.reset(seed=seed)
        mission = obs["mission"]
        history: list[tuple[str, str]] = []
        total, length, invalid, tokens = 0.0, 0, 0, 0
        success = False
        while True:
            current = observation_prompt(mission, describe(obs, env.unwrapped.carrying))
            messages = build_messages(task, history[-cfg.history:] if cfg.history else [], current)
            choice = choose_action(client, messages, ACTION_NAMES, rng, retries=cfg.retries_per_action)
            obs, reward, terminated, truncated, _info = env.step(ACTION_INDEX[choice.action])
            length += 1
            self.steps += 1
            total += float(reward)
            invalid += 0 if choice.valid else 1
            used = sum(c.prompt_tokens + c.completion_tokens for c in choice.calls)
            tokens += used
            transcript.write(json.dumps({"task": task, "seed": seed, "step": length, "observation": current,
                                         **choice.to_dict(), "reward": float(reward), "tokens": used}) + "\n")
            transcript.flush()
            if self.lane is not None and self.lane.due():
                self.lane.offer(env.render, len(self.episodes), length,
                                lambda: {"returns": {AGENT: total}, "task": task, "action": choice.action})
            history.append((current, choice.action))
            if terminated or truncated:
                success = bool(terminated and reward > 0)
                break
            self.ctx.control.checkpoint()  # pause holds here; cancel raises
        return {"task": task, "seed": seed, "mission": mission, "return": total, "length": length,
                "success": success, "progression": 1.0 if success else 0.0, "invalid_actions": invalid,
                "tokens": tokens}


def scored(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    steps = sum(e["length"] for e in episodes)
    return {"episodes": len(episodes), "steps": steps,
            "success": scores.rate(sum(e["success"] for e in episodes), len(episodes)),
            "progression": scores.mean([e["progression"] for e in episodes]),
            "return": scores.mean([e["return"] for e in episodes]),
            "invalid_actions": scores.rate(sum(e["invalid_actions"] for e in episodes), steps),
            "tokens_per_episode": scores.mean([float(e["tokens"]) for e in episodes])}


def block_metrics(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """What a block of episodes scored, in the shared metric names plus the evaluator's own."""
    block = scored(episodes)
    success = block["success"]
    return {"episode_return_mean": block["return"]["mean"], "episode_len_mean": block["steps"] / block["episodes"],
            "success_rate": success["rate"], "success_ci95": [success["ci95_low"], success["ci95_high"]],
            "progression_mean": block["progression"]["mean"],
            "invalid_action_rate": block["invalid_actions"]["rate"],
            "tokens_per_episode": block["tokens_per_episode"]["mean"]}


def summarise(episodes: list[dict[str, Any]], cfg: BalrogConfig, llm: dict[str, Any]) -> dict[str, Any]:
    return {"protocol": "BALROG-style (MiniGrid/BabyAI): text observations, one action per reply",
            "model": {"backend": cfg.model.backend, "model": cfg.model.model, "base_url": cfg.model.base_url,
                      "temperature": cfg.model.temperature},
            "seed": cfg.seed, "episodes_per_task": cfg.episodes,
            "tasks": {task: scored([e for e in episodes if e["task"] == task]) for task in cfg.tasks},
            "overall": scored(episodes), "llm": llm,
            "episodes": episodes}


def write_atomically(path: Path, data: Any) -> None:
    staging = path.with_name(f".{path.name}.{os.getpid()}")
    staging.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    staging.replace(path)
