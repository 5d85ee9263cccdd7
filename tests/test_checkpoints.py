"""The typed checkpoint state every worker writes beside its library's checkpoint."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import ClassVar

import pytest

from mosaic.workerkit.checkpoints import (STATE_FILE, CheckpointState, PeriodicCheckpoints, checkpoint_folder, resolve,
                                        run_checkpoints)
from mosaic.errors import ConfigError


@dataclass
class ToyState(CheckpointState):
    FORMAT: ClassVar[str] = "toy-worker/1"

    learner: dict = field(default_factory=dict)


@dataclass
class OtherState(CheckpointState):
    FORMAT: ClassVar[str] = "other-worker/1"


def save(run, iteration: int) -> None:
    folder = checkpoint_folder(run, iteration)
    folder.mkdir(parents=True)
    (folder / "weights.bin").write_bytes(b"\0" * 8)  # the library's files come first …
    ToyState(iteration, iteration * 100, iteration * 3, "run-1", {"lr": 0.1}).write(folder)  # … the state last


def test_a_state_round_trips_typed(tmp_path):
    save(tmp_path, 2)
    state = ToyState.read(checkpoint_folder(tmp_path, 2))
    assert state == ToyState(2, 200, 6, "run-1", {"lr": 0.1})
    on_disk = json.loads((checkpoint_folder(tmp_path, 2) / STATE_FILE).read_text())
    assert on_disk["format"] == "toy-worker/1" and on_disk["timesteps_total"] == 200


def test_a_run_folder_means_its_latest_complete_checkpoint(tmp_path):
    save(tmp_path, 1)
    save(tmp_path, 10)
    checkpoint_folder(tmp_path, 11).mkdir()  # a save that was interrupted: no state file
    assert run_checkpoints(tmp_path) == [checkpoint_folder(tmp_path, 1), checkpoint_folder(tmp_path, 10)]
    assert resolve(tmp_path) == checkpoint_folder(tmp_path, 10)
    assert ToyState.read(tmp_path).iteration == 10


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d.update(format="other-worker/1"), "is a 'other-worker/1' checkpoint, expected 'toy-worker/1'"),
    (lambda d: d.pop("episodes"), "lacks episodes"),
    (lambda d: d.update(iteration="3"), "iteration='3', not an integer"),
])
def test_another_workers_or_a_damaged_state_is_refused_naming_the_field(tmp_path, breakage, message):
    save(tmp_path, 1)
    path = checkpoint_folder(tmp_path, 1) / STATE_FILE
    data = json.loads(path.read_text())
    breakage(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        ToyState.read(tmp_path, "restore_from", "the toy worker")
    assert str(err.value).startswith("restore_from") and message in str(err.value)


def test_paths_that_hold_no_checkpoint(tmp_path):
    with pytest.raises(ConfigError, match="restore_from.*does not exist"):
        OtherState.read(tmp_path / "nope", "restore_from")
    with pytest.raises(ConfigError, match=f"neither a checkpoint of the toy worker \\(no {STATE_FILE} in it\\)"):
        ToyState.read(tmp_path, "restore_from", "the toy worker")
    (tmp_path / STATE_FILE).write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read"):
        ToyState.read(tmp_path, "restore_from")


@pytest.mark.parametrize("keep,left", [(None, [1, 2, 3, 4]), (2, [3, 4]), (1, [4])])
def test_periodic_checkpoints_keep_the_newest(tmp_path, keep, left):
    """`checkpoint.keep` K: after each periodic save the newest K stay; a final checkpoint is never counted."""
    periodic = PeriodicCheckpoints(keep)
    for iteration in (1, 2, 3, 4):
        folder = checkpoint_folder(tmp_path, iteration)
        folder.mkdir(parents=True)
        (folder / STATE_FILE).write_text("{}")
        periodic.add(folder)
    final = checkpoint_folder(tmp_path, 5)
    final.mkdir()
    (final / STATE_FILE).write_text("{}")
    assert run_checkpoints(tmp_path) == [checkpoint_folder(tmp_path, i) for i in [*left, 5]]
