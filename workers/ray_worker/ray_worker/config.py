"""``RayWorkerConfig``: typed, validated configuration of a Ray RLlib run.

Importing this module never imports Ray: ``--validate`` and ``--dry-run`` must
stay fast.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Mapping

from mosaic import configkit
from mosaic.configkit import option
from mosaic.envs import API_TYPES, ENV_FAMILIES
from mosaic.errors import ConfigError, one_of
from mosaic.fastlane.config import FastLaneConfig  # the shared `fastlane` section
from ray_worker import algo_params


class PolicyConfiguration(enum.Enum):
    """How agents map onto trained modules."""

    PARAMETER_SHARING = "parameter_sharing"  # one module per agent type, shared by its agents
    INDEPENDENT = "independent"  # one module per agent
    SELF_PLAY = "self_play"  # main module vs frozen snapshots of itself
    SHARED_VALUE_FUNCTION = "shared_value_function"  # per-agent actors, one central critic (MAPPO)


#: Policy configurations this version trains. The others are refused with a
#: clear message until they are built for real.
IMPLEMENTED_POLICY_CONFIGURATIONS = (PolicyConfiguration.PARAMETER_SHARING,
                                     PolicyConfiguration.INDEPENDENT,
                                     PolicyConfiguration.SELF_PLAY,
                                     PolicyConfiguration.SHARED_VALUE_FUNCTION)
#: Fixed opponents a self-play pool can hold (see ray_worker.modules.UniformRandomRLModule).
SELF_PLAY_BASELINES = ("random",)


@dataclass
class PreprocessingConfig:
    """Image observation preprocessing, so pixel envs train on a CPU."""

    enabled: bool | None = option(None, help="preprocess image observations; null = only for image envs")
    resize: list[int] = option(default_factory=lambda: [42, 42], help="[height, width] after resizing")
    grayscale: bool = option(True, help="convert RGB to one luminance channel")
    frame_stack: int = option(3, min=1, max=16, help="stack this many recent frames on the channel axis")


@dataclass
class EnvironmentConfig:
    family: str = option("mpe", choices=ENV_FAMILIES, help="PettingZoo env family")
    env_id: str = option("simple_spread_v3", help="versioned env id within the family")
    api_type: str = option("PARALLEL", choices=API_TYPES, help="PettingZoo API the env is built with")
    env_kwargs: dict = option(default_factory=dict, help="keyword arguments for the env constructor")
    preprocessing: PreprocessingConfig = option(default_factory=PreprocessingConfig,
                                                help="image observation preprocessing")


#: ``training.stall_timeout_s``: the smallest bound allowed, and the least a derived one gives.
STALL_TIMEOUT_MIN_S = 5.0
STALL_TIMEOUT_FLOOR_S = 300.0


@dataclass
class TrainingConfig:
    algorithm: str = option("PPO", help="RLlib algorithm")
    total_timesteps: int = option(20_000, min=1, help="stop after this many sampled env steps")
    algo_params: dict = option(default_factory=dict, help="hyperparameters, see --schema ALGORITHM")
    algo_params_version: int | None = option(None, help="algo_params schema version the config was written for")
    stall_timeout_s: float | None = option(None, min=STALL_TIMEOUT_MIN_S,
                                           help="fail the run when no training iteration completes for this "
                                                "many seconds; null = derived from the batch size (at least "
                                                f"{STALL_TIMEOUT_FLOOR_S:g} s)")

    def stall_timeout(self) -> float:
        """The stall bound: the configured one, else a generous estimate of one slow iteration.

        The estimate assumes a machine that samples only 20 env steps/s and learns
        from only 100 samples/s per epoch, adds the iteration's minimum duration three
        times over, and never goes below ``STALL_TIMEOUT_FLOOR_S``.
        """
        if self.stall_timeout_s is not None:
            return float(self.stall_timeout_s)
        params = self.algo_params
        batch = float(params.get("train_batch_size_per_learner") or 4000)
        epochs = float(params.get("num_epochs") or 1)
        minimum = float(params.get("min_time_s_per_iteration") or 0)
        return max(STALL_TIMEOUT_FLOOR_S, batch * (1 / 20 + epochs / 100) + 3 * minimum)


@dataclass
class ResourceConfig:
    num_workers: int = option(2, min=0, max=256, help="env runner actors (0 = sample in the driver)")
    num_envs_per_worker: int = option(1, min=1, max=64, help="vectorised envs per env runner")
    num_gpus: float = option(0.0, min=0.0, help="GPUs for the learner (0 = CPU)")
    num_cpus: float = option(1.0, min=0.0, help="CPUs per env runner")
    address: str | None = option(None, help="address of an existing Ray cluster to join; null = start a local one")
    torch_num_threads: int | None = option(
        1, min=1, help="torch threads of the worker process (RLlib's driver: the local learner, and the "
                       "sampler when num_workers is 0); env runner actors get one each from Ray. More "
                       "than 1 pays off only for large networks on an idle machine; on a busy one it makes "
                       "small ones many times slower. null = torch's default (one per core)")


@dataclass
class CheckpointConfig:
    every_n_iterations: int = option(0, min=0, help="save every N iterations; 0 = only at the end")
    at_end: bool = option(True, help="save when the run ends (completed or cancelled)")
    keep_last: int = option(3, min=1, help="keep only the newest K periodic checkpoints")
    restore_from: str | None = option(None, help="checkpoint folder to resume from")


@dataclass
class SelfPlayConfig:
    """SELF_PLAY: a trained ``main`` against a pool of frozen snapshots of itself."""

    snapshot_win_rate: float = option(0.95, min=0.0, max=1.0,
                                      help="main's win rate over the window that adds a snapshot to the pool")
    window_episodes: int = option(100, min=1, help="games the win rate is measured over")
    min_iterations_between_snapshots: int = option(2, min=0, help="guard: iterations between two snapshots")
    max_pool_size: int = option(10, min=1, help="frozen snapshots kept; the next one evicts one")
    eviction: str = option("oldest", choices=("oldest", "weakest"),
                           help="which snapshot leaves a full pool (weakest = main beats it most)")
    opponent_sampling: str = option("uniform", choices=("uniform", "latest", "prioritized"),
                                    help="how an episode's opponent is drawn from the pool")
    latest_probability: float = option(0.5, min=0.0, max=1.0,
                                       help="'latest' sampling: chance of the newest snapshot, else uniform")
    baselines: list[str] = option(default_factory=list,
                                  help="fixed opponents added to every pool and never evicted; allowed: random")
    teams: dict = option(default_factory=dict,
                         help="side name -> agents, for team-wise self-play; empty = one side if all agents "
                              "share spaces (symmetric games), else one side per group of equal spaces")
    win_returns: dict = option(default_factory=dict,
                               help="side name -> mean per-agent return that counts as a win (general-sum "
                                    "games); sides not listed win by out-scoring the other sides")
    main_exploiters: int = option(0, min=0, max=8,
                                  help="league training: extra learners per side that train only against the "
                                       "current main; their snapshots join the pool")
    exploiter_episode_share: float = option(0.3, min=0.0, max=1.0,
                                            help="share of episodes an exploiter (rather than main) is drawn "
                                                 "to play; main plays in those too, as the exploiter's target")
    exploiter_win_rate: float = option(0.7, min=0.0, max=1.0,
                                       help="an exploiter's win rate against main over the window that freezes "
                                            "a copy into the pool and restarts the exploiter from main")
    exploiter_patience_iterations: int = option(0, min=0,
                                                help="restart an exploiter from main when it has not earned a "
                                                     "snapshot for this many iterations; 0 = never")


@dataclass
class CTDEConfig:
    """SHARED_VALUE_FUNCTION: decentralised actors, one centralised critic."""

    actors: str = option("per_agent", choices=("per_agent", "per_group"),
                         help="one actor per agent, or one per group of agents with equal spaces")
    critic_actions: bool = option(False, help="the critic's global state also holds every agent's previous "
                                              "action (one-hot if discrete); vector states only")


@dataclass
class RayWorkerConfig:
    run_id: str = option(help="run id (set by MOSAIC)")
    seed: int = option(0, min=0, help="seeds RLlib, the env runners and env resets")
    environment: EnvironmentConfig = option(default_factory=EnvironmentConfig, help="the env")
    policy_configuration: PolicyConfiguration = option(PolicyConfiguration.PARAMETER_SHARING,
                                                       help="how agents map onto modules")
    training: TrainingConfig = option(default_factory=TrainingConfig, help="algorithm and budget")
    resources: ResourceConfig = option(default_factory=ResourceConfig, help="Ray resources")
    checkpoint: CheckpointConfig = option(default_factory=CheckpointConfig, help="checkpointing")
    ctde: CTDEConfig = option(default_factory=CTDEConfig, help="SHARED_VALUE_FUNCTION settings")
    self_play: SelfPlayConfig = option(default_factory=SelfPlayConfig, help="SELF_PLAY settings")
    output_dir: str | None = option(None, help="artefact folder; null = the run folder")
    tensorboard: bool = option(True, help="write TensorBoard event files to the run's tensorboard/")
    wandb: bool = option(False, help="log to Weights & Biases")
    wandb_project: str = option("mosaic", help="W&B project")
    wandb_mode: str = option("offline", choices=("offline", "online"), help="W&B mode; offline needs no network")
    heartbeat_interval_s: float = option(5.0, min=0.0, help="seconds between heartbeats; 0 = off")
    fastlane: FastLaneConfig = option(default_factory=FastLaneConfig,
                                      help="stream rendered frames from the env runners to `mosaic watch`")

    def to_dict(self) -> dict[str, Any]:
        return configkit.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RayWorkerConfig":
        config = configkit.from_dict(cls, unflatten(data))
        config.validate()
        return config

    def validate(self) -> None:
        """Cross-field checks that need no env and no Ray."""
        algos = algo_params.algorithms()
        if self.training.algorithm not in algos:
            raise ConfigError("training.algorithm", one_of(self.training.algorithm, algos))
        self.training.algo_params = algo_params.validate(
            self.training.algorithm, self.training.algo_params,
            version=self.training.algo_params_version)
        if self.policy_configuration not in IMPLEMENTED_POLICY_CONFIGURATIONS:
            raise ConfigError("policy_configuration", f"{self.policy_configuration.name} is not implemented "
                              f"in this version; available: "
                              f"{', '.join(p.name for p in IMPLEMENTED_POLICY_CONFIGURATIONS)}")
        if self.policy_configuration is PolicyConfiguration.SHARED_VALUE_FUNCTION:
            from ray_worker.traits import central_critic

            if self.training.algorithm not in central_critic():
                raise ConfigError("training.algorithm", f"SHARED_VALUE_FUNCTION (MAPPO) trains with "
                                  f"{', '.join(central_critic())} only, not {self.training.algorithm}")
            if self.environment.api_type != "PARALLEL":
                raise ConfigError("environment.api_type", "SHARED_VALUE_FUNCTION needs PARALLEL envs "
                                  "(a global state per step)")
        unknown = [b for b in self.self_play.baselines if b not in SELF_PLAY_BASELINES]
        if unknown:
            raise ConfigError("self_play.baselines", one_of(unknown[0], SELF_PLAY_BASELINES))
        if len(set(self.self_play.baselines)) != len(self.self_play.baselines):
            raise ConfigError("self_play.baselines", f"{self.self_play.baselines!r} names a baseline twice")
        for side, agents in self.self_play.teams.items():
            if not isinstance(agents, list) or not agents or not all(isinstance(a, str) for a in agents):
                raise ConfigError(f"self_play.teams.{side}", f"must be a non-empty list of agent ids, got {agents!r}")
        for side, value in self.self_play.win_returns.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"self_play.win_returns.{side}", f"must be a number, got {value!r}")
        size = self.environment.preprocessing.resize
        if len(size) != 2 or any(not isinstance(v, int) or v < 8 or v > 512 for v in size):
            raise ConfigError("environment.preprocessing.resize", f"{size!r} must be [height, width], each 8..512")


#: The flat form of worker-examples.rst, mapped onto the nested sections.
FLAT_KEYS = {
    "algorithm": "training", "total_timesteps": "training", "algo_params": "training",
    "algo_params_version": "training",
    "num_workers": "resources", "num_envs_per_worker": "resources", "num_gpus": "resources",
    "num_cpus": "resources", "address": "resources",
    "family": "environment", "env_id": "environment", "api_type": "environment", "env_kwargs": "environment",
}
FRAMEWORKS = ("torch",)


def unflatten(data: Mapping[str, Any]) -> dict[str, Any]:
    """Accept ``{"algorithm": "PPO", "num_workers": 8, "framework": "torch"}`` as well as nested sections."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key == "framework":
            if value not in FRAMEWORKS:
                raise ConfigError("framework", one_of(value, FRAMEWORKS))
            continue
        section = FLAT_KEYS.get(key)
        if section is None:
            out[key] = dict(value) if isinstance(value, dict) else value
            continue
        nested = out.setdefault(section, dict(data.get(section) or {}))
        if not isinstance(nested, dict):
            raise ConfigError(section, f"must be an object, got {type(nested).__name__}")
        if key in nested:
            raise ConfigError(key, f"given both flat and as {section}.{key}")
        nested[key] = value
    return out


def default_config() -> dict[str, Any]:
    """The built-in default (the README's main job): PPO with parameter sharing on MPE simple_spread.

    Two agents learn to cover two landmarks. The budget and hyperparameters are chosen so
    that a first run visibly learns within minutes (about 4.5 on an idle 2-core machine): the mean
    episode return rises from about -38 to about -30 over 60k env steps. Sampling stays
    in the driver (no remote env runners): for an env this small that is the fastest.
    """
    data = configkit.to_dict(RayWorkerConfig(run_id="unset"))
    del data["run_id"]
    data["environment"]["env_kwargs"] = {"N": 2, "max_cycles": 25, "continuous_actions": False}
    data["training"]["total_timesteps"] = 60_000
    data["training"]["algo_params"] = {"train_batch_size_per_learner": 2000, "minibatch_size": 500,
                                       "num_epochs": 10, "lr": 0.0005, "vf_clip_param": 1000.0,
                                       "entropy_coeff": 0.01}
    data["resources"]["num_workers"] = 0
    return data
