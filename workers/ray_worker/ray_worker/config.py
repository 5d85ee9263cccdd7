"""``RayWorkerConfig``: typed, validated configuration of a Ray RLlib run.

A :class:`mosaic.workerkit.run_fields.RunConfig`: the fields every run shares (algorithm, env,
seed, budget, shared hyperparameters, checkpointing, reporting, resources) plus what
only RLlib has (``rllib``: env runners, the Ray cluster, the stall bound) and MOSAIC's
multi-agent sections (``policy_configuration``, ``ctde``, ``self_play``). ``FIELDS``
says what each shared field becomes in RLlib, or why it is refused.

Importing this module never imports Ray: ``--validate`` and ``--dry-run`` must
stay fast.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping

from mosaic import configkit
from mosaic.configkit import option
from mosaic.workerkit.envs import API_TYPES, ENV_FAMILIES
from mosaic.workerkit.envs import EnvironmentConfig as PettingZooEnvironment
from mosaic.errors import ConfigError, one_of
from mosaic.workerkit.devices import check_gpus, devices_used, require_gpus
from mosaic.workerkit.run_fields import (HYPERPARAMETERS, Checkpointing, FieldMap, Resources, RoundedBudget,
                                         RunConfig, WandbTracking)
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


#: Single-agent env families: trained by RLlib's single-agent path (no MultiAgentEnv wrapper).
SINGLE_AGENT_FAMILIES = ("gymnasium",)
#: ``environment.family``: the PettingZoo families, then the single-agent ones.
RAY_ENV_FAMILIES = (*ENV_FAMILIES, *SINGLE_AGENT_FAMILIES)


@dataclass
class RayEnvironmentConfig(PettingZooEnvironment):
    """The shared ``environment`` section (a PettingZoo env, or a Gymnasium one) with Ray's image preprocessing."""

    family: str = option("mpe", choices=RAY_ENV_FAMILIES,
                         help="PettingZoo env family, or gymnasium (one agent, RLlib's single-agent path)")
    env_id: str = option("simple_spread_v3", help="versioned env id within the family")
    api_type: str = option("PARALLEL", choices=API_TYPES, help="PettingZoo API the env is built with "
                                                                 "(gymnasium: PARALLEL, the default, only)")
    preprocessing: PreprocessingConfig = option(default_factory=PreprocessingConfig,
                                                help="image observation preprocessing (PettingZoo envs)")

    @property
    def single_agent(self) -> bool:
        """A single-agent family (gymnasium): RLlib's single-agent path, one agent ``agent_0``."""
        return self.family in SINGLE_AGENT_FAMILIES


#: ``rllib.stall_timeout_s``: the smallest bound allowed, and the least a derived one gives.
STALL_TIMEOUT_MIN_S = 5.0
STALL_TIMEOUT_FLOOR_S = 300.0
#: RLlib's own default of ``num_envs_per_env_runner`` (``num_envs`` null), and the most allowed.
DEFAULT_NUM_ENVS = 1
MAX_NUM_ENVS = 64
#: ``total_timesteps`` null: the worker's default budget.
DEFAULT_TOTAL_TIMESTEPS = 20_000


@dataclass
class RLlibConfig:
    """What only RLlib has: its env runner actors, the Ray cluster, the stall bound."""

    num_env_runners: int = option(2, min=0, max=256, help="env runner actors (0 = sample in the driver)")
    cpus_per_env_runner: float = option(1.0, min=0.0, help="CPUs Ray reserves per env runner actor")
    address: str | None = option(None, help="address of an existing Ray cluster to join; null = start a local one")
    stall_timeout_s: float | None = option(None, min=STALL_TIMEOUT_MIN_S,
                                           help="fail the run when no training iteration completes for this "
                                                "many seconds; null = derived from the batch size (at least "
                                                f"{STALL_TIMEOUT_FLOOR_S:g} s)")
    algo_params_version: int | None = option(None, help="algo_params schema version the config was written for")


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


#: How the Ray worker treats the fields every run shares (``docs/ray-worker.md`` shows it as a table).
RAY_FIELDS = FieldMap(
    honoured={
        "algorithm": "RLlib's algorithm (ppo -> PPO, dqn -> DQN, impala -> IMPALA, appo -> APPO, sac -> SAC; "
                     "a2c -> MOSAIC's A2C on RLlib's API)",
        "environment.family": "the PettingZoo family of the env registered with RLlib (tune.register_env), or "
                              "gymnasium: a single-agent env trained by RLlib's single-agent path",
        "environment.env_id": "the PettingZoo env registered with RLlib (tune.register_env); gymnasium: the id "
                              "given to gymnasium.make",
        "environment.env_kwargs": "the PettingZoo env constructor's keyword arguments (gymnasium.make's for "
                                  "gymnasium)",
        "seed": "AlgorithmConfig.debugging(seed=...): RLlib, its env runners and their env resets",
        "total_timesteps": "training stops at the first iteration end with at least this many env steps "
                           "sampled (RLlib's num_env_steps_sampled); null = 20000",
        "num_envs": "AlgorithmConfig.env_runners(num_envs_per_env_runner=...); null = 1",
        "learning_rate": "algo_params.lr (AlgorithmConfig.training(lr=...)); SAC has none (it has actor_lr, "
                         "critic_lr and alpha_lr in algo_params)",
        "gamma": "algo_params.gamma (AlgorithmConfig.training(gamma=...))",
        "batch_size": "algo_params.minibatch_size where the algorithm has one (PPO); else "
                      "algo_params.train_batch_size_per_learner (DQN, SAC, IMPALA, APPO, A2C: one update per "
                      "train batch)",
        "checkpoint.every_timesteps": "Algorithm.save_to_path at the first iteration end at or past each "
                                      "multiple of N env steps",
        "checkpoint.at_end": "Algorithm.save_to_path when the run ends (completed or cancelled)",
        "checkpoint.keep": "older periodic checkpoints are deleted (default 3)",
        "checkpoint.restore_from": "Algorithm.restore_from_path, plus MOSAIC's state (env steps, episodes, "
                                   "the self-play pool)",
        "reporting.heartbeat_interval_s": "MOSAIC's heartbeat events",
        "fastlane": "frames rendered by the env runners' envs",
        "resources.threads": "torch.set_num_threads of the worker process (RLlib's driver: the local learner, "
                             "and the sampler when rllib.num_env_runners is 0); default 1",
        "resources.cpus": "CPUs the daemon (or a cluster cell) reserves for the run, and the CPUs of the run's "
                          "own Ray (default: every core)",
        "resources.gpus": "AlgorithmConfig.learners(...): up to 1 = the local learner's num_gpus_per_learner "
                          "(a share of one GPU); a whole N > 1 = num_learners=N remote learners with one GPU "
                          "each; refused where torch sees no GPU, unless rllib.address joins a cluster that has "
                          "them",
        "algo_params": "AlgorithmConfig.training()/env_runners()/reporting() and DefaultModelConfig by RLlib's "
                       "own names (`python -m ray_worker.cli --schema ALGORITHM`)",
    },
    refused={
        "environment.env_ids": "one env per run: RLlib trains on the single env it registers",
        "episodes": "a training worker: its budget is total_timesteps",
        "reporting.every_timesteps": "RLlib reports once per training iteration (its size is "
                                     "algo_params.train_batch_size_per_learner)",
    },
)

def hyperparameter_names(rllib_algorithm: str) -> dict[str, str | None]:
    """Shared hyperparameter -> its RLlib name for ``rllib_algorithm`` (None: the algorithm has none)."""
    props = algo_params.schema(rllib_algorithm)["properties"]
    return {"learning_rate": "lr" if "lr" in props else None,
            "gamma": "gamma" if "gamma" in props else None,
            "batch_size": "minibatch_size" if "minibatch_size" in props else "train_batch_size_per_learner"}


def _samples(fragment: int, envs: int, runners: int) -> str:
    """How one sampling round is made up, in words: ``fragment`` steps × envs × env runners."""
    return f"{fragment} × {envs} env{'s' if envs > 1 else ''} × {runners} env runner{'s' if runners > 1 else ''}"


def _filled(batch: int, sample: int) -> int:
    """The env steps that fill a train batch of ``batch`` in whole sampling rounds of ``sample``."""
    return sample * -(-batch // sample)


@dataclass
class RayWorkerConfig(WandbTracking, RunConfig):
    # ``wandb``, ``wandb_project`` and ``wandb_mode`` are the shared W&B section (run_fields.WandbTracking),
    # logged by ``analytics.MetricsSinks``.

    FIELDS: ClassVar[FieldMap] = RAY_FIELDS

    algorithm: str = option("ppo", help="RLlib algorithm, lower case (ppo, dqn, impala, appo, sac, a2c); "
                                        "RLlib's spelling (PPO) is accepted")
    environment: RayEnvironmentConfig = option(default_factory=RayEnvironmentConfig, help="the env")
    seed: int = option(0, min=0, help="seeds RLlib, the env runners and env resets")
    total_timesteps: int | None = option(DEFAULT_TOTAL_TIMESTEPS, min=1,
                                         help="stop after this many sampled env steps (at an iteration end); "
                                              f"null = {DEFAULT_TOTAL_TIMESTEPS}")
    num_envs: int | None = option(None, min=1, help="vectorised envs per env runner (RLlib's "
                                                    f"num_envs_per_env_runner, at most {MAX_NUM_ENVS}); null = 1")
    checkpoint: Checkpointing = option(merge=True, default_factory=lambda: Checkpointing(keep=3),
                                       help="checkpoints and resume (keeps the newest 3 periodic ones)")
    resources: Resources = option(merge=True, default_factory=lambda: Resources(threads=1),
                                  help="threads (torch threads of the worker process; default 1: more pays off "
                                       "only for large networks on an idle machine), CPUs and learner GPUs")
    policy_configuration: PolicyConfiguration = option(PolicyConfiguration.PARAMETER_SHARING,
                                                       help="how agents map onto modules")
    rllib: RLlibConfig = option(default_factory=RLlibConfig,
                                help="RLlib's own settings: env runners, the Ray cluster, the stall bound")
    ctde: CTDEConfig = option(default_factory=CTDEConfig, help="SHARED_VALUE_FUNCTION settings")
    self_play: SelfPlayConfig = option(default_factory=SelfPlayConfig, help="SELF_PLAY settings")
    output_dir: str | None = option(None, help="artefact folder; null = the run folder")
    tensorboard: bool = option(True, help="write TensorBoard event files to the run's tensorboard/")

    @classmethod
    def algorithms(cls) -> tuple[str, ...]:
        return tuple(a.lower() for a in algo_params.algorithms())

    @property
    def rllib_algorithm(self) -> str:
        """The algorithm by RLlib's (registry's) name: ``ppo`` -> ``PPO``."""
        return algo_params.rllib_name(self.algorithm)

    @property
    def num_envs_per_env_runner(self) -> int:
        return self.num_envs if self.num_envs is not None else DEFAULT_NUM_ENVS

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "RayWorkerConfig":
        config = configkit.from_dict(cls, unflatten(data))
        config.check_shared()
        config.validate()
        config.check_devices()
        return config

    def check_devices(self) -> None:
        """``resources.gpus`` against the GPUs torch sees here; on a cluster (``rllib.address``) Ray places the
        learners where the GPUs are, so only the request's shape is checked (a share of one, or whole GPUs)."""
        gpus = self.resources.gpus
        if gpus > 0 and self.rllib.address:
            require_gpus(gpus, devices_used(gpus), "RLlib")
        else:
            check_gpus(gpus, "torch")

    def learner_resources(self) -> dict[str, Any]:
        """``AlgorithmConfig.learners(...)`` from ``resources.gpus``: the local learner on a share of one GPU (or
        the CPU), or one remote learner per GPU when it asks for several (RLlib's multi-GPU learning)."""
        gpus = self.resources.gpus
        if gpus <= 1:
            return {"num_learners": 0, "num_gpus_per_learner": gpus}
        return {"num_learners": int(gpus), "num_gpus_per_learner": 1}

    def rounded_budget(self, start: int = 0) -> RoundedBudget | None:
        """A run trains whole iterations (from ``start``, a restored checkpoint's steps) and stops after the one
        that reaches the budget. Each env runner samples ``rollout_fragment_length`` steps of each of its
        ``num_envs`` envs at a time: DQN and SAC once an iteration, PPO and A2C until the train batch
        (``train_batch_size_per_learner`` per learner) is full ('auto' fragments split it across runners and envs,
        RLlib's rounding up to whole vector steps). A budget that is not a whole number of iterations is rounded up.
        Not known in advance: APPO's and IMPALA's iterations (they last a time, ``min_time_s_per_iteration``), and
        a single-agent env's vector of several envs (gymnasium resets an ended env in a step RLlib does not
        count)."""
        if not isinstance(self.total_timesteps, int) or self.total_timesteps <= start:
            return None
        from ray_worker.traits import traits

        name, total, trait = self.rllib_algorithm, self.total_timesteps, traits(self.rllib_algorithm)
        if trait.learner_thread:
            seconds = self.algo_params.get("min_time_s_per_iteration", 1)
            return RoundedBudget(total, None, f"{name}'s training iterations last at least {seconds:g} s "
                                 "(min_time_s_per_iteration) and the run stops after the one that reaches "
                                 f"total_timesteps {total}: it takes more env steps than that, how many depends on "
                                 "this machine's speed; the steps it reports are those it ran")
        envs, runners, batch, fragment = self._sampling()
        if trait.on_policy:
            if fragment is None:  # RLlib's 'auto': the batch in whole vector steps
                steps = envs * -(-batch // envs)
                what = f"a train batch of {batch} in whole vector steps of {envs} env{'s' if envs > 1 else ''}"
            else:
                steps = _filled(batch, fragment * envs * runners)
                what = (f"a train batch of {batch} in samples of rollout_fragment_length "
                        f"{_samples(fragment, envs, runners)}")
        else:
            fragment = fragment or trait.auto_rollout_fragment or self._param("n_step")
            steps, what = fragment * envs * runners, f"rollout_fragment_length {_samples(fragment, envs, runners)}"
        if envs > 1 and self.environment.single_agent:
            return RoundedBudget(total, None, f"{name}'s training iterations sample about {steps} env steps each "
                                 f"({what}) and the run stops after the one that reaches total_timesteps {total}; "
                                 f"how far past it is not known in advance: of a single-agent env's {envs} "
                                 "vectorised envs, one that ended resets in a step RLlib does not count; the steps "
                                 "it reports are those it ran")
        return RoundedBudget.whole_units(total, steps, "training iteration", what, start=start)

    def _sampling(self) -> tuple[int, int, int, int | None]:
        """How an iteration samples: envs per env runner, env runners (at least one samples), the train batch over
        all learners, and an explicit ``rollout_fragment_length`` (None: 'auto')."""
        fragment = self.algo_params.get("rollout_fragment_length")
        explicit = isinstance(fragment, int) and not isinstance(fragment, bool) and fragment > 0
        batch = self._param("train_batch_size_per_learner") * max(1, self.learner_resources()["num_learners"])
        return self.num_envs_per_env_runner, max(1, self.rllib.num_env_runners), batch, fragment if explicit else None

    def _param(self, name: str) -> int:
        """``algo_params[name]`` when it is a positive int, else its default."""
        value = self.algo_params.get(name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            value = algo_params.schema(self.algorithm)["properties"][name]["default"]
        return value

    def stall_timeout(self) -> float:
        """The stall bound: the configured one, else a generous estimate of one slow iteration.

        The estimate assumes a machine that samples only 20 env steps/s and learns
        from only 100 samples/s per epoch, adds the iteration's minimum duration three
        times over, and never goes below ``STALL_TIMEOUT_FLOOR_S``.
        """
        if self.rllib.stall_timeout_s is not None:
            return float(self.rllib.stall_timeout_s)
        params = self.algo_params
        batch = float(params.get("train_batch_size_per_learner") or 4000)
        epochs = float(params.get("num_epochs") or 1)
        minimum = float(params.get("min_time_s_per_iteration") or 0)
        return max(STALL_TIMEOUT_FLOOR_S, batch * (1 / 20 + epochs / 100) + 3 * minimum)

    def _check_fragment_fills_the_batch(self) -> None:
        """PPO and A2C (RLlib's PPOConfig.validate) refuse a ``rollout_fragment_length`` whose samples (× envs ×
        env runners) add up to the train batch only more than 10% past it: refused here, before the run."""
        envs, runners, batch, fragment = self._sampling()
        if self.rllib_algorithm not in ("PPO", "A2C") or fragment is None:
            return
        filled = _filled(batch, fragment * envs * runners)
        if filled - batch > 0.1 * batch:
            raise ConfigError("algo_params.rollout_fragment_length",
                              f"{fragment} fills the train batch of {batch} only with {filled} env steps, more than "
                              f"10% past it (samples of {_samples(fragment, envs, runners)}: "
                              f"{fragment * envs * runners}); allowed: \"auto\" or {max(1, batch // (envs * runners))}")

    def _merge_hyperparameters(self) -> dict[str, Any]:
        """``algo_params`` with the shared hyperparameters under RLlib's names; both given: refused.

        The same value under both names is one request, not two (a config written back by a run
        holds its resolved ``algo_params``).
        """
        if not isinstance(self.algo_params, Mapping):
            raise ConfigError("algo_params", f"must be an object, got {type(self.algo_params).__name__}")
        params = dict(self.algo_params)
        names = hyperparameter_names(self.rllib_algorithm)
        for shared in HYPERPARAMETERS:
            value = getattr(self, shared)
            if value is None:
                continue
            name = names[shared]
            if name is None:
                own = [f"algo_params.{k}" for k in ("actor_lr", "critic_lr", "alpha_lr")
                       if k in algo_params.schema(self.rllib_algorithm)["properties"]]
                raise ConfigError(shared, f"{self.algorithm} has no single {shared}; set "
                                          f"{', '.join(own) or 'algo_params'} instead; allowed: null")
            if name in params and params[name] != value:
                raise ConfigError(shared, f"{value!r} and algo_params.{name} ({params[name]!r}) both set "
                                          f"{self.algorithm}'s {name}; allowed: only one of {shared} and "
                                          f"algo_params.{name}")
            params[name] = value
        return params

    def validate(self) -> None:
        """Cross-field checks that need no env and no Ray (after :meth:`check_shared`)."""
        if self.total_timesteps is None:
            self.total_timesteps = DEFAULT_TOTAL_TIMESTEPS
        if self.num_envs is not None and self.num_envs > MAX_NUM_ENVS:
            raise ConfigError("num_envs", f"{self.num_envs} is above the maximum {MAX_NUM_ENVS}")
        self.check_wandb_online()  # as every worker with W&B: online without a key fails before the run
        params = self._merge_hyperparameters()
        names = hyperparameter_names(self.rllib_algorithm)
        try:
            self.algo_params = algo_params.validate(self.rllib_algorithm, params,
                                                    version=self.rllib.algo_params_version)
        except ConfigError as exc:  # a bad shared value: name the field the user wrote
            shared = next((s for s in HYPERPARAMETERS if getattr(self, s) is not None
                           and exc.field == f"algo_params.{names[s]}"), None)
            if shared is None:
                raise
            raise ConfigError(shared, f"(RLlib's {names[shared]}) {str(exc).split(': ', 1)[-1]}") from None
        self._check_fragment_fills_the_batch()
        if self.environment.single_agent:
            self._check_single_agent()
        if self.policy_configuration not in IMPLEMENTED_POLICY_CONFIGURATIONS:
            raise ConfigError("policy_configuration", f"{self.policy_configuration.name} is not implemented "
                              f"in this version; available: "
                              f"{', '.join(p.name for p in IMPLEMENTED_POLICY_CONFIGURATIONS)}")
        if self.policy_configuration is PolicyConfiguration.SHARED_VALUE_FUNCTION:
            from ray_worker.traits import central_critic

            if self.rllib_algorithm not in central_critic():
                raise ConfigError("algorithm", f"SHARED_VALUE_FUNCTION (MAPPO) trains with "
                                  f"{', '.join(a.lower() for a in central_critic())} only, not {self.algorithm}")
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


    def _check_single_agent(self) -> None:
        """A single-agent env has no agents to share, pair or pit: multi-agent options are refused by name."""
        env = f"{self.environment.family}/{self.environment.env_id}"
        why = f"{env} has a single agent"
        if self.policy_configuration is not PolicyConfiguration.PARAMETER_SHARING:
            raise ConfigError("policy_configuration", f"{self.policy_configuration.name} needs several agents; "
                              f"{why}; allowed: PARAMETER_SHARING")
        if self.self_play != SelfPlayConfig():
            raise ConfigError("self_play", f"self-play needs opponents; {why}; allowed: the defaults (omit it)")
        if self.ctde != CTDEConfig():
            raise ConfigError("ctde", f"a centralised critic needs several agents; {why}; allowed: the defaults "
                              "(omit it)")
        if self.environment.api_type != "PARALLEL":
            raise ConfigError("environment.api_type", f"{self.environment.api_type} is a PettingZoo API; {why}; "
                              "allowed: PARALLEL")
        if self.environment.preprocessing.enabled:
            raise ConfigError("environment.preprocessing.enabled", f"image preprocessing is for PettingZoo envs "
                              f"in this version; {why}; allowed: null, false")


#: The flat form of the specification's example (worker-examples.rst):
#: ``{"algorithm": "PPO", "num_workers": 8, "num_envs_per_worker": 4, "framework": "torch"}``.
#: Flat key -> (section or None for top level, field).
FLAT_KEYS = {"num_workers": ("rllib", "num_env_runners"), "num_envs_per_worker": (None, "num_envs")}
FRAMEWORKS = ("torch",)


def unflatten(data: Mapping[str, Any]) -> dict[str, Any]:
    """Accept the specification's flat example as well as the nested sections.

    ``num_workers`` -> ``rllib.num_env_runners``, ``num_envs_per_worker`` -> ``num_envs``,
    ``framework``: only ``"torch"``, then dropped.
    """
    out: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()
                           if k not in FLAT_KEYS and k != "framework"}
    if "framework" in data and data["framework"] not in FRAMEWORKS:
        raise ConfigError("framework", one_of(data["framework"], FRAMEWORKS))
    for key, (section, name) in FLAT_KEYS.items():
        if key not in data:
            continue
        if section is None:
            target, where = out, name
        else:
            target = out.setdefault(section, {})
            if not isinstance(target, dict):
                raise ConfigError(section, f"must be an object, got {type(target).__name__}")
            where = f"{section}.{name}"
        if name in target:
            raise ConfigError(key, f"given both as {key} (the flat form) and as {where}; allowed: one of them")
        target[name] = data[key]
    return out


def default_config() -> dict[str, Any]:
    """The built-in default (the README's main job): PPO with parameter sharing on MPE simple_spread.

    Two agents learn to cover two landmarks. The budget and hyperparameters are chosen so
    that a first run visibly learns within minutes (about 2.5 on an idle 2-core machine): the mean
    episode return rises from about -38 to about -31 over 30k env steps, where its curve flattens
    (docs/results.md). Sampling stays
    in the driver (no remote env runners): for an env this small that is the fastest.
    """
    data = configkit.to_dict(RayWorkerConfig(run_id="unset"))
    del data["run_id"]
    data["worker"] = "ray"
    data["environment"]["env_kwargs"] = {"N": 2, "max_cycles": 25, "continuous_actions": False}
    data["total_timesteps"] = 30_000
    data["algo_params"] = {"train_batch_size_per_learner": 2000, "minibatch_size": 500,
                           "num_epochs": 10, "lr": 0.0005, "vf_clip_param": 1000.0,
                           "entropy_coeff": 0.01}
    data["rllib"]["num_env_runners"] = 0
    return data


#: Older name of the env section (importers: the policy actor, tests).
EnvironmentConfig = RayEnvironmentConfig
