"""Every env config the worker offers runs through MOSAIC: one epoch of jumanji.training's random agent each.

A2C is trained in tests on TSP and BinPack (test_jm_tsp.py, test_jm_bin_pack.py): compiling its networks takes
about a minute per env on this machine, too long for a walk of all 24. The walk shows, for every other config
Jumanji ships, that MOSAIC composes it, runs Jumanji's own loop with MOSAIC's logger, reports the epoch's
metrics and saves a checkpoint. It does not show that A2C learns there. XLA compiles with most optimisations off
(jm_support.QUICK_COMPILE): compiling is most of each run. The epoch is of one env (and one evaluation episode):
what the loop compiles is the same for any batch, and with eight the unoptimised code took seconds more to play
the long episodes of some envs (search_and_rescue, robot_warehouse, flat_pack).
"""

from __future__ import annotations

import json
import subprocess

import pytest

from jm_support import ONE_ENV_EPOCH, ONE_ENV_STEPS as STEPS_PER_EPOCH, QUICK_COMPILE

TRAINED = ("bin_pack", "tsp")  # with A2C, by the tests named above
WALKED = ("cleaner", "connector", "cvrp", "flat_pack", "game_2048", "graph_coloring", "job_shop", "knapsack", "lbf",
          "maze", "minesweeper", "mmst", "multi_cvrp", "pac_man", "robot_warehouse", "rubiks_cube",
          "search_and_rescue", "sliding_tile_puzzle", "snake", "sudoku", "tetris")
SOKOBAN = ("InstaDeepAI/boxoban-levels", "unfiltered-train.npy")  # its levels: from the Hugging Face Hub
EPOCH = {"algorithm": "random", "seed": 0, "total_timesteps": STEPS_PER_EPOCH, **ONE_ENV_EPOCH}


def test_the_walk_and_the_a2c_tests_cover_every_env_the_worker_offers(home):
    described = json.loads(subprocess.run([home.python, "-m", "jumanji_worker.cli", "--describe"],
                                          capture_output=True, text=True, timeout=300, check=True).stdout)
    assert sorted(described["envs"]["jumanji"]) == sorted(TRAINED + WALKED + ("sokoban",))


@pytest.mark.parametrize("environment", WALKED)
def test_an_epoch_runs_on_every_offered_env(home, environment):
    proc = home.cli("run", str(home.config(environment, environment={"family": "jumanji", "env_id": environment},
                                           **EPOCH)), env=QUICK_COMPILE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = home.runs()[-1]
    (started,) = home.events(run, "run_started")
    assert started["env"]["family"] == "jumanji" and started["env"]["config"] == environment
    (metrics,) = home.events(run, "metrics")
    # random: nothing learned (the env's measures of its rollouts are not learner values)
    assert metrics["timesteps_total"] == STEPS_PER_EPOCH and "learner" not in metrics
    assert isinstance(metrics["episode_return_mean"], float) and metrics["episode_len_mean"] > 0
    (saved,) = home.events(run, "checkpoint_saved")
    assert saved["iteration"] == 1
    (completed,) = home.events(run, "run_completed")
    assert completed["summary"]["timesteps_total"] == STEPS_PER_EPOCH


def _plant_levels(hf_home) -> None:
    """One Boxoban level (10x10: walls round the edge, four boxes, four targets, the agent) as the cached
    ``unfiltered-train.npy`` of a Hugging Face home, in the Hub cache's own layout."""
    import numpy as np

    fixed, variable = np.zeros((10, 10), np.uint8), np.zeros((10, 10), np.uint8)
    fixed[0, :] = fixed[-1, :] = fixed[:, 0] = fixed[:, -1] = 1  # WALL
    for row in (2, 4, 6, 7):
        fixed[row, 7] = 2  # TARGET
        variable[row, 4] = 4  # BOX
    variable[5, 2] = 3  # AGENT
    repo, filename = SOKOBAN
    commit = "0" * 40
    cache = hf_home / "hub" / f"models--{repo.replace('/', '--')}"
    (cache / "refs").mkdir(parents=True)
    (cache / "refs" / "main").write_text(commit)
    (cache / "snapshots" / commit).mkdir(parents=True)
    np.save(cache / "snapshots" / commit / filename, np.stack([fixed, variable], axis=-1)[None])


@pytest.mark.parametrize("cached", [False, True], ids=["levels-missing", "levels-cached"])
def test_sokoban_runs_an_epoch_or_fails_at_once_naming_the_levels_it_cannot_fetch(home, tmp_path, cached):
    """Jumanji's Sokoban loads its Boxoban levels from the Hugging Face Hub when the env is made. Where the Hub
    cannot be reached (here: an endpoint that does not resolve, as on a machine that reaches only package
    registries), an epoch runs on the levels in the local cache; without them the run fails before anything
    compiles (and before huggingface_hub's retries, about 23 s), naming the data and how to fetch it."""
    hf_home = tmp_path / "hf"
    hf_home.mkdir()
    if cached:
        _plant_levels(hf_home)
    offline = {**QUICK_COMPILE, "HF_HOME": str(hf_home), "HF_ENDPOINT": "https://hub.invalid"}
    proc = home.cli("run", str(home.config("sokoban", environment={"family": "jumanji", "env_id": "sokoban"},
                                           **EPOCH)), env=offline)
    run = home.runs()[-1]
    if cached:
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert home.events(run, "metrics")[0]["timesteps_total"] == STEPS_PER_EPOCH
        return
    assert proc.returncode == 1
    (failed,) = home.events(run, "run_failed")
    assert failed["message"].startswith("sokoban: Jumanji's env loads its levels from the Hugging Face Hub "
                                        "(InstaDeepAI/boxoban-levels, unfiltered-train.npy)"), failed["message"]
    assert "(https://hub.invalid does not resolve)" in failed["message"]
    assert "hf download InstaDeepAI/boxoban-levels unfiltered-train.npy" in failed["message"]
    assert home.events(run, "metrics") == []
