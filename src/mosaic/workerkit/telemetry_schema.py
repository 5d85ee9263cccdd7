"""JSON Schema (draft 2020-12) of telemetry schema version 1.

Kept as data so tests, the conformance kit and third-party tools validate
against the same description that ``docs/telemetry.md`` explains.
``python -m mosaic.workerkit.telemetry_schema`` prints it.
"""

from __future__ import annotations

import json
from typing import Any

from mosaic.workerkit.telemetry import EVENT_TYPES, SCHEMA_VERSION

_num = {"type": ["number", "null"]}
_int = {"type": "integer", "minimum": 0}
_str = {"type": "string"}
_num_map = {"type": "object", "additionalProperties": _num}

_PAYLOADS: dict[str, dict[str, Any]] = {
    "run_started": {
        "required": ["worker", "config_digest", "versions", "resources"],
        "properties": {
            "worker": _str,
            "config_digest": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "versions": {"type": "object", "additionalProperties": _str},
            "resources": {"type": "object"},
            "algorithm": _str,
            "env": {"type": "object"},
            "policy_configuration": _str,
            "seed": {"type": ["integer", "null"]},
            "total_timesteps": {"type": ["integer", "null"]},
            "agents": {"type": "array", "items": _str},
        },
    },
    "metrics": {
        "required": ["iteration", "timesteps_total"],
        "properties": {
            "iteration": _int,
            "timesteps_total": _int,
            "total_timesteps": {"type": ["integer", "null"]},
            "env_steps_per_s": _num,
            "episode_return_mean": _num,
            "episode_return_min": _num,
            "episode_return_max": _num,
            "episode_len_mean": _num,
            "num_episodes": {"type": "integer", "minimum": 0},
            "num_episodes_lifetime": {"type": "integer", "minimum": 0},
            "agent_episode_returns_mean": _num_map,
            "agent_episode_returns_min": _num_map,
            "agent_episode_returns_max": _num_map,
            "module_episode_returns_mean": _num_map,
            "module_episode_returns_min": _num_map,
            "module_episode_returns_max": _num_map,
            "learner": {"type": "object", "additionalProperties": _num_map},
        },
    },
    "episode": {
        "required": ["episode", "length", "returns"],
        "properties": {
            "episode": _int,
            "length": _int,
            "returns": _num_map,
            "winner": {"type": ["string", "null"]},
            "duration_s": _num,
        },
    },
    "checkpoint_saved": {
        "required": ["path", "iteration"],
        "properties": {"path": _str, "iteration": _int, "timesteps_total": _int},
    },
    "heartbeat": {"required": [], "properties": {
        "iterations": _int,
        "last_progress_ts": {"type": "number"},
        "since_progress_s": {"type": "number", "minimum": 0},
        "stall_timeout_s": {"type": ["number", "null"], "exclusiveMinimum": 0},
        "stalled": {"type": "boolean"},
        "stall_reason": _str,
    }},
    "log": {
        "required": ["level", "message"],
        "properties": {
            "level": {"enum": ["debug", "info", "warning", "error"]},
            "message": _str,
            "raw": {"type": "boolean"},
            "truncated": {"type": "boolean"},
            "original_bytes": _int,
            "worker_seq": _int,
        },
    },
    "paused": {"required": [], "properties": {}},
    "resumed": {"required": [], "properties": {}},
    "run_completed": {"required": ["summary"], "properties": {"summary": {"type": "object"}}},
    "run_failed": {
        "required": ["error_type", "message"],
        "properties": {"error_type": _str, "message": _str, "traceback": _str,
                       "exit_code": {"type": ["integer", "null"]},
                       "signal": {"type": ["string", "null"]}},
    },
    "run_cancelled": {"required": [], "properties": {"reason": _str}},
}


def build_schema() -> dict[str, Any]:
    """The full schema: a common envelope plus a per-type payload via if/then."""
    branches = []
    for event_type in EVENT_TYPES:
        payload = _PAYLOADS[event_type]
        branches.append({
            "if": {"properties": {"type": {"const": event_type}}},
            "then": {"required": payload["required"], "properties": payload["properties"]},
        })
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://mosaic-marl.dev/schemas/telemetry/v{SCHEMA_VERSION}.json",
        "title": f"MOSAIC telemetry event, schema version {SCHEMA_VERSION}",
        "type": "object",
        "required": ["v", "type", "run_id", "seq", "ts"],
        "properties": {
            "v": {"const": SCHEMA_VERSION},
            "type": {"enum": list(EVENT_TYPES)},
            "run_id": {"type": "string", "pattern": "^[A-Za-z0-9._-]{1,128}$"},
            "seq": _int,
            "ts": {"type": "number"},
        },
        "allOf": branches,
    }


TELEMETRY_SCHEMA = build_schema()

if __name__ == "__main__":
    print(json.dumps(TELEMETRY_SCHEMA, indent=2))
