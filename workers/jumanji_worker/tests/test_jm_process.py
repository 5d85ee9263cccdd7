"""A Jumanji run as a process: the conformance kit, a cancel while JAX compiles.

What these runs check is the process and its telemetry, not what is learned: except the cancel while compiling
(which needs a long compile), they compile with XLA's optimisations off (jm_support.QUICK_COMPILE).

(Pause, resume and Ctrl-C of a training run: test_jm_tsp.py, on the run its tests share.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from jm_support import QUICK_COMPILE, STEPS_PER_EPOCH, TINY
from mosaic.testing import check_worker, run_events, wait_until


def test_conformance(home):
    """The run, its own stdout, bad input and every shared flag, in the worker's environment (the random
    agent for one epoch: the quickest run)."""
    report = check_worker("jumanji", {"algorithm": "random", "seed": 1, "total_timesteps": STEPS_PER_EPOCH,
                                      **TINY["tsp"]},
                          home=home.root, bad_config={"network": {"transformer_num_blocks": "two"}}, env=QUICK_COMPILE)
    (metrics,) = report.of_type("metrics")
    assert metrics["timesteps_total"] == STEPS_PER_EPOCH and "learner" not in metrics  # random: nothing learned
    assert metrics["measures"]["tour_length"] > 0
    assert report.of_type("checkpoint_saved")


def test_sigterm_while_jax_compiles_ends_the_run_within_seconds(home):
    """BinPack's full-size network takes minutes to compile on this machine; a SIGTERM during it reaches
    MOSAIC at once (the signal relay), and the watchdog ends the run without waiting for the compiler."""
    run_id = "jumanji-compiling-1"
    config = home.config("compiling", environment={"family": "jumanji", "env_id": "bin_pack"}, seed=5,
                         total_timesteps=100_000, eval_episodes=50, greedy_eval_episodes=50,
                         reporting={"heartbeat_interval_s": 0.5})
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", run_id],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MOSAIC_HOME": str(home.root)})
    run = home.root / "trainer" / "runs" / run_id
    try:
        wait_until(lambda: run_events(run, "run_started") and run_events(run, "heartbeat"), 600,
                   "the run to start compiling", interval=0.2, proc=proc)
        assert not run_events(run, "metrics")
        os.kill(json.loads((run / "analytics.json").read_text())["pid"], signal.SIGTERM)
        sent = time.monotonic()
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 3 and time.monotonic() - sent < 30
    events = run_events(run)
    assert events[-1]["type"] == "run_cancelled" and "SIGTERM" in events[-1].get("reason", "")
    assert not [e for e in events if e["type"] == "metrics"]


@pytest.fixture(scope="module")
def random_epoch(module_home):
    """One epoch of the random agent on TSP (the quickest to compile): its checkpoint is resumed and restored
    into configs it does not fit by the tests below."""
    proc, first = module_home.run("tsp", algorithm="random", total_timesteps=STEPS_PER_EPOCH, xla=QUICK_COMPILE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (saved,) = module_home.events(first, "checkpoint_saved")
    return saved


def test_a_resumed_run_starts_with_run_started_and_logs_the_restore_after_it(module_home, random_epoch):
    """A second epoch from the first one's checkpoint."""
    saved = random_epoch
    proc, resumed = module_home.run("tsp", algorithm="random", checkpoint={"restore_from": saved["path"]},
                                    xla=QUICK_COMPILE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = run_events(resumed)
    assert events[0]["type"] == "run_started" and events[0]["restored_from"] == saved["path"]
    assert any(e["type"] == "log" and e["message"].startswith(f"restored from {saved['path']} at epoch 1")
               for e in events)
    (m,) = run_events(resumed, "metrics")
    assert (m["iteration"], m["timesteps_total"]) == (2, 2 * STEPS_PER_EPOCH)


@pytest.mark.parametrize("fields, differs", [
    ({"algorithm": "a2c"}, "algorithm random; this config has algorithm a2c"),
    ({"algorithm": "random", "environment": {"family": "jumanji", "env_id": "cvrp"}, "network": {}},
     "env tsp; this config has env cvrp"),
])
def test_a_checkpoint_into_another_algorithm_or_env_is_refused_before_any_run(module_home, random_epoch, fields,
                                                                              differs):
    """`mosaic run` and `--dry-run` exit 2, one line naming checkpoint.restore_from and what differs; no run."""
    runs = module_home.runs()
    config = module_home.config("mismatch", **{**TINY["tsp"], "total_timesteps": 2 * STEPS_PER_EPOCH, **fields,
                                               "checkpoint": {"restore_from": random_epoch["path"]}})
    for flags in ((), ("--dry-run",)):
        proc = module_home.cli("run", str(config), *flags)
        assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-3000:])
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"mosaic: error: checkpoint.restore_from: was trained with {differs}; allowed: "), line
        assert module_home.runs() == runs


def test_a_run_never_imports_neptune_which_jumanji_imports_for_a_logger_mosaic_does_not_use(home):
    """jumanji.training.loggers imports Neptune at its top (seconds of every run's start); the worker defers it
    (mosaic.workerkit.deferred) to a first use, and Jumanji's NeptuneLogger would still find the real client."""
    lines = home.probe("from jumanji_worker.runtime import prepare_process; "
                       "from jumanji_worker.config import JumanjiConfig\n"
                       "from mosaic.workerkit.deferred import is_deferred\n"
                       "prepare_process(JumanjiConfig(run_id='probe'))\n"
                       "import jumanji.training.train, jumanji.training.loggers as loggers\n"
                       "print(is_deferred('neptune'), is_deferred('neptune.new'))\n"
                       "print(loggers.neptune.init_run.__module__, is_deferred('neptune.new'))\n")
    assert lines[:2] == ["True True", "neptune.new.internal.init.run False"], lines


def test_eval_shows_its_episodes_on_a_terminal(module_home, random_epoch):
    """`mosaic eval` of a Jumanji checkpoint draws its episodes' progress on a terminal, as every worker's eval
    does; one batched call plays them all, so the line goes from none to all of them."""
    from mosaic.testing.terminal import run_on_terminal

    done = run_on_terminal(["eval", random_epoch["path"], "--episodes", "3"], module_home.root, env=QUICK_COMPILE)
    assert done.returncode == 0, done.terminal[-3000:]
    assert "[####################] 3/3 episodes · " in done.terminal, done.terminal[-2000:]
    assert "3/3 episodes" not in done.stdout  # the results stay on stdout, the line on the terminal
