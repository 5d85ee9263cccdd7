"""A BenchMARL run as a process: the conformance kit on a PettingZoo task; paused, resumed, then Ctrl-C; bad
configs refused before anything is created; what `mosaic workers show` says of the worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from bm_support import TINY
from mosaic.testing import check_pause_resume, check_worker, run_events, wait_until

#: PettingZoo's simple_spread through BenchMARL (TorchRL's PettingZooEnv, two envs in a SerialEnv).
SPREAD = {"family": "pettingzoo", "env_id": "simple_spread", "env_kwargs": {"max_cycles": 25}}


@pytest.mark.slow
def test_conformance_on_a_pettingzoo_task(home):
    """The run, its own stdout, bad input and every shared flag, in the worker's environment."""
    report = check_worker("benchmarl", {"algorithm": "mappo", "seed": 3, "environment": SPREAD, "num_envs": 2,
                                        "total_timesteps": 100, "batch_size": 25,
                                        "algo_params": {"on_policy_collected_frames_per_batch": 50,
                                                        "on_policy_n_minibatch_iters": 1}},
                          home=home.root, bad_config={"algorithm": "mappo", "algo_params": {"clip_epsilon": "wide"}})
    (started,) = report.of_type("run_started")
    assert started["groups"] == {"agent": ["agent_0", "agent_1", "agent_2"]}
    assert [m["timesteps_total"] for m in report.of_type("metrics")] == [50, 100]
    episodes = report.of_type("episode")
    assert len(episodes) == 4 and all(e["length"] == 25 for e in episodes)  # 2 envs, 2 collections of 25 steps
    assert report.of_type("checkpoint_saved")


@pytest.mark.slow
def test_a_run_pauses_resumes_and_ctrl_c_cancels_it_within_seconds_with_a_checkpoint(home):
    config = home.config("long", algorithm="mappo", seed=1, **{**TINY["mappo"], "total_timesteps": 2_000_000},
                         reporting={"heartbeat_interval_s": 0.5})
    run_id = "benchmarl-cancel-1"
    proc = subprocess.Popen([sys.executable, "-m", "mosaic", "run", str(config), "--run-id", run_id],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "MOSAIC_HOME": str(home.root)})
    run = home.root / "trainer" / "runs" / run_id
    try:
        wait_until(lambda: (run / "telemetry.jsonl").exists() and run_events(run, "metrics"), 600,
                   "the first metrics", interval=0.2, proc=proc)
        check_pause_resume(run, proc, heartbeats=2, timeout=300)  # held at the end of an iteration
    finally:
        asked = time.monotonic()
        proc.send_signal(signal.SIGINT)
        code = proc.wait(120)
    took = time.monotonic() - asked
    assert code == 3, proc.stderr.read()[-2000:]
    assert took < 15, f"cancelled after {took:.1f} s"
    events = run_events(run)
    assert events[-1]["type"] == "run_cancelled"
    (saved,) = [e for e in events if e["type"] == "checkpoint_saved"]  # at the iteration's end: a whole batch
    assert 0 < saved["timesteps_total"] < 2_000_000 and saved["timesteps_total"] % 100 == 0
    state = json.loads((run / "checkpoints" / os.path.basename(saved["path"]) / "mosaic_state.json").read_text())
    assert state["timesteps_total"] == saved["timesteps_total"] and state["algorithm"] == "mappo"
    assert (run / "checkpoints" / os.path.basename(saved["path"]) / state["state_file"]).is_file()
    assert json.loads((run / "analytics.json").read_text())["status"] == "cancelled"


#: Bad configs: (fields, the field the one error line names, words it says).
BAD = [
    ({"environment": {"family": "smacv2", "env_id": "protoss_5_vs_5"}}, "environment.family", "StarCraft II"),
    ({"environment": {"family": "meltingpot", "env_id": "coins"}}, "environment.family", "allowed: vmas, pettingzoo"),
    ({"environment": {"family": "gymnasium", "env_id": "CartPole-v1"}}, "environment.family",
     "'gymnasium' is not one of BenchMARL's environments here; allowed: vmas, pettingzoo"),
    ({"environment": {"family": "vmas", "env_id": "balanse"}}, "environment.env_id", "(did you mean 'balance'?)"),
    ({"environment": {"family": "vmas", "env_id": "balance", "env_kwargs": {"n_agent": 3}}},
     "environment.env_kwargs.n_agent", "allowed: max_steps, n_agents, random_package_pos_on_line, package_mass"),
    ({"environment": {"family": "vmas", "env_id": "balance", "env_kwargs": {"n_agents": 0}}},
     "environment.env_kwargs.n_agents", "allowed: an integer >= 1"),
    ({"environment": {**SPREAD, "env_kwargs": {"task": "simple_tag_v3"}}}, "environment.env_kwargs.task",
     "is set by environment.env_id"),
    ({"algorithm": "ppo"}, "algorithm", "mappo, ippo, maddpg, iddpg, masac, isac, qmix, vdn, iql"),
    ({"algo_params": {"clip_epsilonn": 0.3}}, "algo_params.clip_epsilonn", "(did you mean 'clip_epsilon'?)"),
    ({"algo_params": {"clip_epsilon": "wide"}}, "algo_params.clip_epsilon", "allowed: a number from 0 to 1"),
    ({"algo_params": {"max_n_frames": 100}}, "algo_params.max_n_frames", "set the top-level 'total_timesteps'"),
    ({"algo_params": {"off_policy_memory_size": 100}}, "algo_params.off_policy_memory_size",
     "mappo is on-policy"),
    ({"learning_rate": 0.1, "algo_params": {"lr": 0.2}}, "learning_rate", "and algo_params.lr both set"),
    ({"num_envs": 7}, "num_envs", "7 envs do not divide on_policy_collected_frames_per_batch (6000)"),
    ({"batch_size": 7000}, "batch_size", "allowed: 1 to 6000"),
    ({"fastlane": {"enabled": True}}, "fastlane", "not built yet"),
    ({"episodes": 3}, "episodes", "its budget is total_timesteps"),
    ({"resources": {"gpus": 1}}, "resources.gpus", "torch sees no GPU on this machine; allowed: 0"),
    ({"algorithm": "qmix", "environment": {"family": "pettingzoo", "env_id": "multiwalker"}}, "algorithm",
     "qmix acts in discrete action spaces; BenchMARL's pettingzoo/multiwalker has continuous actions only"),
]


def test_bad_configs_exit_2_naming_the_field_and_create_nothing(home):
    for fields, field, words in BAD:
        home.check_refused(fields, field, words)


def test_workers_show_lists_algorithms_tasks_and_the_shared_fields(home):
    proc = home.cli("workers", "show", "benchmarl")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "algorithms: mappo, ippo, maddpg, iddpg, masac, isac, qmix, vdn, iql" in out
    assert "  vmas: balance, " in out and "  pettingzoo: multiwalker, " in out
    assert "  total_timesteps: ExperimentConfig.max_n_frames" in out and "  fastlane: not built yet" in out
    proc = home.cli("workers", "show", "benchmarl", "--algorithm", "qmix")
    assert proc.returncode == 0, proc.stderr
    assert "mixing_embed_dim" in proc.stdout and "off_policy_memory_size" in proc.stdout
    assert "on_policy_minibatch_size" not in proc.stdout and "max_n_frames" not in proc.stdout
