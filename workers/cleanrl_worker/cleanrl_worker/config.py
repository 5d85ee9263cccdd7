"""A MOSAIC config for a CleanRL script, and the script's command line from it.

Each script's hyperparameters are read from **its own argparse parser** (its
``parse_args()`` is called with ``ArgumentParser.parse_args`` intercepted, so
nothing is parsed and nothing runs): types, defaults and help follow
whichever CleanRL is installed. ``algo_params`` are checked against that
parser, with errors naming ``algo_params.<name>`` and the allowed names.
Reading a parser imports the script and torch with it, so what was read is
kept in MOSAIC's cache (``mosaic.diskcache``) until the script changes.

Importing a script needs CleanRL, which lives in this worker's own
environment; everything else here is plain MOSAIC.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any, Mapping

from mosaic import configkit, diskcache
from mosaic.configkit import option
from mosaic.errors import ConfigError, UserError
from mosaic.fastlane.config import FastLaneConfig

from cleanrl_worker import algorithms
from cleanrl_worker.algorithms import Algorithm

#: Script options MOSAIC sets from its own top-level fields.
OWNED = {"seed": "seed", "env_id": "env_id", "total_timesteps": "total_timesteps",
         "capture_video": "capture_video"}
#: Script options that need what this machine has not got, refused when switched on.
NOT_WIRED = {"track": "W&B tracking of CleanRL runs is not wired into MOSAIC yet (MOSAIC keeps the "
                      "TensorBoard files in the run folder)",
             "upload_model": "uploading to the Hugging Face Hub is not supported"}


@dataclass(frozen=True)
class Param:
    """One option of an upstream script's parser."""

    name: str  # argparse dest, e.g. learning_rate
    flag: str  # e.g. --learning-rate
    type: str  # integer, number, string, boolean
    default: Any
    help: str

    def schema(self) -> dict[str, Any]:
        return {"type": self.type if self.default is not None else [self.type, "null"],
                "default": self.default, "description": self.help}

    def check(self, value: Any, field: str) -> Any:
        if value is None and self.default is None:
            return None
        ok = {"integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
              "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
              "string": lambda v: isinstance(v, str),
              "boolean": lambda v: isinstance(v, bool)}[self.type]
        if not ok(value):
            raise ConfigError(field, f"{value!r} is not a {self.type} (the script's {self.flag}, "
                                     f"default {self.default!r})")
        return float(value) if self.type == "number" else value

    def argv(self, value: Any) -> list[str]:
        if value is None:
            return []
        return [self.flag, ("True" if value else "False") if self.type == "boolean" else str(value)]


class _Captured(Exception):
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        super().__init__("parser captured")
        self.parser = parser


def _kind(action: argparse.Action) -> str:
    if action.type in (int, float, str):
        return {int: "integer", float: "number", str: "string"}[action.type]
    if action.nargs == "?" and action.const is True:  # CleanRL's `type=lambda x: bool(strtobool(x))`
        return "boolean"
    if action.type is None and isinstance(action.default, str):
        return "string"
    raise UserError(f"cleanrl: option {action.option_strings[0]} has a type this worker does not know "
                    f"({action.type!r}); the installed CleanRL is newer than the worker")


@functools.lru_cache(maxsize=None)
def script_params(name: str) -> dict[str, Param]:
    """The options of ``algorithm``'s script, read from its own parser.

    Reading them imports the script (and torch with it: seconds), so the answer
    is kept in MOSAIC's cache, keyed by the script's bytes and this reader's.
    """
    algo = algorithms.get(name)
    try:
        spec = importlib.util.find_spec(algo.module)
    except ImportError:  # no cleanrl package at all
        spec = None
    if spec is None or not spec.origin:
        raise UserError(f"cleanrl: cannot find {algo.module}; the cleanrl worker runs in its own "
                        "environment: `mosaic envs build cleanrl`, then run it through `mosaic`")
    key = {"script": algo.module, "script_sha256": diskcache.file_digest(spec.origin),
           "reader_sha256": diskcache.file_digest(__file__)}
    rows = diskcache.memo("cleanrl-script-params", key,
                          lambda: [list(dataclasses.astuple(p)) for p in read_script_params(name).values()])
    return {row[0]: Param(*row) for row in rows}


def read_script_params(name: str) -> dict[str, Param]:
    """Import ``algorithm``'s script and capture the parser its ``parse_args()`` builds."""
    algo = algorithms.get(name)
    algorithms.silence_gym_notice()
    try:
        module = importlib.import_module(algo.module)
    except ImportError as exc:
        raise UserError(f"cleanrl: cannot import {algo.module} ({exc}); the cleanrl worker runs in its own "
                        "environment: `mosaic envs build cleanrl`, then run it through `mosaic`") from None
    original = argparse.ArgumentParser.parse_args

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        raise _Captured(self)

    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign]
    try:
        module.parse_args()
    except _Captured as captured:
        parser = captured.parser
    else:  # pragma: no cover  (every CleanRL script parses its arguments)
        raise UserError(f"cleanrl: {algo.module}.parse_args() did not parse arguments")
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    params = {}
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction) or not action.option_strings:
            continue
        params[action.dest] = Param(action.dest, action.option_strings[0], _kind(action), action.default,
                                    " ".join(str(action.help or "").split()))
    return params


def params_schema(name: str) -> dict[str, Any]:
    """JSON Schema of ``algo_params`` for one algorithm (what ``--schema ALGO`` prints)."""
    algo = algorithms.get(name)
    params = script_params(name)
    settable = {n: p for n, p in params.items() if n not in OWNED}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"algo_params of cleanrl {name} ({algo.module}, read from its own argument parser)",
            "type": "object", "additionalProperties": False,
            "properties": {n: p.schema() for n, p in sorted(settable.items())}}


@dataclass
class CleanRLConfig:
    """A CleanRL run: one script, one classic-control task, the script's own hyperparameters."""

    run_id: str = option(help="run id (set by MOSAIC)")
    algorithm: str = option("ppo", choices=tuple(algorithms.ALGORITHMS),
                            help="which CleanRL script runs (traits: cleanrl_worker/algorithms.py)")
    env_id: str | None = option(None, help="Gym/Gymnasium id; default: CartPole-v1 (discrete), Pendulum-v1 (box)")
    seed: int = option(1, min=0, help="the script's --seed (CleanRL's default is 1)")
    total_timesteps: int | None = option(None, min=1, help="env steps; default: the script's own")
    capture_video: bool = option(False, help="the script records videos of env 0 into videos/ of the run")
    algo_params: dict[str, Any] = option(default_factory=dict,
                                         help="the script's other options by their argparse names "
                                              "(learning_rate, num_envs, ...): `--schema ALGO` lists them")
    torch_num_threads: int | None = option(None, min=1, help="OMP_NUM_THREADS / MKL_NUM_THREADS of the script: "
                                           "1 makes these small networks many times faster on a busy "
                                           "machine; default: torch's own choice, as when run directly")
    heartbeat_interval_s: float = option(5.0, min=0.1, help="seconds between heartbeats")
    checkpoint_every_timesteps: int = option(0, min=0, help="also checkpoint every N env steps; "
                                                           "0 = only when the script finishes")
    fastlane: FastLaneConfig = option(default_factory=FastLaneConfig,
                                      help="live frames of env 0 for `mosaic watch`")

    @property
    def algo(self) -> Algorithm:
        return algorithms.get(self.algorithm)

    @property
    def resolved_env_id(self) -> str:
        return self.env_id or self.algo.default_env

    def to_dict(self) -> dict[str, Any]:
        return configkit.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CleanRLConfig":
        config = configkit.from_dict(cls, data)
        algorithms.check_env(config.algo, config.resolved_env_id)
        config.algo_params = check_params(config)
        return config

    def params(self) -> dict[str, Any]:
        """Every script option as the run uses it: the script's defaults, then the config."""
        values = {n: p.default for n, p in script_params(self.algorithm).items()}
        values.update(self.algo_params)
        values.update(seed=self.seed, env_id=self.resolved_env_id, capture_video=self.capture_video)
        if self.total_timesteps is not None:
            values["total_timesteps"] = self.total_timesteps
        return values

    def argv(self) -> list[str]:
        """The script's command line (after ``python -m <module>``): every option MOSAIC sets."""
        params = script_params(self.algorithm)
        out: list[str] = []
        explicit = {**self.algo_params, "seed": self.seed, "env_id": self.resolved_env_id,
                    "capture_video": self.capture_video}
        if self.total_timesteps is not None:
            explicit["total_timesteps"] = self.total_timesteps
        for name, value in explicit.items():
            if name in params:
                out += params[name].argv(value)
        return out


def check_params(config: CleanRLConfig) -> dict[str, Any]:
    """``algo_params`` checked against the script's parser; ConfigError naming the field."""
    params = script_params(config.algorithm)
    checked = {}
    for name, value in config.algo_params.items():
        field = f"algo_params.{name}"
        if name in OWNED:
            raise ConfigError(field, f"is set by MOSAIC's top-level {OWNED[name]!r}: set that instead")
        if name not in params:
            raise ConfigError(field, f"{config.algorithm} ({config.algo.script}) has no option {name!r}; "
                                     f"allowed: {', '.join(sorted(n for n in params if n not in OWNED))}")
        checked[name] = params[name].check(value, field)
        if name in NOT_WIRED and value:
            raise ConfigError(field, f"true is not supported: {NOT_WIRED[name]}")
    config.algo_params = checked
    values = config.params()
    # Budgets the script would accept and then silently not train on.
    total = values["total_timesteps"]
    if config.algo.on_policy and "num_steps" in values:
        batch = values["num_envs"] * values["num_steps"]
        if total < batch:
            raise ConfigError("total_timesteps", f"{total} is less than one rollout (num_envs × num_steps = "
                                                 f"{batch}): {config.algorithm} would not update once")
    if "learning_starts" in values and values["learning_starts"] >= total:
        raise ConfigError("algo_params.learning_starts", f"{values['learning_starts']} is not below "
                                                         f"total_timesteps ({total}): nothing would be learned")
    return checked
