"""FastLane on a real RLlib run: PPO on pistonball, frames watched live and after the run."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from ray_support import train
from mosaic.fastlane.follow import StreamFollower
from mosaic.fastlane.gc import inspect
from mosaic.fastlane.png import read_png
from mosaic.fastlane.registry import read_registry
from mosaic.fastlane.shm import list_segments, parse_segment_name
from mosaic.testing import fastlane_leaks

pytestmark = pytest.mark.slow

PISTONBALL = {"family": "butterfly", "env_id": "pistonball_v6", "api_type": "PARALLEL",
              "env_kwargs": {"n_pistons": 3, "max_cycles": 40}}
PISTONS = {"piston_0", "piston_1", "piston_2"}


def override(num_env_runners: int) -> dict:
    return {"environment": PISTONBALL, "rllib": {"num_env_runners": num_env_runners},
            "algorithm": "ppo", "total_timesteps": 160,
                         "algo_params": {"train_batch_size_per_learner": 80, "minibatch_size": 80,
                                         "num_epochs": 1},
            "fastlane": {"enabled": True, "fps": 30}, "tensorboard": False, "checkpoint": {"at_end": False}}


@pytest.fixture(autouse=True)
def no_leaked_segments(tmp_path_factory):
    before = set(list_segments())
    yield
    leaked = fastlane_leaks(before, tmp_path_factory.getbasetemp())  # other MOSAIC runs on the machine are not this test's leaks
    assert not leaked, f"FastLane segments left behind: {sorted(leaked)}"


class LiveWatcher(threading.Thread):
    """Follows every FastLane stream of runs under ``root`` that appears while training runs, as a viewer would."""

    def __init__(self, root) -> None:
        super().__init__(daemon=True)
        self.root = root.resolve()
        self.before = set(list_segments())
        self.stop = threading.Event()
        self.frames: dict[str, list] = {}

    def ours(self, name: str) -> bool | None:
        """None until the segment's header can be read."""
        status = inspect(name)
        if not status.pid:
            return None
        run_dir = status.owner.get("run_dir")
        return bool(run_dir) and Path(run_dir).resolve().is_relative_to(self.root)

    def run(self) -> None:
        followers: dict[str, StreamFollower] = {}
        others: set[str] = set()
        while not self.stop.is_set():
            for name in set(list_segments()) - self.before - set(followers) - others:
                mine = self.ours(name)
                if mine:
                    followers[name] = StreamFollower(name)
                elif mine is False:
                    others.add(name)
            for name, follower in followers.items():
                frame = follower.poll()
                if frame is not None:
                    self.frames.setdefault(parse_segment_name(name)[1], []).append(
                        (frame.pixels.shape, float(frame.pixels.std()), frame.episode, frame.step, dict(frame.meta)))
            self.stop.wait(0.002)
        for follower in followers.values():
            follower.close()


def test_pistonball_ppo_streams_frames_and_watch_snapshots_them(tmp_path, ray_session):
    watcher = LiveWatcher(tmp_path)
    watcher.start()
    try:
        trained = train(tmp_path, override(0))
    finally:
        watcher.stop.set()
        watcher.join(10)
    assert trained.summary["timesteps_total"] >= 160

    # live: the driver's env runner published frames tagged with episode, step and rewards
    live = watcher.frames.get("runner-0")
    assert live, f"no live frame seen (streams: {list(watcher.frames)})"
    shape, std, episode, step, meta = live[-1]
    assert shape == (560, 200, 3) and std > 10
    assert episode >= 0 and step >= 0 and meta["env_id"] == "pistonball_v6"
    # a frame after a step carries that step's rewards and the returns so far, for every agent; the frame of a
    # reset (step 0) none yet (the last frame seen may be either, as the watcher's polling falls)
    stepped = [meta for _, _, _, step, meta in live if step > 0]
    assert stepped, f"no frame after a step among {len(live)} live frames"
    assert all(set(m["rewards"]) == PISTONS and set(m["returns"]) == PISTONS for m in stepped)
    assert all(m["rewards"] == {} and m["returns"] == {} for _, _, _, step, m in live if step == 0)

    # after the run: segments gone, the last frame kept, and `mosaic watch --snapshot` shows it
    run = trained.run
    assert not list_segments(run.run_id)
    entry = read_registry(run.root)["streams"]["runner-0"]
    assert entry["state"] == "closed" and entry["geometry"]["height"] == 560
    out = tmp_path / "f.png"
    proc = subprocess.run([sys.executable, "-m", "mosaic", "watch", run.run_id, "--snapshot", str(out)],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "MOSAIC_HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    pixels, saved_meta = read_png(out)
    assert pixels.shape == (560, 200, 3)
    colours = np.unique(pixels.reshape(-1, 3), axis=0)
    assert pixels.std() > 10 and len(colours) > 5  # the board, pistons and ball, not a blank image
    # the run's last frame follows the same rule: every piston's reward after a step, none on a reset's frame
    # (the run may end just after an episode did, as the sampled batch falls)
    assert saved_meta["stream"] == "runner-0" and saved_meta["step"] >= 0
    assert set(saved_meta["rewards"]) == (PISTONS if saved_meta["step"] > 0 else set()), saved_meta


def test_one_stream_per_remote_env_runner(tmp_path, ray_session):
    trained = train(tmp_path, override(1))
    streams = read_registry(trained.run.root)["streams"]
    assert set(streams) == {"runner-1"}  # the remote runner samples; the driver's local one does not
    assert streams["runner-1"]["state"] == "closed"
    assert streams["runner-1"]["pid"] != os.getpid()
    pixels, meta = read_png(trained.run.root / "fastlane" / "runner-1.png")
    assert pixels.shape == (560, 200, 3) and set(meta["rewards"]) == PISTONS
    assert not list_segments(trained.run.run_id)


def test_disabled_fastlane_leaves_the_env_unwrapped():
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    from mosaic.fastlane.config import FastLaneConfig, FastLaneTarget
    from ray_worker.config import EnvironmentConfig
    from ray_worker.environment import EnvironmentFactory
    from ray_worker.fastlane import FastLaneParallelEnv

    env_cfg = EnvironmentConfig(**{k: v for k, v in PISTONBALL.items()})
    off = EnvironmentFactory(env_cfg, FastLaneTarget("r", None, FastLaneConfig(enabled=False)))()
    assert type(off) is ParallelPettingZooEnv
    on = EnvironmentFactory(env_cfg, FastLaneTarget("r", None, FastLaneConfig(enabled=True)))()
    try:
        assert isinstance(on, FastLaneParallelEnv)
        on.reset(seed=0)
        assert list_segments("r") == ["mosaic_fl.r.runner-0"]
    finally:
        on.close()
        off.close()
    assert not list_segments("r")
