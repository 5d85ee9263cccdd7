"""A checkpoint restores only into a config of the same worker, algorithm, env and policy layout (issue 60).

Before, a Ray checkpoint of one env restored into a config of another was accepted and the run failed half-way
(an ``UnboundLocalError`` and a failed run folder). Now `mosaic run` and `--dry-run` refuse it with exit 2, one
line naming ``checkpoint.restore_from`` and what differs, before any run folder exists. One tiny Ray run and one
tiny random run (the module's home) give the checkpoints every case here restores; the workers with
environments of their own test theirs in their own tests (workers/<w>_worker/tests).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli
from mosaic.workerkit.checkpoints import TrainedAs, check_restore_matches
from mosaic.errors import ConfigError

RAY_ENV = {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
           "env_kwargs": {"N": 2, "max_cycles": 25}}
#: One RLlib iteration of 200 env steps, small networks, no env runners: the smallest real Ray run.
RAY = {"worker": "ray", "algorithm": "ppo", "rllib": {"num_env_runners": 0}, "tensorboard": False,
       "algo_params": {"train_batch_size_per_learner": 200, "minibatch_size": 100, "num_epochs": 1,
                       "fcnet_hiddens": [16]},
       "environment": RAY_ENV}
RANDOM = {"worker": "random"}  # connect_four_v3, its default env
RAY_CLI_ENV = {"RAY_AUTH_MODE": "disabled"}


class Trained:
    def __init__(self, home: Path) -> None:
        self.home = home

    def train(self, name: str, config: dict, steps: int) -> str:
        path = self.home / f"{name}.json"
        path.write_text(json.dumps({**config, "total_timesteps": steps}))
        proc = run_cli("run", str(path), "--run-id", name, home=self.home, timeout=600, env=RAY_CLI_ENV)
        assert proc.returncode == 0, proc.stderr[-3000:]
        (checkpoint,) = sorted((self.home / "trainer" / "runs" / name / "checkpoints").iterdir())[-1:]
        return str(checkpoint)

    def runs(self) -> list[str]:
        return sorted(p.name for p in (self.home / "trainer" / "runs").iterdir())

    def refused(self, config: dict, *words: str, dry_run: bool = False) -> str:
        """`mosaic run` (or `--dry-run`) of ``config`` exits 2 with one line naming checkpoint.restore_from and
        saying ``words``; no traceback, no new run folder; the line is returned."""
        before = self.runs()
        path = self.home / "restore.json"
        path.write_text(json.dumps(config))
        proc = run_cli("run", str(path), *(["--dry-run"] if dry_run else []), home=self.home, timeout=600,
                       env=RAY_CLI_ENV)
        assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-3000:])
        assert "Traceback" not in proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert line.startswith("mosaic: error: checkpoint.restore_from: was trained with "), line
        for word in words:
            assert word in line, (word, line)
        assert self.runs() == before
        return line


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> tuple[Trained, str, str]:
    """(the home, a Ray PPO checkpoint of simple_spread with 2 agents, a random connect_four checkpoint)."""
    home = Trained(tmp_path_factory.mktemp("restore-home"))
    return home, home.train("ray-ppo", RAY, 200), home.train("random-c4", RANDOM, 50)


def restoring(config: dict, checkpoint: str, **fields) -> dict:
    return {**config, **fields, "total_timesteps": 400, "checkpoint": {"restore_from": checkpoint}}


def test_a_ray_checkpoint_into_another_env_is_refused_before_any_run_exists(trained):
    """The issue's case: a checkpoint of one env into a config of another (connect_four here)."""
    home, ray, _ = trained
    other = {"family": "classic", "env_id": "connect_four_v3", "api_type": "AEC"}
    for dry_run in (False, True):
        home.refused(restoring(RAY, ray, environment=other), "env mpe/simple_spread_v3",
                     "this config has env classic/connect_four_v3", dry_run=dry_run)


@pytest.mark.parametrize("fields, words", [
    ({"algorithm": "dqn", "algo_params": {}}, ("algorithm PPO", "this config has algorithm dqn")),
    ({"environment": {**RAY_ENV, "env_kwargs": {"N": 3, "max_cycles": 25}}},
     ("policy layout [agent_0 shared, agent_1 shared]", "agent_2 shared]")),
    ({"policy_configuration": "INDEPENDENT"},
     ("policy layout [agent_0 shared, agent_1 shared]", "policy layout [agent_0 agent_0, agent_1 agent_1]")),
])
def test_a_ray_checkpoint_into_another_algorithm_or_policy_layout_is_refused(trained, fields, words):
    home, ray, _ = trained
    home.refused(restoring(RAY, ray, **fields), *words)


def test_a_ray_checkpoint_restores_into_its_own_config(trained):
    """The check lets the matching config through (the algorithm in any case): it is no blanket refusal."""
    home, ray, _ = trained
    path = home.home / "same.json"
    path.write_text(json.dumps(restoring(RAY, ray, algorithm="PPO")))
    proc = run_cli("run", str(path), "--dry-run", home=home.home, timeout=600, env=RAY_CLI_ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_another_workers_checkpoint_is_refused_naming_both_workers(trained):
    home, ray, random = trained
    home.refused(restoring(RAY, random), "worker random; this config has worker ray",
                 "allowed: a checkpoint of a ray run")
    home.refused(restoring(RANDOM, ray), "worker ray; this config has worker random")


@pytest.mark.parametrize("env, words", [
    ({"family": "classic", "env_id": "tictactoe_v3"}, ("env classic/connect_four_v3", "env classic/tictactoe_v3")),
    ({"family": "mpe", "env_id": "simple_spread_v3"},
     ("policy layout [player_0, player_1]", "policy layout [agent_0, agent_1, agent_2]")),
])
def test_a_random_checkpoint_into_another_env_is_refused(trained, env, words):
    home, _, random = trained
    home.refused(restoring(RANDOM, random, environment=env), *words)


def test_an_old_checkpoint_that_did_not_record_a_field_is_compared_on_the_rest():
    """Checkpoints saved before a field was recorded ("" there) still restore; what they hold is compared."""
    check_restore_matches(TrainedAs("random", "random", "", "player_0, player_1"),
                          TrainedAs("random", "random", "classic/tictactoe_v3", "player_0, player_1"))
    with pytest.raises(ConfigError) as err:
        check_restore_matches(TrainedAs("random", "random", "", "player_0, player_1"),
                              TrainedAs("random", "random", "mpe/simple_spread_v3", "agent_0, agent_1"))
    assert str(err.value) == ("checkpoint.restore_from: was trained with policy layout [player_0, player_1]; this "
                              "config has policy layout [agent_0, agent_1]; allowed: a checkpoint of a random run "
                              "with policy layout [agent_0, agent_1]")
