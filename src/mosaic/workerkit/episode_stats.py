"""Episode statistics every worker reports the same way.

A training iteration's ``metrics`` event carries RLlib-named statistics over
the episodes that *finished in that iteration* (not a moving window):
``num_episodes``, ``episode_return_mean/min/max`` (the sum over agents),
``episode_len_mean``, ``illegal_actions`` and per-agent and per-module
``*_episode_returns_mean/min/max`` (docs/telemetry.md). Workers hand
:func:`episode_statistics` one record per finished episode:
``{"returns": {agent: float}, "length": int, "modules": {agent: module}, "illegal_actions": int}``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping


def _stats(values: list[float]) -> tuple[float, float, float]:
    return sum(values) / len(values), min(values), max(values)


def episode_statistics(episodes: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The statistics above; ``{"num_episodes": 0}`` when no episode finished."""
    episodes = list(episodes)
    if not episodes:
        return {"num_episodes": 0}
    totals = [float(sum(e["returns"].values())) for e in episodes]
    per_agent: dict[str, list[float]] = {}
    per_module: dict[str, list[float]] = {}
    for e in episodes:
        modules = e.get("modules") or {}
        for agent, ret in e["returns"].items():
            per_agent.setdefault(agent, []).append(float(ret))
            if agent in modules:
                per_module.setdefault(modules[agent], []).append(float(ret))
    out: dict[str, Any] = {"num_episodes": len(episodes)}
    out["episode_return_mean"], out["episode_return_min"], out["episode_return_max"] = _stats(totals)
    out["episode_len_mean"] = sum(e["length"] for e in episodes) / len(episodes)
    out["illegal_actions"] = sum(int(e.get("illegal_actions", 0)) for e in episodes)
    for prefix, groups in (("agent", per_agent), ("module", per_module)):
        stats = {k: _stats(v) for k, v in groups.items()}
        for i, suffix in enumerate(("mean", "min", "max")):
            out[f"{prefix}_episode_returns_{suffix}"] = {k: s[i] for k, s in stats.items()}
    return out


def winner(returns: Mapping[str, float], structure: str | None = None) -> str | None:
    """The better-scoring agent of a two-agent episode; None for a draw, more agents, or
    an env where nobody wins (``structure`` from ``mosaic.workerkit.envs.reward_structure`` is
    ``cooperative`` or ``single``)."""
    if len(returns) != 2 or structure in ("cooperative", "single"):
        return None
    (a, ra), (b, rb) = returns.items()
    return None if ra == rb else (a if ra > rb else b)


def zero_sum_returns(metrics: Mapping[str, Any]) -> dict[str, float] | None:
    """Each agent's mean episode return when the agents' returns cancel out (a zero-sum game: a win and a loss),
    where ``episode_return_mean``, their sum, is 0 by construction and says nothing; None otherwise (one agent,
    a sum that is not 0, or every agent at 0: draws only)."""
    total, per_agent = metrics.get("episode_return_mean"), metrics.get("agent_episode_returns_mean")
    if not isinstance(total, (int, float)) or not isinstance(per_agent, Mapping) or len(per_agent) < 2:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in per_agent.values()):
        return None
    largest = max(abs(v) for v in per_agent.values())
    return dict(per_agent) if largest > 1e-9 and abs(total) <= 1e-9 * max(1.0, largest) else None


def return_label(metrics: Mapping[str, Any], digits: int) -> str:
    """The mean episode return as clients show it: the sum over agents, or in a zero-sum game each agent's
    (``player_0 +0.12, player_1 -0.12``); ``""`` when the metrics hold none."""
    per_agent = zero_sum_returns(metrics)
    if per_agent is not None:
        return ", ".join(f"{agent} {value:+.{digits}f}" for agent, value in per_agent.items())
    ret = metrics.get("episode_return_mean")
    return f"{ret:.{digits}f}" if isinstance(ret, (int, float)) and not isinstance(ret, bool) else ""
