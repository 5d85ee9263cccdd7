"""Real Tianshou training through MOSAIC: every algorithm the worker lists, tiny budgets."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from mosaic.fastlane.png import read_png
from mosaic.fastlane.registry import last_frame_path, read_registry
from ts_support import TINY

AGENT = "agent_0"
TINY_ENVS = {"ppo": "CartPole-v1", "sac": "Pendulum-v1"}


def saved_path(run: Path) -> Path:
    """The newest checkpoint folder of a run (restore_from takes a checkpoint, not a run folder)."""
    return sorted((run / "checkpoints").iterdir())[-1]


@pytest.fixture(scope="module")
def dqn_run(module_home):
    """One tiny DQN run that several tests read: its telemetry, checkpoint and episodes."""
    proc, run = module_home.run("dqn")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run


def test_a_single_agent_run_is_refused_as_a_player_naming_why(module_home, dqn_run):
    """A match seats players in a PettingZoo env: a CartPole run cannot sit at one, and says so (exit 2)."""
    proc = module_home.cli("player", str(dqn_run), input="", timeout=300)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("mosaic: error: --player: ") and "trained on a single-agent Gymnasium env (CartPole-v1" in line


def test_dqn_trains_reports_checkpoints_stops_at_its_threshold_and_evaluates(module_home, dqn_run):
    """The tiny run: an epsilon schedule, a test at the end of each of its 500-step epochs, and
    stop_at_return (5) reached by the first test, so Tianshou stops it after one epoch: it completes normally
    with a final checkpoint and says why."""
    home, run = module_home, dqn_run
    (started,) = home.events(run, "run_started")
    assert started["versions"]["tianshou"] == "2.0.1" and started["versions"]["torch"] == "2.13.0+cpu"
    assert started["tianshou_algorithm"] == "DQN" and started["resources"]["torch_threads"] == 1
    metrics = home.events(run, "metrics")
    assert [m["timesteps_total"] for m in metrics] == [500, 600]
    assert {"loss", "total_loss"} <= set(metrics[-1]["learner"]["policy"])
    episodes = home.events(run, "episode")
    assert len(episodes) == metrics[-1]["num_episodes_lifetime"] > 10
    assert all(set(e["returns"]) == {AGENT} and e["returns"][AGENT] == e["length"] for e in episodes)  # CartPole: +1 a step
    (saved,) = home.events(run, "checkpoint_saved")
    folder = Path(saved["path"])
    assert (folder / "tianshou_algorithm.pt").stat().st_size > 0 and saved["timesteps_total"] == 600
    assert list((run / "tensorboard").rglob("events.out.tfevents.*")), "Tianshou's TensorBoard files"
    tests = [e["test"] for e in home.events(run, "log") if "test" in e]
    assert [t["timesteps_total"] for t in tests] == [100, 600] and all(t["episodes"] == 5 for t in tests)
    assert tests[0]["return_mean"] >= 5  # the test before training (Tianshou's) already reached it
    assert [m.get("test_return_mean") for m in metrics] == [t["return_mean"] for t in tests]
    (stopped,) = [e["stopped"] for e in home.events(run, "log") if "stopped" in e]
    assert stopped == {"reason": "stop_at_return", "test_return_mean": max(t["return_mean"] for t in tests),
                       "threshold": 5.0, "timesteps_total": 600}
    (done,) = home.events(run, "run_completed")
    assert done["summary"]["stopped"].startswith("stop_at_return: a test's mean return")
    assert done["summary"]["last_test"] == tests[-1]

    evaluated = home.cli("eval", run.name, "--episodes", "3", "--seed", "5", "--json")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    results = json.loads(evaluated.stdout)
    assert results["num_episodes"] == 3 and results["checkpoint"] == saved["path"]
    assert [e["seed"] for e in results["episodes"]] == [5, 6, 7]
    again = json.loads(home.cli("eval", run.name, "--episodes", "3", "--seed", "5", "--json").stdout)
    assert [e["returns"] for e in again["episodes"]] == [e["returns"] for e in results["episodes"]]


def test_dqn_resumes_from_its_checkpoint_and_goes_on_learning(module_home, dqn_run):
    import torch

    (saved,) = module_home.events(dqn_run, "checkpoint_saved")
    proc, resumed = module_home.run("dqn", checkpoint={"restore_from": saved["path"]}, total_timesteps=1600,
                                    learning_starts=100, test_every_timesteps=0, stop_at_return=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    kinds = [e["type"] for e in module_home.events(resumed)]
    assert kinds[0] == "run_started" and kinds[1] == "log"  # every run's first event, a resumed one's too
    restored = module_home.events(resumed)[1]["message"]
    assert restored.startswith("restored from ") and restored.endswith(" at 600 env steps"), restored
    metrics = module_home.events(resumed, "metrics")
    assert [(m["iteration"], m["timesteps_total"]) for m in metrics] == [(3, 1100), (4, 1600)]
    (first,) = [e for e in module_home.events(resumed, "episode")][:1]
    assert first["episode"] == module_home.events(dqn_run, "metrics")[-1]["num_episodes_lifetime"]
    before = torch.load(Path(saved["path"]) / "tianshou_algorithm.pt", weights_only=False)
    (after,) = module_home.events(resumed, "checkpoint_saved")
    after = torch.load(Path(after["path"]) / "tianshou_algorithm.pt", weights_only=False)
    weights = [k for k in before if k.startswith("policy.")]
    assert weights and any(not torch.equal(before[k], after[k]) for k in weights), "the resumed run did not train"


def test_same_seed_same_episodes_as_tianshou_run_directly(module_home, dqn_run):
    """The shim observes and never changes what is learned: Tianshou's algorithm API used directly with
    the same settings (tianshou_direct.py: the epsilon schedule in a training_fn, a test collector, stop_fn)
    gives the same episodes, return for return, up to the same stop."""
    through_mosaic = [e["returns"][AGENT] for e in module_home.events(dqn_run, "episode")]
    tests = [e["test"]["return_mean"] for e in module_home.events(dqn_run, "log") if "test" in e]
    tiny = TINY["dqn"]
    options = {"env_id": "CartPole-v1", "seed": 1, "num_envs": 1, "hidden_sizes": [64, 64], "learning_rate": 0.001,
               "buffer_size": 20000, "batch_size": 64, "eps_schedule": tiny["eps_schedule"],
               "test_every": tiny["test_every_timesteps"], "test_episodes": tiny["test_episodes"],
               "stop_at_return": tiny["stop_at_return"],
               **{k: tiny[k] for k in ("total_timesteps", "learning_starts", "collect_steps", "update_per_step")}}
    script = Path(__file__).with_name("tianshou_direct.py")
    direct = subprocess.run([module_home.python, str(script), json.dumps(options)], capture_output=True, text=True,
                            timeout=900, cwd=module_home.root)
    assert direct.returncode == 0, direct.stderr[-3000:]
    upstream = json.loads(direct.stdout.strip().splitlines()[-1])
    assert len(upstream) == len(through_mosaic) > 10
    assert upstream == through_mosaic
    assert len(tests) == 2  # Tianshou's first test before training, then the one at the end of epoch 1


@pytest.mark.parametrize("algorithm,losses", [
    ("ppo", {"policy_loss", "vf_loss", "entropy", "total_loss"}),
    ("sac", {"actor_loss", "policy_loss", "critic1_loss", "critic2_loss", "alpha"}),
])
def test_online_algorithm_trains(home, algorithm, losses):
    proc, run = home.run(algorithm)
    assert proc.returncode == 0, proc.stderr[-3000:]
    metrics = home.events(run, "metrics")
    total, every = TINY[algorithm]["total_timesteps"], TINY[algorithm]["reporting"]["every_timesteps"]
    assert [m["timesteps_total"] for m in metrics] == list(range(every, total + 1, every))
    assert losses <= set(metrics[-1]["learner"]["policy"]), metrics[-1]["learner"]
    assert home.events(run, "episode")
    (saved,) = home.events(run, "checkpoint_saved")

    # mosaic eval of the checkpoint; PPO's also streams its frames to FastLane (`--fastlane`)
    lane = ["--fastlane"] if algorithm == "ppo" else []
    played = home.cli("eval", run.name, "--episodes", "2", "--seed", "3", "--json", *lane)
    assert played.returncode == 0, played.stderr[-3000:]
    result = json.loads(played.stdout[played.stdout.index("{"):])
    assert result["checkpoint"] == saved["path"] and result["env"]["env_id"] == TINY_ENVS[algorithm]
    assert [e["seed"] for e in result["episodes"]] == [3, 4]
    assert all(math.isfinite(e["returns"][AGENT]) and e["length"] > 0 for e in result["episodes"])
    # the same --seed plays the same episodes (ppo samples its actions in evaluation mode)
    again = home.cli("eval", run.name, "--episodes", "2", "--seed", "3", "--json")
    assert again.returncode == 0, again.stderr[-3000:]
    repeat = json.loads(again.stdout[again.stdout.index("{"):])
    assert [(e["returns"], e["length"]) for e in repeat["episodes"]] == \
        [(e["returns"], e["length"]) for e in result["episodes"]]
    if lane:
        stream = read_registry(run)["streams"]["eval"]
        assert stream["frames"] > 0
        pixels, _ = read_png(last_frame_path(run, "eval"))
        assert pixels.ndim == 3 and pixels.std() > 1


def test_discrete_cql_learns_offline_from_data_collected_by_a_trained_policy(module_home, dqn_run):
    """The data set is built at run time: here by the DQN run's checkpoint, played on the same env."""
    proc, run = module_home.run("discrete_cql", offline_data={"transitions": 1000, "policy": str(dqn_run)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (note,) = [e for e in module_home.events(run, "log") if "offline data set" in e["message"]]
    assert "1000 transitions from the checkpoint policy" in note["message"]
    metrics = module_home.events(run, "metrics")
    assert [m["timesteps_total"] for m in metrics] == [100, 200]
    assert {"cql_loss", "qr_loss", "total_loss"} <= set(metrics[-1]["learner"]["policy"])
    assert not module_home.events(run, "episode")  # offline: no env episodes while learning
    evaluated = module_home.cli("eval", run.name, "--episodes", "2", "--json")
    assert evaluated.returncode == 0 and json.loads(evaluated.stdout)["num_episodes"] == 2


@pytest.mark.parametrize("fields, differs", [
    ({"algorithm": "ppo", **TINY["ppo"]}, "algorithm dqn; this config has algorithm ppo"),
    ({"algorithm": "dqn", **TINY["dqn"], "environment": {"family": "gymnasium", "env_id": "Acrobot-v1"}},
     "env CartPole-v1; this config has env Acrobot-v1"),
    ({"algorithm": "dqn", **TINY["dqn"], "hidden_sizes": [32]},
     "policy layout [hidden_sizes [64, 64]]; this config has policy layout [hidden_sizes [32]]"),
])
def test_a_mismatched_checkpoint_is_refused_before_any_run(module_home, dqn_run, fields, differs):
    """A checkpoint of another algorithm, env or network (the module's DQN on CartPole) is refused by `mosaic run`
    and `--dry-run` (exit 2, one line naming checkpoint.restore_from and what differs), before any run folder."""
    runs = len(module_home.runs())
    config = module_home.config("mismatch", checkpoint={"restore_from": str(saved_path(dqn_run))}, **fields)
    for flags in ((), ("--dry-run",)):
        proc = module_home.cli("run", str(config), *flags)
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith(f"mosaic: error: checkpoint.restore_from: was trained with {differs}; allowed: "), line
        assert len(module_home.runs()) == runs
