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
import functools
import importlib
import importlib.util
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from mosaic import configkit, diskcache
from mosaic.configkit import option
from mosaic.errors import ConfigError, UserError
from mosaic.workerkit.devices import check_gpus
from mosaic.workerkit.options import UpstreamOption, bounds_by_meaning, unknown_option
from mosaic.workerkit.run_fields import Environment, FieldMap, RoundedBudget, RunConfig, WandbTracking

from cleanrl_worker import algorithms
from cleanrl_worker.algorithms import FAMILY, Algorithm

#: Script options MOSAIC sets from its own top-level fields (never in ``algo_params``).
OWNED = {"seed": "seed", "env_id": "environment.env_id", "total_timesteps": "total_timesteps",
         "capture_video": "capture_video", "cuda": "resources.gpus", "track": "wandb",
         "wandb_project_name": "wandb_project"}
#: Shared hyperparameters -> the script option each one sets (where the script has it).
SHARED_OPTIONS = {"num_envs": "num_envs", "learning_rate": "learning_rate", "gamma": "gamma",
                  "batch_size": "batch_size"}
#: Script options that need what MOSAIC does not offer: not in the schema, refused whenever given.
NOT_WIRED = {"wandb_entity": "a W&B run is logged under the API key's default entity (offline: none)",
             "upload_model": "uploading to the Hugging Face Hub is not supported"}


#: Script options whose meaning fixes their range (the scripts' parsers set no bounds): counts of what a script
#: loops over or divides by (below 1 the script fails at its first update, a division by zero, or trains nothing),
#: probabilities and discounts from 0 to 1, rates and coefficients not negative.
BOUNDS = bounds_by_meaning(
    counts=("num_envs", "num_steps", "num_minibatches", "update_epochs", "batch_size", "buffer_size",
            "train_frequency", "target_network_frequency", "policy_frequency"),
    fractions=("gamma", "gae_lambda", "tau", "start_e", "end_e", "exploration_fraction"),
    not_negative=("learning_rate", "policy_lr", "q_lr", "ent_coef", "vf_coef", "clip_coef", "max_grad_norm",
                  "alpha", "noise_clip", "exploration_noise", "policy_noise", "target_kl", "learning_starts"),
    n_atoms=(2, None))


def script_option(name: str, flag: str, kind: str, default: Any, help: str) -> UpstreamOption:
    """One option of a script's parser: its argparse dest (``learning_rate``), flag (``--learning-rate``), JSON
    type, default and help, with the bounds its meaning fixes (BOUNDS)."""
    return UpstreamOption(name, default, "CleanRL", help, type=kind, flag=flag
                          ).bounded(*BOUNDS.get(name, (None, None)))


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
def script_params(name: str) -> dict[str, UpstreamOption]:
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
                          lambda: [[p.name, p.flag, p.kind, p.default, p.description]
                                   for p in read_script_params(name).values()])
    return {row[0]: script_option(*row) for row in rows}


def read_script_params(name: str) -> dict[str, UpstreamOption]:
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
        params[action.dest] = script_option(action.dest, action.option_strings[0], _kind(action), action.default,
                                            " ".join(str(action.help or "").split()))
    return params


def params_schema(name: str) -> dict[str, Any]:
    """JSON Schema of ``algo_params`` for one algorithm (what ``--schema ALGO`` prints)."""
    algo = algorithms.get(name)
    params = script_params(name)
    settable = {n: p for n, p in params.items() if n not in OWNED and n not in NOT_WIRED}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"algo_params of cleanrl {name} ({algo.module}, read from its own argument parser)",
            "type": "object", "additionalProperties": False,
            "properties": {n: p.schema() for n, p in sorted(settable.items())}}


FIELDS = FieldMap(
    honoured={
        "algorithm": "which CleanRL script runs (ppo, dqn, c51, sac, td3, ddpg, dqn_atari, ppo_atari, "
                     "c51_atari, ppo_continuous_action, ppo_atari_envpool)",
        "environment.family": "gymnasium (classic control), atari (ALE: dqn_atari, ppo_atari, c51_atari), mujoco (ddpg, "
                              "ppo_continuous_action) or envpool (EnvPool's Atari, ppo_atari_envpool); empty: "
                              "the env id's family",
        "environment.env_id": "the script's --env-id (empty: the script's default task: CartPole-v1, "
                              "Pendulum-v1, BreakoutNoFrameskip-v4 for dqn_atari, ppo_atari and c51_atari, HalfCheetah-v4 for "
                              "ppo_continuous_action, Pong-v5 for ppo_atari_envpool)",
        "seed": "the script's --seed",
        "total_timesteps": "the script's --total-timesteps (ppo runs whole rollouts: the steps that will "
                           "run are said up front)",
        "num_envs": "the script's --num-envs (ppo, ppo_atari, ppo_continuous_action, ppo_atari_envpool; dqn and "
                    "dqn_atari: 1; refused for scripts without that option)",
        "learning_rate": "the script's --learning-rate (refused for sac: algo_params.policy_lr and q_lr)",
        "gamma": "the script's --gamma",
        "batch_size": "the script's --batch-size (refused for ppo, ppo_atari, ppo_continuous_action and ppo_atari_envpool: "
                      "the minibatch is num_envs × num_steps / algo_params.num_minibatches)",
        "checkpoint.every_timesteps": "the script's networks saved at the first iteration end at or past "
                                      "each multiple",
        "checkpoint.at_end": "the script's networks saved when its TensorBoard writer closes",
        "reporting.heartbeat_interval_s": "MOSAIC's heartbeat while the script runs",
        "fastlane": "frames of the script's first env (Atari: the ALE screen, 210x160 RGB, every frame; "
                    "EnvPool: env 0's newest 84x84 grey observation frame, what the agent sees)",
        "resources.threads": "OMP_NUM_THREADS / MKL_NUM_THREADS of the script's process",
        "resources.cpus": "CPUs the daemon reserves for the run",
        "resources.gpus": "the script's --cuda (0: --cuda False, the CPU; up to 1: --cuda True, its one CUDA "
                          "device; more: refused, a script trains on one device); refused where the "
                          "environment's torch sees no GPU (CUDA builds: docs/worker-environments.md, "
                          "\"GPU builds\")",
        "algo_params": "the script's other options by their argparse names (`--schema ALGO` lists them)",
    },
    refused={
        "environment.env_ids": "a CleanRL script trains on one env id",
        "environment.env_kwargs": "a CleanRL script makes its env from --env-id alone",
        "episodes": "a training worker: its budget is total_timesteps",
        "checkpoint.keep": "every checkpoint a CleanRL run saves is kept (set checkpoint.every_timesteps "
                           "to save fewer)",
        "checkpoint.restore_from": "CleanRL's scripts always start from freshly initialised networks and "
                                   "have no option to load saved ones, so a run cannot resume",
        "reporting.every_timesteps": "a metrics event follows each iteration the script logs (its "
                                     "charts/SPS scalar); the script sets that cadence",
    })


def _default_environment() -> Environment:
    return Environment(family=FAMILY)


@dataclass
class CleanRLConfig(WandbTracking, RunConfig):
    """A CleanRL run: one script, one task (classic control, Atari, MuJoCo), the script's own hyperparameters.

    ``wandb`` (the shared W&B section) runs the script with its own ``--track`` and
    ``--wandb-project-name`` from ``wandb_project``; ``runtime.child_env`` sets W&B's mode and folder.
    """

    FIELDS: ClassVar[FieldMap] = FIELDS

    algorithm: str = option("ppo", help=f"which CleanRL script runs: {', '.join(algorithms.ALGORITHMS)} (traits: "
                                        "cleanrl_worker/algorithms.py); any case is accepted")
    environment: Environment = option(default_factory=_default_environment,
                                      help="family 'gymnasium' (classic control), 'atari', 'mujoco' or 'envpool'; "
                                           "env_id a task of the script's families (empty: the script's default)")
    seed: int = option(1, min=0, help="the script's --seed (CleanRL's default is 1)")
    capture_video: bool = option(False, help="the script records videos of env 0 into videos/ of the run")

    @classmethod
    def algorithms(cls) -> tuple[str, ...]:
        return tuple(algorithms.ALGORITHMS)

    @property
    def algo(self) -> Algorithm:
        return algorithms.get(self.algorithm)

    @property
    def resolved_env_id(self) -> str:
        return self.environment.env_id or self.algo.default_env

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CleanRLConfig":
        config = configkit.from_dict(cls, data)
        config.check_shared()
        family = config.environment.family
        if family not in ("", *algorithms.FAMILIES):
            raise ConfigError("environment.family", f"{family!r} is not offered by the cleanrl worker; allowed: "
                                                    f"{', '.join(algorithms.FAMILIES)}")
        algorithms.check_env(config.algo, config.resolved_env_id, field="environment.env_id")
        found = algorithms.family_of(config.resolved_env_id) or FAMILY
        # No family, or the default one with no env id (the script's default task): the task's own family.
        if family and family != found and (family != FAMILY or config.environment.env_id):
            raise ConfigError("environment.family", f"{family!r} does not hold {config.resolved_env_id} (a "
                                                    f"{found} task); allowed: {found}")
        config.environment.family = found
        config.environment.env_id = config.resolved_env_id  # the run's config says which env it plays
        config.algo_params = check_params(config)
        check_gpus(config.resources.gpus, "torch", max_gpus=1)  # a script trains on one device
        config.check_wandb_online()
        return config

    def shared_options(self) -> dict[str, Any]:
        """The shared hyperparameters that are set, by the script option each one sets."""
        return {SHARED_OPTIONS[name]: getattr(self, name) for name in SHARED_OPTIONS
                if getattr(self, name) is not None}

    def explicit(self) -> dict[str, Any]:
        """Every script option the config sets (the rest keep the script's defaults)."""
        values = {**self.algo_params, **self.shared_options(), "seed": self.seed,
                  "env_id": self.resolved_env_id, "capture_video": self.capture_video,
                  "cuda": self.resources.gpus > 0}  # the script's own default is True: the GPU when it sees one
        if self.wandb:  # the script's own W&B logging (wandb.init(sync_tensorboard=True, ...)); off: its default
            values.update(track=True, wandb_project_name=self.wandb_project)
        if self.total_timesteps is not None:
            values["total_timesteps"] = self.total_timesteps
        return values

    def params(self) -> dict[str, Any]:
        """Every script option as the run uses it: the script's defaults, then the config."""
        values = {n: p.default for n, p in script_params(self.algorithm).items()}
        values.update(self.explicit())
        return values

    def env_steps(self) -> int:
        """The env steps the script will actually run (ppo rounds its budget down to whole rollouts)."""
        return algorithms.env_steps(self.algo, self.params())

    def rounded_budget(self) -> RoundedBudget | None:
        """Why the script will run another number of env steps than total_timesteps, or None when it runs them."""
        note = algorithms.budget_note(self.algo, self.params())
        return RoundedBudget(int(self.params()["total_timesteps"]), self.env_steps(), note) if note else None

    def argv(self) -> list[str]:
        """The script's command line (after ``python -m <module>``): every option MOSAIC sets."""
        params = script_params(self.algorithm)
        out: list[str] = []
        for name, value in self.explicit().items():
            if name in params:
                out += params[name].argv(value)
        return out


def check_params(config: CleanRLConfig) -> dict[str, Any]:
    """``algo_params`` and the shared hyperparameters checked against the script's parser."""
    params = script_params(config.algorithm)
    allowed = ", ".join(sorted(n for n in params if n not in OWNED and n not in NOT_WIRED))
    checked = {}
    for name, value in config.algo_params.items():
        field = f"algo_params.{name}"
        if name in OWNED:
            raise ConfigError(field, f"is set by MOSAIC's top-level {OWNED[name]!r}: set that instead")
        if name in NOT_WIRED:
            raise ConfigError(field, f"is not offered: {NOT_WIRED[name]}; allowed: {allowed}")
        if name not in params:
            raise unknown_option("algo_params", name, allowed.split(", "), f"CleanRL's {config.algo.script}")
        shared = next((s for s, o in SHARED_OPTIONS.items() if o == name), None)
        if shared is not None and getattr(config, shared) is not None:
            raise ConfigError(field, f"sets the script's {params[name].flag}, as the top-level {shared!r} "
                                     f"does: set it once; allowed: the top-level {shared!r} or "
                                     f"algo_params.{name}, not both")
        checked[name] = params[name].check(value, field)
    for shared, name in SHARED_OPTIONS.items():
        value = getattr(config, shared)
        if value is None:
            continue
        if name not in params:
            raise ConfigError(shared, _no_option(config, shared, params))
        params[name].check(value, shared)
    config.algo_params = checked
    values = config.params()
    if config.algo.single_env and values.get("num_envs", 1) != 1:
        field = "num_envs" if config.num_envs is not None else "algo_params.num_envs"
        raise ConfigError(field, f"{values['num_envs']}: CleanRL's {config.algo.script} asserts a single env "
                                 "(\"vectorized envs are not supported\"); allowed: 1")
    # Budgets the script would accept and then silently not train on.
    total = values["total_timesteps"]
    if config.algo.on_policy and "num_steps" in values:
        batch = values["num_envs"] * values["num_steps"]
        if values.get("num_minibatches", 1) > batch:
            raise ConfigError("algo_params.num_minibatches",
                              f"{values['num_minibatches']} is more than the rollout's {batch} env steps "
                              f"(num_envs × num_steps): its minibatches would be empty; allowed: 1 to {batch}")
        if total < batch:
            raise ConfigError("total_timesteps", f"{total} is less than one rollout (num_envs × num_steps = "
                                                 f"{batch}): {config.algorithm} would not update once")
    if "learning_starts" in values and values["learning_starts"] >= total:
        raise ConfigError("algo_params.learning_starts", f"{values['learning_starts']} is not below "
                                                         f"total_timesteps ({total}): nothing would be learned")
    return checked


def _no_option(config: CleanRLConfig, shared: str, params: Mapping[str, UpstreamOption]) -> str:
    script = f"{config.algorithm} ({config.algo.script})"
    if shared == "batch_size" and "num_minibatches" in params:
        return (f"{script} has no --batch-size: its minibatch is num_envs × num_steps / num_minibatches; "
                "allowed: null, and set algo_params.num_minibatches (and num_steps) instead")
    if shared == "learning_rate" and "policy_lr" in params:
        return (f"{script} has two learning rates and no --learning-rate; allowed: null, and set "
                "algo_params.policy_lr and algo_params.q_lr instead")
    return f"{script} has no --{shared.replace('_', '-')} option; allowed: null"
