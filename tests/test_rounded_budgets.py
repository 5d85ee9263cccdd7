"""A library that steps its budget in whole units says so up front, and the run takes what it said.

For each worker whose library rounds ``total_timesteps`` (XuanCe: vector steps of its envs; Tianshou: the
warm-up, collects in vector steps, epochs; jumanji.training: epochs; RLlib's PPO and DQN: training iterations;
BenchMARL: whole collected batches), a real tiny ``mosaic run`` with a budget that is not a whole number of them:
``--dry-run`` lists the warning and the env steps, the run logs the same warning as its first event after
``run_started``, and the steps it reports at the end are the steps the warning named (RLlib's APPO and IMPALA,
whose iterations last a time, say they end past the budget by an amount not known in advance: the Ray worker's
test_config checks the message). CleanRL's ppo, which rounds down, is tested in the CleanRL worker's tests
(test_a_budget_ppo_rounds_is_said_up_front_and_counted_exactly); the random worker takes any budget exactly."""

from __future__ import annotations

import json

import pytest

from cli_support import REPO, run_cli, write_config
from mosaic.workerkit.run_fields import RoundedBudget

ENV = {"RAY_AUTH_MODE": "disabled", "JAX_DISABLE_MOST_OPTIMIZATIONS": "1"}  # jumanji: compile quickly

#: worker -> (config, the env steps the run takes)
CASES = {
    # 16 envs (XuanCe's default parallels): 63 vector steps
    "xuance": ({"algorithm": "mappo", "total_timesteps": 1001}, 1008),
    # a warm-up of 64 in vector steps of 4 envs, collects of 10 -> 12, 4 epochs of 235 between tests
    "tianshou": ({"algorithm": "dqn", "total_timesteps": 1001, "num_envs": 4, "test_every_timesteps": 300,
                  "test_episodes": 2}, 1024),
    # epochs of 5 steps x 8 envs x 2 learner steps = 80 env steps
    "jumanji": ({"algorithm": "random", "environment": {"family": "jumanji", "env_id": "tsp"}, "total_timesteps": 100,
                 "n_steps": 5, "num_envs": 8, "num_learner_steps_per_epoch": 2, "eval_episodes": 8,
                 "greedy_eval_episodes": 8}, 160),
    # iterations of one 500-step train batch in whole vector steps of 3 envs: 501 (two of them, not 2 x 500)
    "ray": ({"algorithm": "ppo", "total_timesteps": 600, "num_envs": 3, "rllib": {"num_env_runners": 0},
             "algo_params": {"train_batch_size_per_learner": 500, "minibatch_size": 250, "num_epochs": 1,
                             "fcnet_hiddens": [16]}}, 1002),
    # collections of 100 frames (4 VMAS envs of 25 steps): 2
    "benchmarl": ({"algorithm": "mappo", "total_timesteps": 150, "num_envs": 4, "batch_size": 50,
                   "environment": {"family": "vmas", "env_id": "balance", "env_kwargs": {"max_steps": 25}},
                   "algo_params": {"on_policy_collected_frames_per_batch": 100, "on_policy_n_minibatch_iters": 1}},
                  200),
    # iterations of one fragment of n_step 3 in each of 4 envs: 12 env steps (9 of them; each iteration costs
    # RLlib's per-iteration overhead, so a small count: 84 iterations of 1001 steps took 18 s, Ray's start ~8 s)
    "ray-dqn": ({"algorithm": "dqn", "total_timesteps": 101, "num_envs": 4, "rllib": {"num_env_runners": 0},
                 "algo_params": {"n_step": 3, "fcnet_hiddens": [16]}}, 108),
}


def test_whole_units_round_up_or_down_and_say_how():
    assert RoundedBudget.whole_units(1000, 8, "vector step", "8 envs") is None
    up = RoundedBudget.whole_units(1001, 8, "vector step", "one step of each of 8 envs")
    assert (up.requested, up.env_steps) == (1001, 1008)
    assert up.message == ("total_timesteps 1001 is not a whole number of vector steps of 8 env steps (one step of "
                          "each of 8 envs): the run takes 126 vector steps, 1008 env steps")
    down = RoundedBudget.whole_units(600, 128, "rollout", "2 envs x 64 steps", down=True)
    assert down.env_steps == 512 and down.message.endswith("the run takes 4 rollouts, 512 env steps")
    assert RoundedBudget.whole_units(5, 80, "epoch", "x").message.endswith("takes 1 epoch, 80 env steps")
    restored = RoundedBudget.whole_units(1001, 16, "vector step", "16 envs", start=608)  # 393 more: 25 x 16
    assert restored.env_steps == 1008 and restored.message.endswith(
        "past the checkpoint's 608: the run takes 25 vector steps, 1008 env steps in all")
    assert RoundedBudget.whole_units(500, 16, "vector step", "16 envs", start=608) is None  # nothing runs


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    from mosaic.testing.worker_homes import WorkerHome, worker_env_for_tests

    root = tmp_path_factory.mktemp("rounded") / "home"
    for worker in ("xuance", "tianshou", "jumanji", "benchmarl"):  # random and ray run in MOSAIC's own environment
        WorkerHome.create(root, worker, worker_env_for_tests(worker, REPO, lambda: tmp_path_factory.mktemp(worker)))
    return root


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_rounded_budget_is_said_up_front_and_taken_exactly(case, home, tmp_path):
    worker = case.split("-")[0]
    config, steps = CASES[case]
    total = config["total_timesteps"]
    path = write_config(tmp_path / "config.json", {"worker": worker, "seed": 1, **config})
    dry = run_cli("run", str(path), "--dry-run", home=home, env=ENV, timeout=300)
    assert dry.returncode == 0, dry.stderr[-3000:]
    shown = json.loads(dry.stdout)
    (warning,) = shown["warnings"]
    assert shown["env_steps"] == steps and warning.startswith(f"total_timesteps {total} ")
    assert warning.endswith(f"the run takes {steps} env steps") or f", {steps} env steps" in warning, warning

    proc = run_cli("run", str(path), "--run-id", f"rounded-{case}", home=home, env=ENV, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = (home / "trainer" / "runs" / f"rounded-{case}" / "telemetry.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert events[0]["type"] == "run_started"
    said = events[1]
    assert said["type"] == "log" and said["level"] == "warning" and said["message"] == warning, said
    assert said["requested_timesteps"] == total and said["env_steps"] == steps
    (completed,) = [e for e in events if e["type"] == "run_completed"]
    assert completed["summary"]["timesteps_total"] == steps, completed["summary"]
    assert f"[warning] {warning}" in proc.stderr


def _events(home, run_id: str) -> list[dict]:
    lines = (home / "trainer" / "runs" / run_id / "telemetry.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("worker", ["random", "tianshou"])
def test_a_restore_at_or_past_the_budget_says_so_and_a_rounded_one_counts_from_the_checkpoint(worker, home, tmp_path):
    """A checkpoint already at total_timesteps: said up front, nothing more runs (Tianshou's warm-up included: it
    refilled its replay buffer, 64 more steps, before). Restored below the budget, Tianshou's rounding counts from
    the checkpoint's steps: 604, a warm-up of 64, collects of 10 to 1008."""
    first = write_config(tmp_path / "first.json", {"worker": worker, "seed": 1, "total_timesteps": 600})
    proc = run_cli("run", str(first), "--run-id", f"first-{worker}", home=home, env=ENV, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (saved,) = [e for e in _events(home, f"first-{worker}") if e["type"] == "checkpoint_saved"][-1:]
    done = saved["timesteps_total"]
    for total, run_id in ((300, f"past-{worker}"), (1001, f"on-{worker}")):
        again = write_config(tmp_path / f"{run_id}.json", {"worker": worker, "seed": 1, "total_timesteps": total,
                                                            "checkpoint": {"restore_from": saved["path"]}})
        dry = run_cli("run", str(again), "--dry-run", home=home, env=ENV, timeout=300)
        assert dry.returncode == 0, dry.stderr[-3000:]
        proc = run_cli("run", str(again), "--run-id", run_id, home=home, env=ENV, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        events = _events(home, run_id)
        said = [e for e in events[1:] if e["type"] == "log" and e["level"] == "warning"]
        (completed,) = [e for e in events if e["type"] == "run_completed"]
        assert json.loads(dry.stdout).get("warnings", []) == [e["message"] for e in said]
        if total == 300:
            past = (f"checkpoint.restore_from is at {done} steps, at or past total_timesteps 300: the run trains "
                    "no further (a larger total_timesteps continues it)")
            assert [e["message"] for e in said] == [past] and said[0] == events[1], events[:3]
            assert said[0]["restored_timesteps"] == done and completed["summary"]["timesteps_total"] == done
        elif worker == "tianshou":
            assert done == 604 and said[0]["env_steps"] == 1008 and said[0] == events[1], said
            assert said[0]["message"].endswith("the run takes 1008 env steps in all, from the checkpoint's 604")
            assert completed["summary"]["timesteps_total"] == 1008
        else:  # the random worker takes any budget exactly
            assert said == [] and completed["summary"]["timesteps_total"] == 1001
