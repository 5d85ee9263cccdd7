"""A worker process sets up with the cyclic garbage collector paused, and runs with it on
(mosaic.workerkit.startup): a real worker process for each way a process is set up (a run, an
evaluation, a player, a batch of configs to check), and a CleanRL script's process."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mosaic.workerkit import startup

REPO = Path(__file__).resolve().parents[1]

#: A worker whose every step says whether the collector runs (``gc.isenabled()``) and how many objects
#: are frozen (``gc.get_freeze_count()``), on stderr as ``STATE <where> <enabled> <frozen>``.
PROGRAM = textwrap.dedent("""
    import gc, json, sys

    from mosaic.workerkit.cli import WorkerProgram, worker_main
    from mosaic.workerkit.evaluation import play_single_agent
    from mosaic.workerkit.player import ScriptedPlayer

    def state(where):
        print("STATE", where, int(gc.isenabled()), gc.get_freeze_count(), file=sys.stderr, flush=True)

    class Config:
        def __init__(self, data):
            self.run_id, self.seed = data["run_id"], 0
        def to_dict(self):
            return {"run_id": self.run_id, "seed": 0}
        @classmethod
        def from_dict(cls, data):
            state("config")
            return cls(data)

    class Runtime:
        def __init__(self, config, context):
            self.ctx = context
            state("set-up")
        def run(self):
            state("before-run_started")
            self.ctx.emitter.run_started(worker="probe", config_digest="0" * 64, versions={}, resources={})
            state("after-run_started")
            return {}

    def evaluate(request):
        state("evaluate-set-up")
        play_single_agent(lambda seed, frames: (state("episode"), (1.0, 1))[1], 2, request.seed)
        return 0

    def make_player(target, options):
        state("player-set-up")
        return ScriptedPlayer(lambda agent, observation: (state("act"), 0)[1])

    PROGRAM = WorkerProgram(name="probe", config_from_dict=Config.from_dict, make_runtime=Runtime,
                            default_config=dict, evaluate=evaluate, make_player=make_player)
    sys.exit(worker_main(PROGRAM))
    """)


def run_probe(tmp_path: Path, *args: str, stdin: str = "") -> tuple[subprocess.CompletedProcess, list[tuple]]:
    script = tmp_path / "probe_worker.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(script), *args], input=stdin, capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    states = [(where, enabled == "1", int(frozen)) for _, where, enabled, frozen in
              (line.split() for line in proc.stderr.splitlines() if line.startswith("STATE "))]
    return proc, states


def test_a_run_sets_up_with_the_collector_paused_and_runs_with_it_on_from_run_started(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"run_id": "probe-run"}))
    (tmp_path / "run").mkdir()
    _, states = run_probe(tmp_path, "--config", str(config), "--run-dir", str(tmp_path / "run"))
    assert [(where, enabled) for where, enabled, _ in states] == [
        ("config", False), ("set-up", False), ("before-run_started", False), ("after-run_started", True)]
    # what the set-up built is frozen: the run's own collections never walk it
    assert states[-1][2] > 10_000 and states[0][2] == 0, states


def test_an_evaluation_plays_its_episodes_with_the_collector_on(tmp_path):
    _, states = run_probe(tmp_path, "--evaluate", str(tmp_path), "--episodes", "2")
    assert [(where, enabled) for where, enabled, _ in states] == [
        ("evaluate-set-up", False), ("episode", True), ("episode", True)]


def test_a_player_answers_with_the_collector_on(tmp_path):
    requests = "\n".join(json.dumps(r) for r in ({"op": "act", "agent": "a", "observation": 0}, {"op": "close"}))
    _, states = run_probe(tmp_path, "--player", "any", stdin=requests + "\n")
    assert [(where, enabled) for where, enabled, _ in states] == [("player-set-up", False), ("act", True)]


def test_checking_many_configs_pauses_the_collector_for_the_first_only(tmp_path):
    lines = "".join(json.dumps({"run_id": f"probe-{i}"}) + "\n" for i in range(3))
    proc, states = run_probe(tmp_path, "--validate-many", stdin=lines)
    assert [json.loads(line)["ok"] for line in proc.stdout.splitlines()] == [True] * 3
    assert [(where, enabled) for where, enabled, _ in states] == [
        ("config", False), ("config", True), ("config", True)]


def test_worker_main_in_a_callers_process_leaves_its_collector_as_it_found_it(capsys):
    """Tests call a worker's main in pytest's own process: it must not leave the collector off there."""
    sys.path.insert(0, str(REPO / "workers" / "random_worker"))
    try:
        from random_worker.cli import main
    finally:
        sys.path.remove(str(REPO / "workers" / "random_worker"))
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    assert main(["--default-config"]) == 0
    assert gc.isenabled() and gc.get_freeze_count() == frozen and not startup.paused()
    with pytest.raises(SystemExit):
        main(["--no-such-flag"])  # argparse's exit, on a user's mistake
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    capsys.readouterr()


def test_pause_and_resume_leave_a_collector_someone_else_stopped_alone():
    gc.disable()
    try:
        startup.pause()
        assert not startup.paused()
        startup.resume(freeze=False)
        assert not gc.isenabled(), "resume must not start a collector that pause did not stop"
    finally:
        gc.enable()
    startup.pause()
    assert startup.paused() and not gc.isenabled()
    startup.pause()  # twice: still one pause
    startup.resume(freeze=False)
    assert gc.isenabled() and not startup.paused()
    startup.resume(freeze=False)  # a second resume does nothing
    assert gc.isenabled()
