"""A tuning study through the real training workers: each sampled value reaches the library under its own name,
and each trial's score is its cells' telemetry.

One study, run once for the module: its contenders are the five workers that train (RLlib, XuanCe, CleanRL,
Tianshou, Jumanji), each on its smallest env and algorithm at the same tiny budget (a study refuses unequal ones).
The space is the shared ``learning_rate`` (each worker maps it to its library) and, per worker, its library's
entropy coefficient under the worker's own config path (``tuning.extra``). Two trials per contender on one tuning
seed, two in flight at once, through a real daemon; once the study adds its test cells (every trial has ended) the
experiment is cancelled: the test phase is the coordinator's loop again, and costs 25 runs.

Then, for every trial cell of every worker (a test per worker, so a failure names it):

* the values Optuna holds for the trial (read from the study's own storage) are in the run's recorded config,
  and the worker's ``--dry-run`` of that config, in the worker's own interpreter, shows them under the library's
  names (RLlib ``training.lr``, XuanCe ``learning_rate``, CleanRL ``--learning-rate`` ...); Tianshou's dry run
  shows no learning rate, so its algorithm is built from the recorded config and its optimiser's ``lr`` read;
* Optuna's value for the trial is the score recomputed here from the run's ``telemetry.jsonl``: the mean of
  ``episode_return_mean`` over the last ``score.final_fraction`` of the run's env steps (not through
  ``mosaic.experiments.results``; the spec sets half, so the window holds more than a run's last point).
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from cli_support import REPO
from mosaic.testing.waiting import wait_until

pytestmark = pytest.mark.slow

#: CleanRL first: the runs the daemon starts before the cancel are the first test cells, contender 0's,
#: and CleanRL's worker honours a SIGTERM at once (RLlib's, still starting Ray, used the whole 10 s cancel wait).
WORKERS = ("cleanrl", "ray", "xuance", "tianshou", "jumanji")
#: The same env-step budget for every contender, a whole number of each library's updates (two of 50 env steps;
#: Jumanji: five epochs of 20), so none rounds it: each dry run below has no rounding warning, and each run's
#: telemetry ends at exactly this many env steps. (`mosaic experiment plan` compares the budgets as written: at 50,
#: Jumanji's dry run says it runs 3 epochs, 60 env steps, and the plan still calls the budgets equal.)
BUDGET = 100
TRIALS = 2
SPREAD = {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
          "env_kwargs": {"N": 2, "max_cycles": 25}}
CARTPOLE = {"family": "gymnasium", "env_id": "CartPole-v1"}
#: Each worker's entropy coefficient, under its own config path (the library's name for it).
ENTROPY = {"ray": "algo_params.entropy_coeff", "xuance": "algo_params.ent_coef", "cleanrl": "algo_params.ent_coef",
           "tianshou": "algo_params.ent_coef", "jumanji": "algo_params.l_en"}
SPEC: dict[str, Any] = {
    "name": "tuned-workers", "seeds": [0, 1, 2, 3, 4], "axes": {"worker": list(WORKERS)},
    "settings": {"total_timesteps": BUDGET},
    "base": {  # each worker's tiny config of its own tests, smaller still
        "ray": {"algorithm": "ppo", "environment": SPREAD, "rllib": {"num_env_runners": 0},
                "algo_params": {"train_batch_size_per_learner": 50, "minibatch_size": 25, "num_epochs": 1,
                                "fcnet_hiddens": [32, 32]}},
        "xuance": {"algorithm": "ippo", "environment": SPREAD, "num_envs": 2, "batch_size": 50,
                   "reporting": {"every_timesteps": 50}},
        "cleanrl": {"algorithm": "ppo", "environment": CARTPOLE, "resources": {"threads": 1},
                    "algo_params": {"num_envs": 2, "num_steps": 25}},
        "tianshou": {"algorithm": "ppo", "environment": CARTPOLE, "collect_steps": 50, "repeat_per_collect": 1,
                     "batch_size": 25, "reporting": {"every_timesteps": 50}},
        "jumanji": {"algorithm": "a2c", "environment": {"family": "jumanji", "env_id": "tsp"}, "n_steps": 5,
                    "num_envs": 2, "num_learner_steps_per_epoch": 2, "eval_episodes": 4, "greedy_eval_episodes": 4,
                    "network": {"transformer_num_blocks": 1, "transformer_num_heads": 2, "transformer_key_size": 8,
                                "transformer_mlp_units": [32]}},
    },
    # half the budget: the window then holds two or more of each run's points (at 10%, only its last)
    "score": {"metric": "episode_return_mean", "final_fraction": 0.5},
    "tuning": {"space": {"learning_rate": {"type": "log_uniform", "low": 1e-4, "high": 1e-2}},
               "extra": {w: {path: {"type": "uniform", "low": 0.0, "high": 0.05}} for w, path in ENTROPY.items()},
               "trials": TRIALS, "seeds": [100], "parallel": 2, "sampler": {"name": "random", "seed": 7}},
}
METRIC, FINAL_FRACTION = SPEC["score"]["metric"], SPEC["score"]["final_fraction"]

#: Tianshou's dry run shows its classes' keyword arguments, not the optimiser's: the algorithm is built from the
#: recorded config, in the worker's interpreter, and its optimisers' learning rates read from Tianshou's own state.
#: One interpreter for all the trials' configs (a JSON list on stdin; a JSON list out).
TIANSHOU_BUILT = """
import json, sys
from tianshou_worker.config import TianshouConfig
from tianshou_worker.runtime import build_algorithm, probe_env
out = []
for data in json.loads(sys.stdin.read()):
    config = TianshouConfig.from_dict(data)
    algo = build_algorithm(config, probe_env(config))
    lrs = [group["lr"] for optim in algo.state_dict()["_optimizers"] for group in optim["param_groups"]]
    out.append({"class": type(algo).__name__, "lr": lrs, "ent_coef": algo.ent_coef})
print(json.dumps(out))
"""


# -- the study, run once --------------------------------------------------------------------------------
def _stop_daemon(home: Path) -> None:
    from mosaic.testing.daemon import stop_home_daemon

    stop_home_daemon(home)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The study run through a real daemon up to its test phase, then cancelled; its experiment and home."""
    from mosaic.host import environments as worker_envs
    from mosaic.testing import worker_env_for_tests

    home = tmp_path_factory.mktemp("studies") / "home"
    (home / "envs").mkdir(parents=True)
    for worker in WORKERS:
        if not worker_envs.scan().get(worker).declared:  # RLlib's worker runs in MOSAIC's own interpreter
            continue
        env = worker_env_for_tests(worker, REPO, lambda w=worker: tmp_path_factory.mktemp(f"{w}-env"))
        (home / "envs" / worker).symlink_to(env, target_is_directory=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MOSAIC_HOME", str(home))
        try:
            yield _run_until_tested(home)
        finally:
            _stop_daemon(home)


def _run_until_tested(home: Path) -> dict[str, Any]:
    from mosaic.experiments import coordinator
    from mosaic.experiments.backends import backend_for
    from mosaic.experiments.plan import make_plan
    from mosaic.experiments.spec import parse_spec
    from mosaic.experiments.store import ExperimentStore

    started = time.monotonic()
    spec = parse_spec(SPEC)
    plan = make_plan(spec)  # each worker checks its sample cell; the budgets are compared
    budgets = {c["worker"]: c["sample"]["total_timesteps"] for c in plan.study["contenders"]}
    assert budgets == {w: BUDGET for w in WORKERS}, budgets
    exp = ExperimentStore(home).create(plan, spec.source)
    backend = backend_for("local", home)
    cancelled_at: list[float] = []

    def report(progress) -> None:
        if not cancelled_at and any(c.cell_id.startswith("c") for c in exp.plan.cells):
            exp.log("cancel")  # every trial has ended: the test phase is not this test's
            cancelled_at.append(time.monotonic())

    try:
        code = coordinator.run(exp, backend, report=report)
        assert code == coordinator.EXIT_CANCELLED, code
        tests = [a.run_id for c in exp.cells().values() if not c.cell_id.startswith("k") for a in c.attempts]

        def ended() -> bool:
            statuses = backend.status(tests)
            return all(s is None or s[0] in ("completed", "failed", "cancelled") for s in statuses.values())

        wait_until(ended, 120, "the cancelled test cells' runs to end")
    finally:
        backend.close()
    timing = {"to_test_phase_s": round(cancelled_at[0] - started, 1) if cancelled_at else None,
              "total_s": round(time.monotonic() - started, 1)}
    print(f"study timing: {timing}")
    return {"home": home, "exp": exp, "timing": timing}


# -- reading back ---------------------------------------------------------------------------------------
def _optuna_trials(exp, worker: str) -> list[Any]:
    """The contender's trials as Optuna's own storage holds them (the study ``NAME:worker=W`` in its journal)."""
    import optuna
    from optuna.storages.journal import JournalFileBackend

    storage = optuna.storages.JournalStorage(JournalFileBackend(str(exp.root / "study.journal")))
    loaded = optuna.load_study(study_name=f"{exp.name}:worker={worker}", storage=storage)
    return sorted(loaded.get_trials(deepcopy=True), key=lambda t: t.number)


def _score_from_telemetry(telemetry: Path) -> float:
    """The mean of ``episode_return_mean`` over the metrics events in the run's last ``FINAL_FRACTION`` of env
    steps (those at ``timesteps_total >= (1 - FINAL_FRACTION) * the last``)."""
    points = []
    for line in telemetry.read_text().splitlines():
        event = json.loads(line)
        if event.get("type") != "metrics":
            continue
        x, y = event.get("timesteps_total"), event.get(METRIC)
        if isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isfinite(y):
            points.append((float(x), float(y)))
    assert points, f"{telemetry.parent.name} logged no {METRIC} against timesteps_total"
    xs = [x for x, _ in points]
    assert xs == sorted(set(xs)), f"{telemetry.parent.name}: env steps not increasing: {xs}"
    assert xs[-1] == BUDGET, f"{telemetry.parent.name} trained {xs[-1]:g} env steps, not the study's {BUDGET}"
    window = [y for x, y in points if x >= (1 - FINAL_FRACTION) * xs[-1]]
    assert len(window) >= 2, f"{telemetry.parent.name}: {points}"
    return math.fsum(window) / len(window)


def _dry_run(worker: str, config: dict[str, Any]) -> dict[str, Any]:
    """``--dry-run`` of ``config`` by the worker's own command (its environment's interpreter) as the launcher
    runs it."""
    from mosaic.host.discovery import discover_workers
    from mosaic.host.launcher import worker_command

    command = worker_command(discover_workers(only=worker).get(worker))
    proc = subprocess.run([*command, "--dry-run", "--config", "-"], input=json.dumps(config), capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown, _ = json.JSONDecoder().raw_decode(proc.stdout[proc.stdout.index("{"):])
    assert "warnings" not in shown, shown["warnings"]  # e.g. a budget the library rounds
    return shown


def _tianshou_built(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tianshou's algorithm built from each recorded config, in the worker's interpreter (one for them all)."""
    from mosaic.host.discovery import discover_workers

    python = discover_workers(only="tianshou").get("tianshou").python
    proc = subprocess.run([python, "-W", "ignore", "-c", TIANSHOU_BUILT], input=json.dumps(configs),
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    built = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(built) == len(configs), built
    return built


def _in_library(worker: str, config: dict[str, Any], built: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the library is given, under its own names, for the learning rate and the entropy coefficient
    (Tianshou's: ``built``, what :func:`_tianshou_built` gave for ``config``)."""
    shown = _dry_run(worker, config)
    if worker == "ray":  # AlgorithmConfig.training(lr=..., entropy_coeff=...)
        training = shown["rllib"]["training"]
        return {"lr": training["lr"], "entropy_coeff": training["entropy_coeff"]}
    if worker == "xuance":  # the arguments XuanCe's runner is built with (its yaml's names)
        args = shown["xuance_arguments"]
        return {"learning_rate": args["learning_rate"], "ent_coef": args["ent_coef"]}
    if worker == "cleanrl":  # the command line of CleanRL's ppo.py
        argv = shown["command"]
        assert argv[:2] == ["-m", "cleanrl.ppo"], argv
        flags = dict(zip(argv[2::2], argv[3::2]))
        return {"--learning-rate": float(flags["--learning-rate"]), "--ent-coef": float(flags["--ent-coef"])}
    if worker == "tianshou":  # PPO(ent_coef=...) from the dry run; the optimiser's lr from the built algorithm
        assert built is not None
        assert built["class"] == shown["tianshou_algorithm"] == "PPO", (built, shown["tianshou_algorithm"])
        assert len(set(built["lr"])) == 1, built
        assert built["ent_coef"] == shown["algorithm_kwargs"]["ent_coef"], (built, shown["algorithm_kwargs"])
        return {"lr": built["lr"][0], "ent_coef": shown["algorithm_kwargs"]["ent_coef"]}
    if worker == "jumanji":  # the config hydra composes for jumanji.training, and the overrides that set it
        a2c = shown["jumanji_config"]["env"]["a2c"]
        overrides = dict(o.split("=", 1) for o in shown["hydra_overrides"])
        assert float(overrides["env.a2c.learning_rate"]) == a2c["learning_rate"], overrides
        assert float(overrides["env.a2c.l_en"]) == a2c["l_en"], overrides
        return {"learning_rate": a2c["learning_rate"], "l_en": a2c["l_en"]}
    raise AssertionError(worker)


#: worker -> the library's names of (learning_rate, the entropy coefficient), as _in_library returns them
LIBRARY_NAMES = {"ray": ("lr", "entropy_coeff"), "xuance": ("learning_rate", "ent_coef"),
                 "cleanrl": ("--learning-rate", "--ent-coef"), "tianshou": ("lr", "ent_coef"),
                 "jumanji": ("learning_rate", "l_en")}


def _get(config: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        config = config[part]
    return config


# -- the checks, per worker -----------------------------------------------------------------------------
@pytest.mark.parametrize("worker", WORKERS)
def test_each_sampled_value_reaches_the_library_and_each_trial_is_scored_from_telemetry(study, worker):
    from mosaic.runs import RunStore

    exp, store = study["exp"], RunStore(study["home"])
    contender = WORKERS.index(worker)
    trials = _optuna_trials(exp, worker)
    assert [(t.number, t.state.name) for t in trials] == [(n, "COMPLETE") for n in range(TRIALS)], \
        [(t.number, t.state.name, t.user_attrs) for t in trials]
    plan_cells = {c.cell_id: c for c in exp.plan.cells}
    cells = exp.cells()
    lr_name, entropy_name = LIBRARY_NAMES[worker]
    checked = []  # (trial, its run, its recorded config, where) once its cell and config are checked
    for trial in trials:
        assert set(trial.params) == {"learning_rate", ENTROPY[worker]}, trial.params
        cell_id = f"k{contender}t{trial.number:03d}s0"
        cell = plan_cells[cell_id]
        assert (cell.worker, cell.trial, cell.seed) == (worker, trial.number, 100), cell
        (attempt,) = cells[cell_id].attempts
        assert attempt.state == "completed", attempt
        run = store.get(attempt.run_id)
        recorded = run.read_config()
        where = f"{worker} trial {trial.number} ({attempt.run_id})"
        # the sampled values, in the worker's config as the run recorded it ...
        assert recorded["learning_rate"] == trial.params["learning_rate"], where
        assert _get(recorded, ENTROPY[worker]) == trial.params[ENTROPY[worker]], where
        assert (recorded["total_timesteps"], recorded["seed"]) == (BUDGET, 100), where
        checked.append((trial, run, recorded, where))
    built = _tianshou_built([c[2] for c in checked]) if worker == "tianshou" else [None] * len(checked)
    for (trial, run, recorded, where), library in zip(checked, built):
        # ... and in what the library is given, under its own names
        given = _in_library(worker, recorded, library)
        assert given == {lr_name: trial.params["learning_rate"], entropy_name: trial.params[ENTROPY[worker]]}, \
            (where, given, trial.params)
        # the trial's score is its (one) cell's, read from the run's telemetry: kept per seed, and told to Optuna
        score = _score_from_telemetry(run.telemetry_path)
        assert trial.user_attrs.get("seed_scores") == [pytest.approx(score, rel=1e-12)], (where, trial.user_attrs)
        assert trial.value == pytest.approx(score, rel=1e-12), (where, trial.user_attrs)
    # two trials, two points of the space
    assert trials[0].params != trials[1].params
