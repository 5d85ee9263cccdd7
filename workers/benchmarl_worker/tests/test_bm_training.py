"""Real BenchMARL training through MOSAIC: every algorithm BenchMARL ships, on a small VMAS task, tiny budgets."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bm_support import AGENTS, FRAMES, TINY

ALGORITHMS = list(TINY)
#: Each algorithm's BenchMARL losses, reported as learner scalars of the agent group.
LOSSES = {"mappo": "loss_objective", "ippo": "loss_objective", "maddpg": "loss_actor", "iddpg": "loss_actor",
          "masac": "loss_qvalue", "isac": "loss_qvalue", "qmix": "loss", "vdn": "loss", "iql": "loss"}
DISCRETE = ("qmix", "vdn", "iql")  # the others act in VMAS's continuous actions (BenchMARL prefers them)


@pytest.fixture(scope="module")
def trained(module_home):
    """Each algorithm's tiny run, made once and read by several tests."""
    runs: dict[str, Path] = {}

    def run(algorithm: str) -> Path:
        if algorithm not in runs:
            proc, runs[algorithm] = module_home.run(algorithm)
            assert proc.returncode == 0, proc.stderr[-3000:]
            assert "Traceback" not in proc.stderr
        return runs[algorithm]

    return run


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_algorithm_trains_reports_and_checkpoints(module_home, trained, algorithm):
    run = trained(algorithm)
    (started,) = module_home.events(run, "run_started")
    assert started["versions"]["benchmarl"] == "1.5.2" and started["versions"]["torch"] == "2.13.0+cpu"
    assert started["groups"] == {"agents": AGENTS} and started["resources"]["torch_threads"] == 1
    assert started["actions"] == ("discrete" if algorithm in DISCRETE else "continuous")
    assert started["iterations"] == 2 and started["frames_per_batch"] == FRAMES
    metrics = module_home.events(run, "metrics")
    assert [(m["iteration"], m["timesteps_total"]) for m in metrics] == [(1, FRAMES), (2, 2 * FRAMES)]
    last = metrics[-1]
    assert LOSSES[algorithm] in last["learner"]["agents"] and last["env_steps_per_s"] > 0
    episodes = module_home.events(run, "episode")
    assert len(episodes) == last["num_episodes_lifetime"] >= 8  # an episode of at most 25 steps per env and batch
    assert all(set(e["returns"]) == set(AGENTS) and 1 <= e["length"] <= 25 for e in episodes)
    # the team's return is the sum over agents; the group's the mean of its agents'
    assert last["episode_return_mean"] == pytest.approx(sum(last["agent_episode_returns_mean"].values()))
    assert last["module_episode_returns_mean"]["agents"] == pytest.approx(
        sum(last["agent_episode_returns_mean"].values()) / len(AGENTS))
    (saved,) = module_home.events(run, "checkpoint_saved")
    assert saved["timesteps_total"] == 2 * FRAMES and saved["iteration"] == 2
    folder = Path(saved["path"])
    assert (folder / f"checkpoint_{2 * FRAMES}.pt").stat().st_size > 0 and (folder / "mosaic_state.json").exists()
    assert list((run / "benchmarl").glob("*/config.pkl")), "BenchMARL's own experiment folder"


#: Run in the worker's environment: the worker's own ``--evaluate`` (its command line's main) of each run given, one
#: interpreter for all of them (each a BenchMARL experiment rebuilt from the run's config and checkpoint).
EVALUATE = r"""
import sys
from benchmarl_worker.cli import main
for run in sys.argv[1:]:
    assert main(["--evaluate", run, "--episodes", "2", "--seed", "3", "--json"]) == 0, run
"""


def _evaluation(run: Path) -> dict:
    """The run's newest evaluation's summary.json."""
    entry = json.loads((run / "analytics.json").read_text())["evaluations"][-1]
    return json.loads((run / entry["path"] / "summary.json").read_text())


@pytest.mark.slow
def test_every_algorithms_checkpoint_plays_in_mosaic_eval(module_home, trained):
    """Each algorithm's tiny run, its checkpoint played greedily by the kit on one VMAS env: two episodes of every
    agent, seated by its group; `mosaic eval` plays the same episodes again and records a GIF; a VMAS run cannot
    serve a player (a match builds PettingZoo envs only), refused naming why."""
    runs = {algorithm: trained(algorithm) for algorithm in ALGORITHMS}
    proc = subprocess.run([module_home.python, "-c", EVALUATE, *map(str, runs.values())], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    played = {algorithm: _evaluation(run) for algorithm, run in runs.items()}
    for algorithm, summary in played.items():
        assert summary["num_episodes"] == 2 and summary["opponent"] is None, algorithm
        assert summary["env"] == {"family": "vmas", "env_id": "balance", "env_kwargs": {"max_steps": 25},
                                  "algorithm": algorithm, "groups": {"agents": AGENTS}}
        assert summary["seats"] == [{"players": dict.fromkeys(AGENTS, "agents"), "opponent_agents": [],
                                     "episodes": 2, "first_episode": 0}]
        assert set(summary["per_agent_return"]) == set(AGENTS) and 1 <= summary["episode_length"]["max"] <= 25
    proc = module_home.cli("eval", runs["mappo"].name, "--episodes", "2", "--seed", "3", "--video", "1", "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = json.loads(proc.stdout)
    assert again["per_agent_return"] == played["mappo"]["per_agent_return"]  # greedy: the seeds repeat the episodes
    (video,) = again["videos"]
    assert Path(video).stat().st_size > 0
    proc = subprocess.run([module_home.python, "-m", "benchmarl_worker.cli", "--player", str(runs["mappo"])],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stdout == "", proc.stderr
    assert "trained on vmas/balance: a match builds its env in MOSAIC's process from PettingZoo's families" in \
        proc.stderr


@pytest.mark.slow
def test_a_restored_run_starts_with_run_started_and_carries_the_steps_on(module_home, trained):
    """iql: its replay buffer, exploration and optimiser go on from the checkpoint; another algorithm, or batches
    of another size, are refused before any run folder exists."""
    import torch

    home = module_home
    (saved,) = home.events(trained("iql"), "checkpoint_saved")
    runs = home.runs()
    for fields, words in [
            ({"algorithm": "vdn", **TINY["vdn"]}, "checkpoint.restore_from: was trained with algorithm iql; this "
                                                  "config has algorithm vdn; allowed: "),
            ({"algorithm": "iql", **TINY["iql"], "algo_params": {**TINY["iql"]["algo_params"],
                                                                  "off_policy_collected_frames_per_batch": 200}},
             "algo_params.off_policy_collected_frames_per_batch: 200: the checkpoint collected batches of 100 "
             "frames")]:
        proc = home.cli("run", str(home.config("mismatch", **fields, checkpoint={"restore_from": saved["path"]})))
        assert proc.returncode == 2, proc.stderr[-3000:]
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"mosaic: error: {words}"), line
        assert home.runs() == runs
    proc, resumed = home.run("iql", total_timesteps=3 * FRAMES, checkpoint={"restore_from": saved["path"]})
    assert proc.returncode == 0, proc.stderr[-3000:]
    events = home.events(resumed)
    assert events[0]["type"] == "run_started" and events[0]["restored_from"] == saved["path"]
    assert events[1]["type"] == "log" and events[1]["message"].startswith(f"restored from {saved['path']} at 200 ")
    metrics = home.events(resumed, "metrics")
    assert [(m["iteration"], m["timesteps_total"]) for m in metrics] == [(3, 3 * FRAMES)]
    assert metrics[0]["num_episodes_lifetime"] > home.events(trained("iql"), "metrics")[-1]["num_episodes_lifetime"]
    (after,) = home.events(resumed, "checkpoint_saved")
    before = torch.load(Path(saved["path"]) / "checkpoint_200.pt", weights_only=False)
    after = torch.load(Path(after["path"]) / "checkpoint_300.pt", weights_only=False)
    assert before["state"]["total_frames"] == 200 and after["state"]["total_frames"] == 300
    assert after["state"]["n_iters_performed"] == 3 and after["collector"]["frames"] == 300
    assert before["mosaic_optimizers"]["agents"]["loss"]["state"], "the Adam moments go with the checkpoint"
    weights = [k for k, v in before["loss_agents"].items() if isinstance(v, torch.Tensor) and v.is_floating_point()]
    assert any(not torch.equal(before["loss_agents"][k], after["loss_agents"][k]) for k in weights), \
        "the resumed run did not train"
