"""A2C on every env family the worker offers: one env config of each, one epoch of Jumanji's A2C through MOSAIC.

Jumanji groups its environments in the packages of ``jumanji.environments``: ``logic``, ``packing``, ``routing``
and ``swarms``; every env config of ``jumanji.training`` is named after its env's folder there. One config per
family trains one epoch (two learner steps of 5 steps of one env) with a shrunk network: the epoch completes,
its losses are finite, the stochastic and greedy evaluations are reported and a checkpoint is saved. Learning
is not checked here (one epoch of 10 env steps); test_jm_ppo.py checks it for PPO, test_jm_tsp.py and
test_jm_bin_pack.py train A2C on TSP and BinPack. The picks are not those two, so that A2C is run on six env
configs in all. Most of each test's time is importing JAX and Jumanji and compiling (each env's own network),
so XLA compiles with most optimisations off (jm_support.QUICK_COMPILE), and the batches are of one env and one
episode each (the programs compiled are the same for any batch; the unoptimised code plays a batch of eight slower).
"""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from jm_support import ONE_ENV_EPOCH, ONE_ENV_STEPS as STEPS_PER_EPOCH, QUICK_COMPILE

#: family -> (env config, a network of the yaml's kind, as small as it goes)
PICKS = {
    "logic": ("minesweeper", {"board_embed_dim": 2, "board_conv_channels": [4], "num_mines_embed_dim": 2,
                              "final_layer_dims": [16]}),
    "packing": ("knapsack", {"transformer_num_blocks": 1, "transformer_num_heads": 2, "transformer_key_size": 8,
                             "transformer_mlp_units": [32]}),
    "routing": ("maze", {"num_channels": [4], "policy_layers": [16], "value_layers": [16]}),
    "swarms": ("search_and_rescue", {"layers": [16]}),
}
EPOCH = {"algorithm": "a2c", "seed": 0, "total_timesteps": STEPS_PER_EPOCH, **ONE_ENV_EPOCH}
#: Where Jumanji keeps its envs: family -> env folders (those named like an env config).
LAYOUT = ("import json, pathlib, jumanji.environments as e; root = pathlib.Path(e.__file__).parent; "
          "print(json.dumps({f.name: sorted(d.name for d in f.iterdir() if d.is_dir()) for f in root.iterdir() "
          "if f.is_dir() and f.name not in ('commons', '__pycache__')}))")


def test_the_picks_cover_every_family_of_the_envs_the_worker_offers(home):
    described = json.loads(subprocess.run([home.python, "-m", "jumanji_worker.cli", "--describe"],
                                          capture_output=True, text=True, timeout=300, check=True).stdout)
    layout = json.loads(subprocess.run([home.python, "-c", LAYOUT], capture_output=True, text=True, timeout=300,
                                       check=True).stdout)
    offered = described["envs"]["jumanji"]
    family_of = {env: family for family, folders in layout.items() for env in offered if env in folders}
    assert sorted(family_of) == sorted(offered), "an offered env config is in no family"
    assert set(family_of.values()) == set(PICKS) == {"logic", "packing", "routing", "swarms"}
    assert all(family_of[env] == family for family, (env, _) in PICKS.items())
    assert "a2c" in described["capabilities"]["algorithms"]


@pytest.mark.parametrize("family", sorted(PICKS))
def test_an_epoch_of_a2c_trains_on_each_family(home, family):
    env, network = PICKS[family]
    proc = home.cli("run", str(home.config(family, environment={"family": "jumanji", "env_id": env},
                                           network=network, **EPOCH)), env=QUICK_COMPILE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = home.runs()[-1]
    (started,) = home.events(run, "run_started")
    assert started["algorithm"] == "a2c" and started["env"]["config"] == env
    (metrics,) = home.events(run, "metrics")
    assert metrics["timesteps_total"] == STEPS_PER_EPOCH
    learner = metrics["learner"]["policy"]
    assert {"total_loss", "policy_loss", "critic_loss", "entropy"} <= set(learner)
    # MOSAIC drops NaN and inf from what Jumanji logs: a diverged loss would be missing here
    assert all(math.isfinite(learner[k]) for k in ("total_loss", "policy_loss", "critic_loss", "entropy"))
    assert math.isfinite(metrics["episode_return_mean"]) and metrics["episode_len_mean"] > 0
    assert math.isfinite(metrics["greedy"]["episode_return_mean"]) and metrics["greedy"]["episode_len_mean"] > 0
    (saved,) = home.events(run, "checkpoint_saved")
    assert saved["iteration"] == 1
