"""`mosaic submit|runs|cancel|pause|resume|logs -f|daemon` with and without a daemon."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from dm_helpers import SHORT_CONFIG, random_config

REPO = Path(__file__).resolve().parents[2]


def mosaic(home: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "MOSAIC_HOME": str(home)}
    env.pop("MOSAIC_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "mosaic", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def write(path: Path, config: dict) -> str:
    path.write_text(json.dumps(config))
    return str(path)


def test_without_a_daemon_submit_is_a_clear_error_and_run_still_works(tmp_path):
    home = tmp_path / "home"
    for args in (("submit", write(tmp_path / "c.json", SHORT_CONFIG)), ("cancel", "x"), ("daemon", "status")):
        proc = mosaic(home, *args)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.strip() == (f"mosaic: error: no daemon serves MOSAIC_HOME={home}; start one with "
                                       "`mosaic daemon` (or run in the foreground with `mosaic run`)")
    proc = mosaic(home, "run", write(tmp_path / "c.json", SHORT_CONFIG))
    assert proc.returncode == 0, proc.stderr
    listing = mosaic(home, "runs")
    assert listing.returncode == 0 and "completed" in listing.stdout


def test_cli_drives_a_run_through_the_daemon(daemon_factory, tmp_path):
    d = daemon_factory()
    home = d.home
    proc = mosaic(home, "submit", write(tmp_path / "long.json", random_config()))
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    d.wait_state(run_id, "RUNNING")
    paused = mosaic(home, "pause", run_id[:17])  # a unique prefix is enough
    assert paused.returncode == 0 and paused.stdout.startswith(f"run {run_id}: paused"), paused
    resumed = mosaic(home, "resume", "latest")
    assert resumed.returncode == 0 and resumed.stdout.startswith(f"run {run_id}: running"), resumed
    # a foreground run next to the daemon's, listed together
    assert mosaic(home, "run", write(tmp_path / "short.json", SHORT_CONFIG)).returncode == 0
    listing = mosaic(home, "runs")
    rows = {line.split()[0]: line.split()[1] for line in listing.stdout.splitlines()[2:]}
    assert rows[run_id] == "running" and sorted(rows.values()) == ["completed", "running"]
    follower = subprocess.Popen([sys.executable, "-m", "mosaic", "logs", "-f", "--raw", run_id],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "MOSAIC_HOME": str(home)})
    cancelled = mosaic(home, "cancel", run_id, "--reason", "from the CLI")
    assert cancelled.returncode == 0
    assert cancelled.stdout.strip() == f"run {run_id}: cancelled (from the CLI)"
    out, err = follower.communicate(timeout=60)
    assert follower.returncode == 0, err
    lines = out.splitlines()
    assert [json.loads(x)["seq"] for x in lines] == list(range(len(lines)))
    assert json.loads(lines[-1])["type"] == "run_cancelled"
    assert d.state(run_id) == "CANCELLED"
    again = mosaic(home, "cancel", run_id)
    assert again.returncode == 2 and again.stderr.startswith("mosaic: error: run ") and "CANCELLED" in again.stderr


def test_submit_follow_exits_with_the_runs_outcome(daemon_factory, tmp_path):
    d = daemon_factory()
    proc = mosaic(d.home, "submit", "--follow", write(tmp_path / "s.json", SHORT_CONFIG))
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.splitlines()[0]
    assert "run_completed" in proc.stdout and f"run {run_id} completed" in proc.stderr
    bad = mosaic(d.home, "submit", write(tmp_path / "bad.json", random_config(total_timesteps=0)))
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("mosaic: error: total_timesteps:") and "\n" not in bad.stderr.strip()


NO_GRPC = "import sys; sys.modules['grpc'] = None; from mosaic.clients.cli import main; sys.exit(main(sys.argv[1:]))"


def test_without_grpc_the_core_cli_works_and_daemon_commands_explain(tmp_path):
    env = {**os.environ, "MOSAIC_HOME": str(tmp_path / "home")}
    # from a folder of its own: a ./var holding runs of another home adds a line pointing to it (cli.runs)
    runs = subprocess.run([sys.executable, "-c", NO_GRPC, "runs"], capture_output=True, text=True,
                          timeout=60, env=env, cwd=tmp_path)
    assert runs.returncode == 0 and runs.stdout.strip() == f"no runs yet in MOSAIC_HOME={tmp_path / 'home'}", runs.stderr
    daemon = subprocess.run([sys.executable, "-c", NO_GRPC, "daemon"], capture_output=True, text=True,
                            timeout=60, env=env)
    assert daemon.returncode == 2
    assert daemon.stderr == "mosaic: error: the daemon needs the 'daemon' extra: pip install 'mosaic-marl[daemon]'\n"
