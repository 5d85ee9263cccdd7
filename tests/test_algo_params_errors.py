"""The same bad ``algo_params`` get the same-shaped refusal from every training worker.

Each training worker passes its library's own options through ``algo_params`` (RLlib's settings, XuanCe's
yaml keys, a CleanRL script's flags, Tianshou's keyword arguments, Jumanji's yaml sections, the fields of
BenchMARL's config dataclasses), every one typed and checked by the worker kit's one upstream option
(``mosaic.workerkit.options``). A negative rate, a string for a count, a value outside an option's choices and
an unknown key are refused by ``mosaic run --dry-run`` (the real command line, the worker's own environment;
nothing trains) with exit 2 and one line naming the field and the allowed values, worded the same way whichever
worker refuses them.

The choices: RLlib's and XuanCe's activations are closed sets of names, and so are BenchMARL's critic losses
(TorchRL's distances); CleanRL's, Tianshou's and Jumanji's options hold no string with a closed set, so their
choices are a boolean's (true or false).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mosaic.testing import worker_env_for_tests
from mosaic.testing.worker_homes import WorkerHome

from cli_support import REPO, run_cli

UNKNOWN = "no_such_option"

#: worker -> (algorithm, library, (rate option, allowed), (count option, allowed), (option with choices, allowed))
WORKERS = {
    "ray": ("ppo", "RLlib", ("lr", "a number > 0 and <= 1"), ("num_epochs", "an integer >= 1"),
            ("fcnet_activation", "tanh, relu, swish, silu, elu, linear")),
    "xuance": ("mappo", "XuanCe", ("learning_rate", "a number >= 0"), ("n_epochs", "an integer >= 1"),
               ("activation", "relu, leaky_relu, tanh")),
    "cleanrl": ("ppo", "CleanRL", ("learning_rate", "a number >= 0"), ("num_steps", "an integer >= 1"),
                ("norm_adv", "true or false")),
    "tianshou": ("dqn", "Tianshou", ("eps_training", "a number from 0 to 1"),
                 ("n_step_return_horizon", "an integer >= 1"), ("is_double", "true or false")),
    "jumanji": ("ppo", "Jumanji", ("learning_rate", "a number > 0"), ("update_epochs", "an integer >= 1"),
                ("normalize_advantage", "true or false")),
    "benchmarl": ("mappo", "BenchMARL", ("lr", "a number >= 0"), ("on_policy_n_minibatch_iters", "an integer >= 1"),
                  ("loss_critic_type", "l2, l1, smooth_l1")),
}
CASES = ("negative rate", "string for a count", "outside the choices", "unknown key")


@pytest.fixture(scope="module")
def homes() -> dict[str, Path]:
    """A MOSAIC_HOME per worker, made by :func:`home_for` when its first test runs."""
    return {}


def home_for(worker: str, homes: dict[str, Path], tmp_path_factory) -> Path:
    """The Ray worker runs in MOSAIC's own environment; the others in their own (``var/envs``, built by
    ``scripts/bootstrap``, or built for the tests)."""
    if worker not in homes:
        root = tmp_path_factory.mktemp(f"home-{worker}")
        if worker != "ray":
            env = worker_env_for_tests(worker, REPO, lambda: tmp_path_factory.mktemp(f"{worker}-env-home"))
            WorkerHome.create(root, worker, env)
        homes[worker] = root
    return homes[worker]


def refusal(home: Path, worker: str, algorithm: str, params: dict) -> str:
    """The one line ``mosaic run --dry-run`` refuses a config with these ``algo_params`` with (exit 2)."""
    config = home / f"{worker}-bad.json"
    config.write_text(json.dumps({"worker": worker, "algorithm": algorithm, "algo_params": params}))
    proc = run_cli("run", "--dry-run", str(config), home=home, timeout=900)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("mosaic: error: "), lines[0]
    return lines[0].removeprefix("mosaic: error: ")


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("worker", list(WORKERS))
def test_the_same_bad_value_gets_the_same_refusal_from_every_worker(worker, case, homes, tmp_path_factory):
    algorithm, library, rate, count, choice = WORKERS[worker]
    home = home_for(worker, homes, tmp_path_factory)
    if case == "unknown key":
        line = refusal(home, worker, algorithm, {UNKNOWN: 1})
        found = re.fullmatch(rf"algo_params\.{UNKNOWN}: is not an option of {library}'s [\w. ]*(?i:{algorithm})"
                             r"[\w. ]*; allowed: (.+)", line)
        assert found, line
        assert {rate[0], count[0], choice[0]} <= set(found.group(1).split(", ")), line
        return
    (key, allowed), value = {"negative rate": (rate, -0.1), "string for a count": (count, "ten"),
                             "outside the choices": (choice, "nope")}[case]
    line = refusal(home, worker, algorithm, {key: value})
    # a closed set lists the installed library's names: those above first, then maybe more
    assert re.fullmatch(rf"algo_params\.{key}: {re.escape(repr(value))} is not allowed for {library}'s {key} "
                        rf"\(default [^()]+\); allowed: {re.escape(allowed)}(, \w+)*", line), line
