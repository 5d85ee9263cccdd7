"""W&B tracking of a CleanRL run, offline: the script's own ``--track``, its files in the run folder.

One real ppo run on CartPole-v1 with ``wandb: true`` (shared by the module): the unmodified
script calls ``wandb.init(sync_tensorboard=True, monitor_gym=True, save_code=True)``, and W&B
writes an offline run under ``<run>/wandb/`` holding the script's arguments as its config
and the TensorBoard scalars the script wrote. The test sets no ``WANDB_MODE``: the worker
must set it from ``wandb_mode``. Every address W&B could reach (its API URL, the HTTP(S)
proxies) points at a local listener that records connections, so a run that tried the
network fails the test instead of leaving the machine; there is no API key. ``mosaic run`` is
started from an environment holding ``WANDB_SERVICE`` of another live W&B process, as a
notebook's or an RLlib driver's would: the run must not attach to that service.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from crl_support import TINY, THREADS, Home, events
from mosaic.workerkit.wandb_offline import NetworkTrap, offline_runs, read_offline_run, trapped_environment


@pytest.fixture(scope="module")
def no_network(tmp_path_factory):
    """W&B's environment for the tests: its API and every proxy at the listener; no key; its own dirs."""
    listener = NetworkTrap()
    yield listener, trapped_environment(listener, tmp_path_factory.mktemp("wandb-settings"))
    listener.close()


@pytest.fixture(scope="module")
def launching_process_service(tmp_path_factory, no_network):
    """``WANDB_SERVICE`` of a live process that used W&B itself (a notebook, an RLlib driver), as the shell
    that runs ``mosaic run`` would inherit it: the worker's run must start its own service, not attach to this
    one (it did, and its offline run lost its project)."""
    _, env = no_network
    folder = tmp_path_factory.mktemp("launcher-wandb")
    code = ("import os, sys, wandb; wandb.init(mode='offline', project='the-launchers', dir=sys.argv[1]); "
            "print(os.environ['WANDB_SERVICE'], flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
    token = proc.stdout.readline().strip()
    assert token, "the launching process's W&B service did not start"
    yield token
    proc.stdin.close()
    proc.wait(120)


@pytest.fixture(scope="module")
def tracked(tmp_path_factory, cleanrl_env, no_network, launching_process_service):
    """One tiny ppo run with ``wandb: true`` through ``mosaic run``: (process, run folder, home)."""
    listener, env = no_network
    home = Home.create(tmp_path_factory.mktemp("wandb-home") / "home", "cleanrl", cleanrl_env)
    config = home.config("ppo-wandb", algorithm="ppo", seed=1, resources={"threads": THREADS}, **TINY["ppo"],
                         learning_rate=0.0007, wandb=True, wandb_project="crl-test")
    proc = home.cli("run", str(config), env={**env, "WANDB_SERVICE": launching_process_service})
    return proc, home.runs()[-1], home


def test_the_scripts_own_wandb_run_lands_offline_in_the_run_folder(tracked, no_network):
    proc, run, _ = tracked
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert events(run, "run_completed")
    started = events(run, "run_started")[0]
    assert started["command"][started["command"].index("--track") + 1] == "True"
    assert started["versions"]["wandb"] == "0.31.0"

    found = offline_runs(run)
    assert len(found) == 1, sorted(p.name for p in (run / "wandb").iterdir())  # WANDB_DIR is the run folder
    manifest = json.loads((run / "analytics.json").read_text())
    assert manifest["artefacts"]["wandb"] == [str(found[0].relative_to(run))]

    wb = read_offline_run(found[0])
    assert wb.project == "crl-test"  # --wandb-project-name from wandb_project
    # W&B's config is the script's args: MOSAIC's top-level learning_rate arrived as --learning-rate
    assert json.loads(wb.config["learning_rate"]) == 0.0007 and json.loads(wb.config["track"]) is True
    assert json.loads(wb.config["total_timesteps"]) == TINY["ppo"]["total_timesteps"]
    # sync_tensorboard: the scalars the script wrote to its SummaryWriter are the W&B run's history
    assert {"losses/value_loss", "charts/episodic_return", "charts/SPS"} <= wb.logged, sorted(wb.logged)
    assert (run / "runs").is_dir() and list(run.glob("runs/*/events.out.tfevents.*"))  # TensorBoard as before

    listener, _ = no_network
    assert listener.connections == [], listener.connections  # nothing tried the network


def test_online_without_an_api_key_is_refused_before_the_run(tracked, no_network):
    _, _, home = tracked
    _, env = no_network
    before = home.runs()
    proc = home.cli("run", str(home.config("online", algorithm="ppo", wandb=True, wandb_mode="online")), env=env)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mosaic: error: wandb_mode: "), proc.stderr
    assert "API key" in lines[0] and "allowed: offline" in lines[0]
    assert home.runs() == before
