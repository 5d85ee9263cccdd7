"""Experiments on a Ray cluster (``--backend ray``): a real two-node cluster on this machine.

The module starts a head node and one more node with ``ray start`` (one CPU each, their own temp dirs
and ports, no dashboard) and stops them by process id at the end; it never uses ``ray stop`` (which
stops every Ray on the machine). The grids are real: CleanRL and Tianshou in their own environments
for the comparison with ``mosaic run``; the reference worker (slowed by ``step_delay_s``) for cancel,
a killed driver and a killed node. The node is killed last: the cluster is one node short after it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_support import REPO, run_cli
from mosaic.pids import is_running
from mosaic.testing.ray_nodes import ENV, FAST_HEALTH_CHECKS, processes_of, raylet, start_node, stop_node
from mosaic.testing.waiting import wait_until

pytestmark = pytest.mark.xdist_group("ray_cluster")



# -- the cluster ---------------------------------------------------------------------------------------------
def _start_node(temp_dir: str, worker_ports: tuple[int, int], head: str | None = None) -> str:
    return start_node(temp_dir, worker_ports, head, env=FAST_HEALTH_CHECKS)


@dataclass
class Cluster:
    address: str
    head: str  # temp dirs
    node: str

    def node_id(self, temp_dir: str) -> str:
        return raylet(temp_dir)[1]


@pytest.fixture(scope="module")
def cluster():
    head_dir = tempfile.mkdtemp(prefix="mray-h-", dir="/tmp")  # short: Ray's socket paths must fit 107 bytes
    node_dir = tempfile.mkdtemp(prefix="mray-n-", dir="/tmp")
    base = 30000 + (os.getpid() % 200) * 100
    try:
        address = _start_node(head_dir, (base, base + 49))
        _start_node(node_dir, (base + 50, base + 99), head=address)
        yield Cluster(address, head_dir, node_dir)
    finally:
        stop_node(node_dir, grace_s=1.0)  # a throwaway cluster: what SIGTERM has not ended in 1 s is killed
        stop_node(head_dir, grace_s=1.0)
        import shutil

        for folder in (head_dir, node_dir):
            shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def exp_home(tmp_path_factory):
    """A home with CleanRL's and Tianshou's environments (every node sees it: one machine)."""
    from mosaic.testing import worker_env_for_tests

    home = tmp_path_factory.mktemp("ray-experiments") / "home"
    (home / "envs").mkdir(parents=True)
    for worker in ("cleanrl", "tianshou"):
        env = worker_env_for_tests(worker, REPO, lambda w=worker: tmp_path_factory.mktemp(f"{w}-env"))
        (home / "envs" / worker).symlink_to(env, target_is_directory=True)
    return home


# -- helpers -----------------------------------------------------------------------------------------------------
def _write(path: Path, spec: dict) -> Path:
    path.write_text(json.dumps(spec))
    return path


def _random_spec(name: str, cells: int, steps: int = 100, delay: float = 0.03, retries: int = 2,
                 fastlane: bool = False) -> dict:
    return {"name": name, "retries": retries, "seeds": cells,
            "base": {"random": {"environment": {"family": "classic", "env_id": "tictactoe_v3"},
                                "total_timesteps": steps, "step_delay_s": delay, "fastlane": {"enabled": fastlane},
                                "reporting": {"every_timesteps": 20}}}}


def _experiment(home: Path, out: Path, *args: str) -> subprocess.Popen:
    """``mosaic experiment ARGS`` in the background, its output in ``out``.{stdout,stderr}."""
    return subprocess.Popen([sys.executable, "-m", "mosaic", "experiment", *args],
                            stdout=out.with_suffix(".stdout").open("w"), stderr=out.with_suffix(".stderr").open("w"),
                            env={**ENV, "MOSAIC_HOME": str(home)})


def _cli(home: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return run_cli(*args, home=home, timeout=timeout, env={"RAY_AUTH_MODE": "disabled"})


def _journal(home: Path, name: str) -> list[dict]:
    path = home / "experiments" / name / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _status(home: Path, name: str) -> dict:
    proc = _cli(home, "experiment", "status", name, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def _manifest(home: Path, run_id: str) -> dict:
    return json.loads((home / "trainer" / "runs" / run_id / "analytics.json").read_text())


def _events(home: Path, run_id: str) -> list[dict]:
    path = home / "trainer" / "runs" / run_id / "telemetry.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _episode_returns(run_dir: Path) -> list[float]:
    events = [json.loads(line) for line in (run_dir / "telemetry.jsonl").read_text().splitlines()]
    return [round(sum(e["returns"].values()), 9) for e in events if e["type"] == "episode"]


def _launchers(cluster: Cluster) -> list[int]:
    """Launcher actors alive on either node."""
    out = []
    for temp_dir in (cluster.head, cluster.node):
        for pid in processes_of(temp_dir):
            try:
                if b"RayCellLauncher" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    out.append(pid)
            except OSError:
                continue
    return out


def _finish(proc: subprocess.Popen, out: Path, timeout: float) -> str:
    proc.wait(timeout)
    return out.with_suffix(".stderr").read_text()


# -- the tests ---------------------------------------------------------------------------------------------------
def test_a_grid_on_the_cluster_gives_the_episodes_mosaic_run_gives(cluster, exp_home, tmp_path):
    """CleanRL's DQN and Tianshou's DQN, two seeds each, one cell per node at a time; and each cell alone."""
    spec = _write(tmp_path / "two.json", {
        "name": "cluster-two", "seeds": [3, 4], "axes": {"worker": ["cleanrl", "tianshou"]},
        "settings": {"total_timesteps": 800},
        "base": {"cleanrl": {"algorithm": "dqn", "environment": {"family": "gymnasium", "env_id": "CartPole-v1"},
                             "resources": {"threads": 1}, "algo_params": {"learning_starts": 300},
                             "checkpoint": {"every_timesteps": 0}},
                 "tianshou": {"algorithm": "dqn", "environment": {"family": "gymnasium", "env_id": "CartPole-v1"},
                              "num_envs": 2, "learning_starts": 200, "test_every_timesteps": 0,
                              "reporting": {"every_timesteps": 400}, "checkpoint": {"every_timesteps": 0}}}})
    out = tmp_path / "run"
    coordinator = _experiment(exp_home, out, "run", str(spec), "--backend", "ray", "--address", cluster.address)
    plan_path = exp_home / "experiments" / "cluster-two" / "plan.json"
    wait_until(plan_path.exists, 300, "the plan", interval=0.1, proc=coordinator)
    # each cell alone, with `mosaic run` on this machine, at the lowest priority while the grid runs (the
    # episodes do not depend on when or beside what a run runs)
    alone = {}
    for cell in json.loads(plan_path.read_text())["cells"]:
        config = _write(tmp_path / f"{cell['cell_id']}.json", {**cell["config"], "run_id": f"alone-{cell['cell_id']}"})
        alone[cell["cell_id"]] = subprocess.Popen(
            [sys.executable, "-m", "mosaic", "run", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env={**ENV, "MOSAIC_HOME": str(exp_home)}, preexec_fn=lambda: os.nice(19))
    err = _finish(coordinator, out, 600)
    assert coordinator.returncode == 0, err[-3000:]
    assert "cells run on the Ray cluster at" in err
    status = _status(exp_home, "cluster-two")
    assert [c["state"] for c in status["cells"]] == ["completed"] * 4
    assert [c["attempts"] for c in status["cells"]] == [1] * 4
    nodes = {_manifest(exp_home, c["run_id"])["node"]["id"] for c in status["cells"]}
    assert nodes == {cluster.node_id(cluster.head), cluster.node_id(cluster.node)}  # both nodes ran cells
    for row in status["cells"]:
        run_dir = exp_home / "trainer" / "runs" / row["run_id"]
        manifest = _manifest(exp_home, row["run_id"])
        assert manifest["status"] == "completed" and manifest["cluster"]["finalized"], manifest
        assert (run_dir / "logs" / "worker.log").is_file()  # the node's artefacts were copied here
        _out, err = alone[row["cell"]].communicate(timeout=300)
        assert alone[row["cell"]].returncode == 0, err[-2000:]
        via_cluster = _episode_returns(run_dir)
        assert len(via_cluster) > 3
        assert via_cluster == _episode_returns(exp_home / "trainer" / "runs" / f"alone-{row['cell']}"), row
    assert not _launchers(cluster)  # every launcher was released once its run had come back


def test_cancel_leaves_no_process_and_no_shared_memory_on_any_node(cluster, tmp_path):
    home = tmp_path / "home"
    spec = _write(tmp_path / "x.json", _random_spec("cluster-cancel", cells=3, steps=5000, delay=0.05,
                                                    retries=0, fastlane=True))
    out = tmp_path / "run"
    coordinator = _experiment(home, out, "run", str(spec), "--backend", "ray", "--address", cluster.address)
    runs = ["cluster-cancel-c000-a1", "cluster-cancel-c001-a1", "cluster-cancel-c002-a1"]

    def two_running_with_frames():
        try:
            running = [r for r in runs if _manifest(home, r).get("node") and len(_events(home, r)) > 2]
        except FileNotFoundError:
            return None
        segments = [n for n in os.listdir("/dev/shm") if n.startswith("mosaic") and "cluster-cancel" in n]
        return len(running) == 2 and len(segments) >= 2 and running

    running = wait_until(two_running_with_frames, 120, "two cells streaming frames", interval=0.1, proc=coordinator)
    # the third waits for a CPU; the two running ones stream their telemetry here while they run
    assert all(_manifest(home, r)["status"] == "running" for r in running)
    node_runs = [Path(_manifest(home, r)["node"].get("run_dir") or home / "cluster" / "trainer" / "runs" / r) for r in running]
    pids = []
    for folder in node_runs:
        node_manifest = json.loads((folder / "analytics.json").read_text())
        pids += [node_manifest["pid"], node_manifest["guard_pid"]]
    assert all(is_running(p) for p in pids)
    proc = _cli(home, "experiment", "cancel", "cluster-cancel")
    assert proc.returncode == 0, proc.stderr
    err = _finish(coordinator, out, 120)
    assert coordinator.returncode == 3, err[-3000:]
    assert not [p for p in pids if is_running(p)], "a worker outlived the cancel"
    assert not [n for n in os.listdir("/dev/shm") if n.startswith("mosaic") and "cluster-cancel" in n]
    assert not _launchers(cluster), "a launcher outlived the cancel"
    status = _status(home, "cluster-cancel")
    assert [c["state"] for c in status["cells"]] == ["cancelled"] * 3
    assert all(c["causes"] == ["experiment cancelled"] for c in status["cells"]), status
    for r in running:  # their last line came back before the launchers went, and so did their files
        assert _events(home, r)[-1]["type"] == "run_cancelled"
        assert (home / "trainer" / "runs" / r / "logs" / "worker.log").is_file()


def test_a_killed_driver_is_resumed_without_repeating_a_finished_cell(cluster, tmp_path, monkeypatch):
    """With shared storage: the run folders are written where every node sees them, linked from here."""
    home, storage = tmp_path / "home", tmp_path / "shared"
    monkeypatch.setitem(ENV, "MOSAIC_RAY_STORAGE", str(storage))
    monkeypatch.setenv("MOSAIC_RAY_STORAGE", str(storage))
    spec = _write(tmp_path / "k.json", _random_spec("cluster-resume", cells=4, steps=100, delay=0.03))
    out = tmp_path / "run"
    coordinator = _experiment(home, out, "run", str(spec), "--backend", "ray", "--address", cluster.address)
    wait_until(lambda: [e for e in _journal(home, "cluster-resume") if e["event"] == "ended"], 120,
               "a first cell to complete", interval=0.05, proc=coordinator)
    coordinator.kill()
    coordinator.wait(10)
    finished_before = {e["cell"]: e["run_id"] for e in _journal(home, "cluster-resume")
                       if e["event"] == "ended" and e["state"] == "completed"}
    assert 0 < len(finished_before) < 4, "the grid finished before the driver could be killed"
    proc = _cli(home, "experiment", "resume", "cluster-resume")
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = _status(home, "cluster-resume")
    assert [c["state"] for c in status["cells"]] == ["completed"] * 4
    for row in status["cells"]:
        assert row["attempts"] == 1, row  # runs in flight were taken up where they were, none ran twice
        if row["cell"] in finished_before:
            assert row["run_id"] == finished_before[row["cell"]]
        events = _events(home, row["run_id"])
        assert [e["seq"] for e in events] == list(range(len(events)))  # no line lost or repeated on the way
        assert events[-1]["type"] == "run_completed"
        checkpoints = home / "trainer" / "runs" / row["run_id"] / "checkpoints"
        assert checkpoints.resolve() == (storage / "trainer" / "runs" / row["run_id"] / "checkpoints").resolve()
        assert any(checkpoints.iterdir())
        saved = next(e for e in events if e["type"] == "checkpoint_saved")["path"]
        assert saved.startswith(str(checkpoints)) and Path(saved).is_dir()  # paths name the run's folder here
    assert not _launchers(cluster)


def test_a_small_study_runs_on_the_cluster(cluster, tmp_path):
    """A study with the same commands on the cluster backend: its trials are cells on either node, each trial's
    value is the mean of its two tuning runs' scores (their telemetry, streamed back here), Optuna's journal in the
    experiment's folder ends with exactly the budgeted trials, and the best trial runs on the five test seeds."""
    home = tmp_path / "home"
    spec = {"name": "cluster-study", "seeds": [0, 1, 2, 3, 4],
            "base": {"random": {"environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL"},
                                "total_timesteps": 100, "reporting": {"every_timesteps": 25}}},
            "tuning": {"space": {"max_episode_steps": {"type": "int", "low": 5, "high": 25}}, "trials": 3,
                       "seeds": [10, 11], "sampler": {"name": "random", "seed": 0}}}
    proc = _cli(home, "experiment", "run", str(_write(tmp_path / "s.json", spec)), "--backend", "ray",
                "--address", cluster.address)
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = _status(home, "cluster-study")
    assert status["study"]["phase"] == "testing"
    (contender,) = status["study"]["contenders"]
    assert (contender["asked"], contender["completed"]) == (3, 3)
    journal = _journal(home, "cluster-study")
    nodes = set()
    for trial in contender["trials_list"]:
        runs = [e["run_id"] for e in journal if e["event"] == "submitted" and e["cell"].startswith(
            f"k0t{trial['number']:03d}s")]
        scores = []
        for run_id in runs:
            events = _events(home, run_id)
            assert events[-1]["type"] == "run_completed"
            assert next(e for e in events if e["type"] == "run_started")  # its telemetry came back here
            nodes.add(_manifest(home, run_id)["node"]["id"])
            points = [(e["timesteps_total"], e["episode_return_mean"]) for e in events
                      if e["type"] == "metrics" and e.get("episode_return_mean") is not None]
            last = points[-1][0]
            window = [y for x, y in points if x >= 0.9 * last]
            scores.append(sum(window) / len(window))
        assert trial["value"] == pytest.approx(sum(scores) / 2)
    assert len(nodes) == 2, "two trials in flight hold four one-CPU cells: both nodes ran some"
    tests = [c for c in status["cells"] if c["cell"].startswith("c")]
    assert [(c["seed"], c["state"]) for c in tests] == [(s, "completed") for s in range(5)]
    assert not _launchers(cluster)


def test_a_killed_launcher_takes_the_whole_tree_of_its_worker_with_it(cluster, exp_home, tmp_path):
    """CleanRL's worker runs CleanRL's script as a child in a session of its own; SIGKILL of the launcher
    (the Ray actor) leaves neither, and the run fails as a lost launcher, not as a crashed worker."""
    spec = _write(tmp_path / "l.json", {
        "name": "cluster-launcher", "seeds": 1, "retries": 0,
        "base": {"cleanrl": {"algorithm": "dqn", "environment": {"family": "gymnasium", "env_id": "CartPole-v1"},
                             "total_timesteps": 500000, "resources": {"threads": 1},
                             "checkpoint": {"every_timesteps": 0}}}})
    out = tmp_path / "run"
    coordinator = _experiment(exp_home, out, "run", str(spec), "--backend", "ray", "--address", cluster.address)
    node_run = exp_home / "cluster" / "trainer" / "runs" / "cluster-launcher-c000-a1"

    def tree():
        try:
            manifest = json.loads((node_run / "analytics.json").read_text())
        except (FileNotFoundError, ValueError):
            return None
        from mosaic.host.cell_launcher import descendants

        below = descendants(manifest["guard_pid"]) if manifest.get("guard_pid") else []
        scripts = [p for p in below if b"cleanrl.dqn" in Path(f"/proc/{p}/cmdline").read_bytes()]
        return scripts and [manifest["guard_pid"], *below]

    pids = wait_until(tree, 180, "CleanRL's script to run below its worker", interval=0.1, proc=coordinator)
    launcher = int(Path(f"/proc/{pids[0]}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert launcher in _launchers(cluster)
    os.kill(launcher, signal.SIGKILL)
    err = _finish(coordinator, out, 120)
    assert coordinator.returncode == 1, err[-3000:]  # the one cell failed, no retry left
    # the claim is that none is left, not how fast: on a loaded machine the tree took over 10 s to go
    wait_until(lambda: not [p for p in pids if is_running(p)], 60, "the worker's tree to go")
    (row,) = _status(exp_home, "cluster-launcher")["cells"]
    assert row["state"] == "failed" and row["causes"][0].startswith("launcher lost"), row


def test_a_viewer_on_the_driver_asks_a_running_cell_for_its_frames(cluster, tmp_path):
    """FastLane frames stay on their node until a viewer asks: `mosaic watch RUN --snapshot` on the driver
    gets the newest frame from the cell's launcher; a window is refused naming where the frames are."""
    from mosaic.fastlane.png import read_png

    home = tmp_path / "home"
    spec = _write(tmp_path / "f.json", _random_spec("cluster-frames", cells=1, steps=3000, delay=0.02,
                                                     fastlane=True))
    out = tmp_path / "run"
    coordinator = _experiment(home, out, "run", str(spec), "--backend", "ray", "--address", cluster.address)
    run_id = "cluster-frames-c000-a1"
    wait_until(lambda: len(_events(home, run_id)) > 3, 120, "the cell's first events", interval=0.1,
               proc=coordinator)
    shot = tmp_path / "frame.png"
    got = _cli(home, "watch", run_id, "--snapshot", str(shot), "--timeout", "60")
    assert got.returncode == 0 and "fetched from the run's node" in got.stdout, got.stderr[-2000:]
    pixels, meta = read_png(shot)
    assert pixels.ndim == 3 and pixels.shape[2] in (3, 4) and meta["run_id"] == run_id
    window = _cli(home, "watch", run_id, "--duration", "1")
    assert window.returncode == 2 and "--snapshot" in window.stderr and "mosaic watch" in window.stderr
    assert _cli(home, "experiment", "cancel", "cluster-frames").returncode == 0
    _finish(coordinator, out, 120)


def test_an_rllib_cell_trains_inside_its_reservation_and_evaluates_here(cluster, tmp_path):
    """A Ray-worker cell on the cluster: its own RLlib Ray gets the cell's CPUs (1 here, on 1-CPU nodes), not
    the node's or the cluster's; its checkpoint comes back and `mosaic eval` plays it on this machine."""
    home = tmp_path / "home"
    spec = _write(tmp_path / "rl.json", {
        "name": "cluster-rllib", "seeds": [0],
        "base": {"ray": {"algorithm": "ppo", "total_timesteps": 400, "resources": {"cpus": 1},
                         "environment": {"family": "classic", "env_id": "tictactoe_v3", "api_type": "AEC"},
                         "policy_configuration": "INDEPENDENT", "rllib": {"num_env_runners": 0},
                         "algo_params": {"train_batch_size_per_learner": 200, "minibatch_size": 100,
                                         "num_epochs": 1, "fcnet_hiddens": [32, 32]}}}})
    out = tmp_path / "run"
    coordinator = _experiment(home, out, "run", str(spec), "--backend", "ray", "--address", cluster.address)
    err = _finish(coordinator, out, 600)
    assert coordinator.returncode == 0, err[-3000:]
    (row,) = _status(home, "cluster-rllib")["cells"]
    assert row["state"] == "completed", row
    (started,) = [e for e in _events(home, row["run_id"]) if e["type"] == "run_started"]
    assert started["resources"]["ray"]["CPU"] == 1.0, started["resources"]  # the reservation, not the cluster
    evaluated = _cli(home, "eval", row["run_id"], "--episodes", "2", "--opponent", "random", "--json")
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert json.loads(evaluated.stdout)["num_episodes"] == 2


def test_a_tournament_on_the_cluster_plays_the_games_a_local_one_plays(cluster, tmp_path):
    """`mosaic arena run --backend ray`: shards of games as runs of the ray backend (launcher actors) on both
    nodes, journaled by the driver game by game from their telemetry; the same games, with the same results, as
    the tournament played on this machine; each shard is a run in the driver's store."""
    spec = _write(tmp_path / "t.json", {
        "name": "cluster-c4", "environment": {"family": "classic", "env_id": "connect_four_v3"},
        "players": {"random": "random", "lowest": "scripted:mosaic.arena.heuristics:first_legal",
                    "heuristic": "scripted:mosaic.arena.heuristics:connect_four"},
        "games_per_pairing": 8, "seed": 1})
    journals = {}
    for where, extra in (("cluster", ("--backend", "ray", "--address", cluster.address)), ("local", ())):
        home = tmp_path / where
        done = _cli(home, "arena", "run", str(spec), *extra, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        journals[where] = [json.loads(x) for x in (home / "arena" / "cluster-c4" / "games.jsonl").read_text().splitlines()]
    assert len(journals["cluster"]) == 3 * 8
    assert {g["node"] for g in journals["cluster"]} == {cluster.node_id(cluster.head), cluster.node_id(cluster.node)}
    runs = {g["run_id"] for g in journals["cluster"]}
    assert len(runs) >= 2 and all(_manifest(tmp_path / "cluster", r)["status"] == "completed" for r in runs)
    assert all(_manifest(tmp_path / "cluster", r)["worker"] == "arena" for r in runs)
    same = {(g["pairing"], g["game"]): (g["first"], g["returns"], g["length"]) for g in journals["local"]}
    assert {(g["pairing"], g["game"]): (g["first"], g["returns"], g["length"]) for g in journals["cluster"]} == same


def test_a_lost_node_fails_its_cells_and_they_are_retried_on_the_other(cluster, tmp_path):
    """Last: the cluster is one node short afterwards."""
    home = tmp_path / "home"
    spec = _write(tmp_path / "n.json", _random_spec("cluster-node", cells=2, steps=200, delay=0.04, retries=2))
    out = tmp_path / "run"
    coordinator = _experiment(home, out, "run", str(spec), "--backend", "ray", "--address", cluster.address)
    runs = ["cluster-node-c000-a1", "cluster-node-c001-a1"]
    lost_node = cluster.node_id(cluster.node)

    def on_the_node():
        for run in runs:
            manifest = _manifest(home, run) if (home / "trainer" / "runs" / run).is_dir() else {}
            if (manifest.get("node") or {}).get("id") == lost_node and len(_events(home, run)) > 2:
                return run
        return None

    victim = wait_until(on_the_node, 120, "a cell running on the second node", interval=0.1, proc=coordinator)
    node_manifest = json.loads((home / "cluster" / "trainer" / "runs" / victim / "analytics.json").read_text())
    raylet_pid, _ = raylet(cluster.node)
    os.kill(raylet_pid, signal.SIGKILL)
    err = _finish(coordinator, out, 300)
    assert coordinator.returncode == 0, err[-3000:]
    cell = victim.split("-")[-2]
    assert f"{cell}: attempt 1 failed: node lost" in err, err[-3000:]
    status = _status(home, "cluster-node")
    assert [c["state"] for c in status["cells"]] == ["completed"] * 2
    row = next(c for c in status["cells"] if c["cell"] == cell)
    assert row["attempts"] == 2 and row["causes"][0].startswith("node lost"), row
    retry = _manifest(home, row["run_id"])
    assert retry["node"]["id"] == cluster.node_id(cluster.head)  # retried elsewhere
    lost = _manifest(home, victim)
    assert lost["status"] == "failed" and lost["failure"]["message"].startswith("node lost"), lost
    # the worker of the lost node went with its launcher
    assert not is_running(node_manifest["pid"]) and not is_running(node_manifest["guard_pid"])
