"""A MOSAIC config for a Tianshou run, and Tianshou's own keyword arguments from it.

MOSAIC's fields cover what every algorithm has (env, seed, budget, network
sizes, learning rate, batch, buffer, collection and update sizes).
``algo_params`` are the rest: any keyword argument of the algorithm's Tianshou
policy class and algorithm class whose default is a plain number, string or
boolean, read from their signatures in the installed Tianshou (so names, types
and defaults follow Tianshou), checked with errors naming
``algo_params.<name>`` and the allowed names. Reading them needs Tianshou, so
validation runs in this worker's own environment.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

from mosaic import configkit
from mosaic.configkit import option
from mosaic.errors import ConfigError, UserError, one_of
from mosaic.workerkit.devices import check_gpus
from mosaic.workerkit.options import UpstreamOption, bounds_by_meaning, unknown_option
from mosaic.workerkit.run_fields import Environment, FieldMap, Resources, RoundedBudget, RunConfig

from tianshou_worker import algorithms
from tianshou_worker.algorithms import BUILT, Algorithm, class_name


#: Bounds of Tianshou's numeric keyword arguments, by name, where their meaning fixes them (Tianshou checks none
#: of these itself: a count of 0, or a probability of 2, fails or misbehaves only once training runs).
_ONE_OR_MORE = ("actor_delay", "disc_update_num", "ensemble_size", "forward_sampled_times", "max_backtracks",
                "max_batchsize", "n_step_return_horizon", "num_quantiles", "num_repeat_actions", "num_sampled_action",
                "online_sample_size", "optim_critic_iters", "sample_size", "subset_size", "target_sample_size",
                "update_actor_freq")
_FRACTIONS = ("eps_inference", "eps_training", "gae_lambda", "gamma", "tau", "backtrack_coeff",
              "unlikely_action_threshold")
_NOT_NEGATIVE = ("eps_clip", "noise_clip", "policy_noise", "max_kl", "vf_coef", "alpha_min", "temperature",
                 "cql_alpha_lr", "min_q_weight", "cql_weight", "trust_region_size", "target_update_freq")
BOUNDS = bounds_by_meaning(_ONE_OR_MORE, _FRACTIONS, _NOT_NEGATIVE, num_atoms=(2, None))


def epochs(remaining: int, test_every: int) -> tuple[int, int]:
    """(max_epochs, epoch_num_steps) for Tianshou's trainer: one epoch for the whole budget without tests,
    else the budget split evenly into epochs of at most ``test_every`` steps (a test ends each epoch)."""
    if not test_every:
        return 1, remaining
    count = -(-remaining // test_every)
    return count, -(-remaining // count)


def tianshou_param(name: str, default: Any, owner: str, auto_alpha: bool = False) -> UpstreamOption:
    """One keyword argument of a Tianshou class (``owner``), with its default; ``auto_alpha``: ``alpha`` also
    takes "auto" (``algorithms.AUTO_ALPHA``)."""
    description = f"keyword argument of Tianshou's {owner}"
    words: tuple[str, ...] = ()
    if auto_alpha and name == "alpha":
        description, words = f"{description}: a number, or {algorithms.AUTO_ALPHA_HELP}", (algorithms.AUTO_ALPHA,)
    return UpstreamOption(name, default, "Tianshou", description, owner=owner, words=words,
                          # a None default: Tianshou's optional numbers (huber_loss_delta, ...)
                          type="number" if default is None else "").bounded(*BOUNDS.get(name, (None, None)))


def tianshou_folder() -> Path:
    """Where Tianshou is installed, found without importing it (importing it takes seconds)."""
    spec = importlib.util.find_spec("tianshou")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("tianshou: Tianshou is not installed here; the tianshou worker runs in its own "
                        "environment: `mosaic envs build tianshou`, then run it through `mosaic`")
    return Path(list(spec.submodule_search_locations)[0])


def keyword_defaults(path: str) -> dict[str, Any]:
    """A Tianshou class's ``__init__`` keyword arguments with literal defaults, read from its source.

    ``path`` is ``module.Class`` under ``tianshou.algorithm``. The source is parsed, not imported: the
    same names and defaults Python would see, without the seconds torch and Tianshou take to import.
    """
    module, _, cls = path.rpartition(".")
    source = tianshou_folder() / "algorithm" / (module.replace(".", "/") + ".py")
    tree = ast.parse(source.read_text(encoding="utf-8"))
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    if init is None:  # inherited: the first base class's, where this module imports it from
        base = next(b.id for b in node.bases if isinstance(b, ast.Name))
        origin = next(n.module for n in tree.body if isinstance(n, ast.ImportFrom)
                      and any(a.name == base for a in n.names))
        return keyword_defaults(f"{origin.removeprefix('tianshou.algorithm.')}.{base}")
    args = init.args
    pairs = list(zip(args.args[len(args.args) - len(args.defaults):], args.defaults))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
    out = {}
    for arg, default in pairs:
        try:
            out[arg.arg] = ast.literal_eval(default)
        except ValueError:
            continue  # a default that is an expression (a class, a call): not a plain value
    return out


@functools.lru_cache(maxsize=None)
def tianshou_params(name: str) -> dict[str, UpstreamOption]:
    """The tunable keyword arguments of the algorithm's policy and algorithm classes, with their defaults."""
    algo = algorithms.get(name)
    fixed = {f[0] for f in algo.fixed}
    out: dict[str, UpstreamOption] = {}
    for path in (algo.policy_class, algo.tianshou_class):
        for key, default in keyword_defaults(path).items():
            if key not in BUILT and key not in fixed and (default is None or isinstance(default, (bool, int, float, str))):
                out[key] = tianshou_param(key, default, class_name(path), algo.auto_alpha)
    return out


def params_schema(name: str) -> dict[str, Any]:
    """JSON Schema of ``algo_params`` for one algorithm (``--schema ALGO``)."""
    algo = algorithms.get(name)
    params = tianshou_params(algo.name)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"algo_params of tianshou {algo.name} (keyword arguments of Tianshou's "
                     f"{class_name(algo.policy_class)} and {class_name(algo.tianshou_class)}, with their defaults)",
            "type": "object", "additionalProperties": False,
            "properties": {n: p.schema() for n, p in sorted(params.items())}}


@dataclass
class OfflineData:
    """Where an offline algorithm's data set comes from: collected at run time, never downloaded."""

    transitions: int = option(5000, min=1, help="env steps collected into the data set before training")
    policy: str = option("random", help="'random' (uniform actions), or a checkpoint (or run folder) of a "
                                        "tianshou run on the same env whose policy collects the data")
    exploration_noise: bool = option(False, help="the checkpoint policy records as it acted while training, "
                                                 "with its exploration (DDPG/TD3: Gaussian noise; the DQN family: "
                                                 "eps_training; SAC, PPO: sampled actions), not its evaluation-mode "
                                                 "actions: a wider data set")


@dataclass
class EpsilonSchedule:
    """DQN's training epsilon as a function of env steps: ``start`` until ``begin_at``, then a straight line
    to ``end`` at ``end_at``, then ``end``. Set through Tianshou's ``set_eps_training`` at every safe point
    (its ``training_fn``), as Tianshou's own DQN examples do."""

    start: float = option(1.0, min=0.0, max=1.0, help="epsilon until begin_at")
    end: float = option(0.05, min=0.0, max=1.0, help="epsilon from end_at on")
    begin_at: int = option(0, min=0, help="env step (of the run, warm-up included) where the decay begins")
    end_at: int = option(10_000, min=1, help="env step where epsilon reaches end")

    def at(self, step: int) -> float:
        if step <= self.begin_at:
            return self.start
        if step >= self.end_at:
            return self.end
        return self.start + (self.end - self.start) * (step - self.begin_at) / (self.end_at - self.begin_at)


#: Families of ``environment.family``: Gymnasium ids, and PettingZoo's classic two-player games.
FAMILIES = ("gymnasium", "classic")
#: The worker's defaults for the shared fields a null leaves to it.
DEFAULT_TOTAL_TIMESTEPS = 50_000
DEFAULT_LEARNING_RATE = 1e-3
DEFAULT_BATCH_SIZE = 64
DEFAULT_REPORT_EVERY = 1000

FIELDS = FieldMap(
    honoured={
        "algorithm": "the Tianshou algorithm class (dqn: DQN, c51: C51, rainbow: RainbowDQN, iqn: IQN, ppo: PPO, "
                     "a2c: A2C, trpo: TRPO, sac: SAC, ddpg: DDPG, td3: TD3, redq: REDQ, discrete_cql: DiscreteCQL, "
                     "discrete_bcq: DiscreteBCQ, bcq: BCQ, cql: CQL, gail: GAIL)",
        "environment.family": "gymnasium (gymnasium.make), or classic: a PettingZoo classic game through "
                              "Tianshou's PettingZooEnv",
        "environment.env_id": "the Gymnasium id or the classic game (empty: CartPole-v1 discrete, Pendulum-v1 "
                              "box, tictactoe_v3 for classic)",
        "seed": "torch's and numpy's seed; env i of the vector is seeded seed + i",
        "total_timesteps": "env steps of Tianshou's trainer (offline algorithms: gradient steps); null = 50000",
        "num_envs": "envs of Tianshou's DummyVectorEnv",
        "learning_rate": "Adam's lr for every optimiser the worker builds; null = 1e-3",
        "gamma": "the algorithm's gamma keyword argument (Tianshou's own name, also settable as "
                 "algo_params.gamma); null = Tianshou's default",
        "batch_size": "the trainer's batch_size (on-policy: the minibatch); null = 64",
        "checkpoint.every_timesteps": "a checkpoint at the first safe point (Tianshou's training_fn) at or past "
                                      "each multiple",
        "checkpoint.at_end": "a checkpoint when the run ends (completed or cancelled)",
        "checkpoint.restore_from": "a tianshou checkpoint of the same algorithm and env: weights, optimisers "
                                   "and counters restored, training continues to total_timesteps",
        "reporting.every_timesteps": "a metrics event (an iteration) every N env steps (offline: gradient "
                                     "steps); null = 1000",
        "reporting.heartbeat_interval_s": "MOSAIC's heartbeat",
        "fastlane": "frames of training env 0 (gymnasium only)",
        "resources.threads": "torch.set_num_threads of the worker (default 1; null = torch's default)",
        "resources.cpus": "CPUs the daemon reserves for the run",
        "resources.gpus": "the torch device of the networks and the algorithm (Algorithm.to): 0 = 'cpu', up to "
                          "1 = 'cuda:0' (one device; more is refused); evaluation plays on the CPU; refused "
                          "where the environment's torch sees no GPU (CUDA builds: "
                          "docs/worker-environments.md, \"GPU builds\")",
        "algo_params": "any other keyword argument of the algorithm's Tianshou policy or algorithm class "
                       "(`--schema ALGO` lists them)",
    },
    refused={
        "environment.env_ids": "a Tianshou run trains on one env",
        "environment.env_kwargs": "the worker makes its envs from their id alone in this version",
        "episodes": "a training worker: its budget is total_timesteps",
        "checkpoint.keep": "every checkpoint a Tianshou run saves is kept in this version",
    })


@dataclass
class TianshouConfig(RunConfig):
    """A Tianshou run: one algorithm, one Gymnasium env (or one seat of a classic game)."""

    FIELDS: ClassVar[FieldMap] = FIELDS

    algorithm: str = option("dqn", help=f"Tianshou algorithm: {', '.join(algorithms.ALGORITHMS)} (traits: "
                                        "tianshou_worker/algorithms.py); any case is accepted")
    environment: Environment = option(default_factory=lambda: Environment(family="gymnasium"),
                                      help="family: gymnasium (single agent), or classic: a PettingZoo "
                                           "two-player game, one seat learning through Tianshou's multi-agent "
                                           "algorithm (dqn); env_id: a Gymnasium id (default: CartPole-v1 "
                                           "discrete, Pendulum-v1 box), or a classic game (default: tictactoe_v3)")
    seed: int = option(1, min=0, help="torch's and numpy's seed; env i of the vector is seeded seed + i")
    total_timesteps: int | None = option(DEFAULT_TOTAL_TIMESTEPS, min=1,
                                         help="online: env steps; offline: gradient steps; null = 50000")
    num_envs: int | None = option(1, min=1, max=256, help="training envs stepped together (Tianshou's "
                                                          "DummyVectorEnv); null = 1")
    resources: Resources = option(merge=True, default_factory=lambda: Resources(threads=1),
                                  help="threads: torch threads of the worker (default 1: these small networks "
                                       "run fastest on one; null = torch's default)")
    learner_seat: str | None = option(None, help="classic: the seat DQN learns in (e.g. player_2); the other plays "
                                                 "random legal moves; default: the first seat")
    hidden_sizes: list[int] = option(default_factory=lambda: [64, 64], help="hidden layers of every network")
    buffer_size: int = option(20_000, min=1, help="replay buffer size (off-policy), summed over the envs")
    collect_steps: int | None = option(None, min=1, help="env steps per collection step; default: 10 "
                                                         "off-policy, 2048 on-policy")
    update_per_step: float = option(0.1, min=0.0, help="off-policy: gradient steps per collected env step")
    repeat_per_collect: int = option(10, min=1, help="on-policy: passes over each rollout")
    learning_starts: int | None = option(None, min=0, help="off-policy: env steps collected with uniform random "
                                                           "actions before training; default: batch_size")
    offline_data: OfflineData = option(default_factory=OfflineData, help="offline algorithms: the data set; "
                                                                         "gail: the expert's data set")
    eps_schedule: EpsilonSchedule | None = option(None, help="dqn: epsilon of exploration decayed over env "
                                                             "steps (replaces algo_params.eps_training); "
                                                             "null = Tianshou's constant eps_training")
    test_every_timesteps: int = option(0, min=0, help="a test of the policy in evaluation mode every N env steps "
                                                      "(offline: gradient steps), Tianshou's test step at the end "
                                                      "of each epoch; 0 = no tests")
    test_episodes: int = option(10, min=1, max=1000, help="episodes of each test, one env each (seeded "
                                                          "seed + num_envs + i)")
    stop_at_return: float | None = option(None, help="end training at the first test whose mean return reaches "
                                                     "this (Tianshou's stop_fn); needs test_every_timesteps; "
                                                     "null = train the whole budget")

    @classmethod
    def algorithms(cls) -> tuple[str, ...]:
        return tuple(algorithms.ALGORITHMS)

    @property
    def env_family(self) -> str:
        return self.environment.family

    @property
    def env_id(self) -> str:
        return self.environment.env_id

    @property
    def restore_from(self) -> str | None:
        return self.checkpoint.restore_from

    @property
    def report_every_timesteps(self) -> int:
        return self.reporting.every_timesteps or DEFAULT_REPORT_EVERY

    @property
    def algo(self) -> Algorithm:
        return algorithms.get(self.algorithm)

    @property
    def classic(self) -> bool:
        return self.env_family == "classic"

    @property
    def resolved_env_id(self) -> str:
        return self.env_id or ("tictactoe_v3" if self.classic else self.algo.default_env)

    @property
    def resolved_collect_steps(self) -> int:
        if self.collect_steps is not None:
            return self.collect_steps
        return 2048 if self.algo.kind == "on_policy" else 10

    @property
    def resolved_learning_starts(self) -> int:
        if self.algo.kind != "off_policy":
            return 0
        return self.batch_size or 64 if self.learning_starts is None else self.learning_starts

    def rounded_budget(self, start: int = 0) -> RoundedBudget | None:
        """The env steps (offline: gradient steps) a run takes from ``start`` (a restored checkpoint's steps):
        Tianshou collects ``collect_steps`` in whole vector steps of the ``num_envs`` envs (the ``learning_starts``
        warm-up too, which a restored run does again: its replay buffer is not in the checkpoint), and each epoch
        (one, or one per ``test_every_timesteps``) runs until it has its share. None when that is
        ``total_timesteps``, or when ``start`` is at or past it (nothing runs)."""
        total, n, offline = self.total_timesteps, self.num_envs, self.algo.kind == "offline"
        if start >= total:
            return None

        def vector_steps(steps: int) -> int:  # Tianshou's collector steps all n envs at once
            return -(-steps // n) * n

        warm = vector_steps(self.resolved_learning_starts) if self.resolved_learning_starts else 0
        unit = 1 if offline else vector_steps(self.resolved_collect_steps)
        count, per_epoch = epochs(max(total - start - warm, 0), self.test_every_timesteps)
        steps = start + warm + count * -(-per_epoch // unit) * unit
        if steps == total:
            return None
        in_vector_steps = f", in whole vector steps of the {n} envs" if n > 1 else ""
        how = ([f"a warm-up of {warm} (learning_starts{in_vector_steps})"] if warm else []) + (
            [] if offline else [f"whole collects of {unit} (collect_steps {self.resolved_collect_steps}"
                                f"{in_vector_steps})"]) + (
            [f"{count} epochs of {per_epoch} (test_every_timesteps)"] if count > 1 else [])
        unit_name = "gradient steps" if offline else "env steps"
        since = f" in all, from the checkpoint's {start}" if start else ""
        return RoundedBudget(total, steps, f"total_timesteps {total} is taken as {', then '.join(how)}: the run takes "
                                           f"{steps} {unit_name}{since}"
                           + (", fewer if stop_at_return ends it first" if self.stop_at_return is not None else ""))

    def to_dict(self) -> dict[str, Any]:
        return configkit.to_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TianshouConfig":
        config = configkit.from_dict(cls, data)
        config.check_shared()
        family = config.environment.family or "gymnasium"
        if family not in FAMILIES:
            raise ConfigError("environment.family", one_of(family, list(FAMILIES)))
        config.environment.family = family
        config.environment.env_id = config.resolved_env_id  # the run's config says which env it plays
        # null: the worker's own defaults, written into the run's config
        if config.total_timesteps is None:
            config.total_timesteps = DEFAULT_TOTAL_TIMESTEPS
        if config.num_envs is None:
            config.num_envs = 1
        if config.learning_rate is None:
            config.learning_rate = DEFAULT_LEARNING_RATE
        if config.batch_size is None:
            config.batch_size = DEFAULT_BATCH_SIZE
        if not config.hidden_sizes or any(h < 1 for h in config.hidden_sizes):
            raise ConfigError("hidden_sizes", f"{config.hidden_sizes!r}: one or more positive layer sizes")
        config.algo_params = check_params(config)
        check_schedule(config)
        check_budget(config)
        check_gpus(config.resources.gpus, "torch", max_gpus=1)  # one torch device for every network
        return config

    @property
    def device(self) -> str:
        """The torch device the networks train on: the CPU, or the first GPU torch sees."""
        return "cuda:0" if self.resources.gpus > 0 else "cpu"

    def tianshou_kwargs(self) -> dict[str, Any]:
        """``algo_params`` with the shared hyperparameters Tianshou takes by keyword (``gamma``)."""
        kwargs = dict(self.algo_params)
        if self.gamma is not None:
            kwargs["gamma"] = float(self.gamma)
        return kwargs

    def split_params(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Tianshou's keyword arguments as (policy keyword arguments, algorithm keyword arguments)."""
        params = tianshou_params(self.algo.name)
        policy_cls = class_name(self.algo.policy_class)
        kwargs = self.tianshou_kwargs()
        policy = {k: v for k, v in kwargs.items() if params[k].owner == policy_cls}
        return policy, {k: v for k, v in kwargs.items() if k not in policy}


def check_params(config: TianshouConfig) -> dict[str, Any]:
    params = tianshou_params(config.algorithm)
    checked = {}
    for name, value in config.algo_params.items():
        field = f"algo_params.{name}"
        reason = next((why for fixed, _, why in config.algo.fixed if fixed == name), None)
        if reason:
            raise ConfigError(field, f"is set by the worker for {config.algorithm}: {reason}")
        if name in BUILT:
            raise ConfigError(field, "is built by the worker (networks, spaces, optimisers and data sets: "
                                     "hidden_sizes, learning_rate, offline_data and the env set them)")
        if name not in params:
            raise unknown_option("algo_params", name, sorted(params), f"Tianshou's {config.algorithm}")
        if name == "gamma" and config.gamma is not None:
            raise ConfigError(field, "sets Tianshou's gamma, as the top-level 'gamma' does: set it once; "
                                     "allowed: the top-level 'gamma' or algo_params.gamma, not both")
        checked[name] = params[name].check(value, field)
    if config.gamma is not None and "gamma" not in params:
        raise ConfigError("gamma", f"{config.algorithm}'s Tianshou classes take no gamma; allowed: null")
    return checked


def check_schedule(config: TianshouConfig) -> None:
    """The epsilon schedule and the tests: only where Tianshou has what they set."""
    schedule = config.eps_schedule
    if schedule is not None:
        if config.algorithm != "dqn":
            raise ConfigError("eps_schedule", f"is for dqn (epsilon-greedy exploration); {config.algorithm} "
                                              f"does not explore with an epsilon")
        if "eps_training" in config.algo_params:
            raise ConfigError("eps_schedule", "sets eps_training itself; remove algo_params.eps_training "
                                              "or the schedule")
        if schedule.end_at <= schedule.begin_at:
            raise ConfigError("eps_schedule.end_at", f"{schedule.end_at} is not after begin_at "
                                                     f"({schedule.begin_at})")
    if config.classic and config.algorithm != "dqn":
        raise ConfigError("algorithm", f"classic games train one seat with dqn here (Tianshou's multi-agent "
                                       f"off-policy algorithm); {config.algorithm} is not offered for them")
    if config.classic and config.fastlane.enabled:
        raise ConfigError("fastlane.enabled", "live frames of classic games while training are not offered; "
                                              "use mosaic eval --fastlane on a checkpoint")
    if config.learner_seat is not None and not config.classic:
        raise ConfigError("learner_seat", "is for classic games (environment.family: classic)")
    if config.algo.expert_data and config.offline_data.policy == "random":
        raise ConfigError("offline_data.policy", f"{config.algorithm} imitates an expert: give a checkpoint (or run "
                                                 f"folder) of a trained tianshou run on the same env, whose policy "
                                                 f"records the expert data; allowed: a checkpoint, not 'random'")
    if config.offline_data.exploration_noise and config.offline_data.policy == "random":
        raise ConfigError("offline_data.exploration_noise", "is for a checkpoint policy's data set; random actions "
                                                            "have no exploration noise; allowed: false")
    if config.stop_at_return is not None and not config.test_every_timesteps:
        raise ConfigError("stop_at_return", "needs tests to stop on: set test_every_timesteps (env steps "
                                            "between tests) too")


def check_budget(config: TianshouConfig) -> None:
    """Budgets Tianshou would accept and then not learn on."""
    total, kind = config.total_timesteps, config.algo.kind
    if kind == "on_policy" and total < config.resolved_collect_steps:
        raise ConfigError("total_timesteps", f"{total} is less than one rollout ({config.resolved_collect_steps} "
                                             f"env steps, collect_steps): {config.algorithm} would not update once")
    if kind == "off_policy" and config.resolved_learning_starts >= total:
        raise ConfigError("learning_starts", f"{config.resolved_learning_starts} env steps is not below "
                                             f"total_timesteps ({total}): nothing would be learned")
    if kind == "off_policy" and config.resolved_learning_starts < (config.batch_size or 0):
        raise ConfigError("learning_starts", f"{config.resolved_learning_starts} env steps cannot fill one batch "
                                             f"of {config.batch_size} (batch_size)")
    if config.num_envs > config.resolved_collect_steps:
        raise ConfigError("num_envs", f"{config.num_envs} envs take more than one collection step of "
                                      f"{config.resolved_collect_steps} env steps (collect_steps)")
