"""docs/getting-started.md, walked top to bottom: every `mosaic ...` line of its bash blocks runs.

One temporary MOSAIC_HOME for the whole walk, as a reader has one: later commands use earlier runs
(`latest`, the experiment's name). Its ``envs/`` links the checkout's built worker environments
(xuance is needed; the other up-to-date ones are linked so that `mosaic workers` lists them as the page
shows). Each command is a real ``python -m mosaic`` subprocess, started in a scratch folder whose
``examples`` is the checkout's (so the page's relative paths work and ``frame.png`` lands there).

A command runs as written, except for the small rewrites of :data:`REWRITES` (shorter budgets, fewer
evaluation episodes), each with its reason. A line that cannot run here ends in ``# docs: no-run`` on
the page and names, in :data:`COVERED_ELSEWHERE`, the existing test that covers it instead. The same
holds for the README's command lines (none of them is cheap: see there).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from cli_support import REPO
from test_docs import FENCE, _bash_commands

PAGE = REPO / "docs" / "getting-started.md"
README = REPO / "README.md"
#: A command line ending in this comment is not run here; COVERED_ELSEWHERE says what covers it.
NO_RUN_MARK = "# docs: no-run"
#: Worker environments the page cannot do without (step 6 runs XuanCe); built if the checkout's is not current.
NEEDED_ENVS = ("xuance",)
ENV = {"RAY_AUTH_MODE": "disabled", "QT_QPA_PLATFORM": "offscreen", "RAY_USAGE_STATS_ENABLED": "0"}
SMALL_SPEC = "spread_smoke_small.yaml"


@dataclass(frozen=True)
class Rewrite:
    """How the walk runs one page command instead of exactly as written."""

    why: str
    extra: tuple[str, ...] = ()  # appended (a later --set / --episodes wins over the page's)
    replace: dict[str, str] = field(default_factory=dict)  # argument -> argument
    background: bool = False  # started, and waited for before the next command that is not `mosaic watch`


#: The page's command (its text before the comment) -> how the walk runs it. Every other command runs as written.
REWRITES: dict[str, Rewrite] = {
    "mosaic run --set total_timesteps=4000 --set fastlane.enabled=true": Rewrite(
        "4000 steps took 42 s here (load ~4), most of it Ray starting; 2000 (one PPO update) ~29 s. It runs in the "
        "background: the page's `mosaic watch` block is run while it trains, as the page says",
        extra=("--set", "total_timesteps=2000"), background=True),
    "mosaic eval latest --episodes 10": Rewrite("evaluation episodes capped", extra=("--episodes", "3")),
    # the page's XuanCe run cut from 4000 env steps (4 reports) to 1000: still past its batch_size of 400 (it
    # updates), one report, and the final checkpoint the next line's `mosaic eval` plays; training took 1.2 s of
    # the command's 7.7 s here (the rest is starting XuanCe): the other 3000 steps would add ~3.5 s at that rate
    ("mosaic run examples/xuance_mappo_spread.json --set total_timesteps=4000 --set 'environment.env_kwargs={\"N\": "
     "2, \"max_cycles\": 25}' --set num_envs=2 --set reporting.every_timesteps=1000 --set fastlane.enabled=false"):
        Rewrite("a quarter of the budget", extra=("--set", "total_timesteps=1000")),
    # the page's spec with its four cells (Ray and XuanCe, MAPPO and IPPO), each cut from 2000 env steps on 8
    # envs to 400 on 2 (see _small_spec): the experiment CLI has no --set. Measured under load ~8: 104 s -> 81 s,
    # most of what is left is starting Ray and XuanCe per cell. `plan` checks the page's own spec (3 s).
    "mosaic experiment run examples/experiments/spread_mappo_ippo_smoke.yaml": Rewrite(
        "a copy of the spec with a smaller budget per cell",
        replace={"examples/experiments/spread_mappo_ippo_smoke.yaml": SMALL_SPEC}),
}

#: Lines marked NO_RUN_MARK (page and README) -> the existing test that covers them instead.
COVERED_ELSEWHERE: dict[str, str] = {
    # a window that needs a display and runs until closed
    "mosaic watch latest": "tests/fastlane/test_fl_cli.py::test_window_opens_with_a_display",
    # the GUI blocks until its window closes
    "mosaic gui": "tests/gui/test_gui_command.py::test_mosaic_gui_starts_a_daemon_for_its_home_and_ends_on_sigterm",
    # re-runs the install (pip reinstalls the editable packages of the shared .venv: 41 s of pip resolving
    # alone, measured as a dry run) before the default job: too slow and not harmless here. The default job
    # itself (`mosaic run` with no config, its full 30k env steps) is the test named.
    "bash scripts/run": "tests/test_cli.py::test_the_readme_main_job_visibly_learns",
}
#: Marked lines no test can run, and why.
NOT_TESTABLE: dict[str, str] = {
    "bash scripts/test": "it runs the whole suite, this test included (tests/test_docs.py keeps it on the README)",
}

#: Patterns (re.search, multiline) a command's stdout must show beyond exiting 0: the page's output, where stable.
EXPECT: dict[str, tuple[str, ...]] = {
    "mosaic --version": (r"^mosaic \d",),
    "mosaic workers": (r"^xuance\s+[\d.]+\s+xuance [\d.]+",),  # listed, not broken: its linked env works
    "mosaic workers show ray": ("config fields", "total_timesteps"),
    # the live frame, or (a loaded machine finished the 2000-step run while `mosaic watch` started) its saved last
    "mosaic watch latest --snapshot frame.png": (r"^wrote frame\.png: .*stream runner-\d+(, \d+x\d+x3| \(the stream "
                                                 r"has ended\))",),
    "mosaic runs": (r"completed\s+ray\s+simple_spread_v3\s+ppo",),
    # the short summary first: state, worker/algorithm/env, progress against the budget, return, checkpoints
    "mosaic show latest": (r"^run \S+: completed$", r"^  worker: ray; algorithm: ppo; env: mpe/simple_spread_v3",
                           r"^  progress: (\d+)/\1 env steps", r"^  last mean return: -?\d", r"^  checkpoints: [1-9]"),
    "mosaic eval latest --episodes 10": (r"^3 episodes of mpe/simple_spread_v3", r"^agent_0 "),
    "mosaic experiment plan examples/experiments/spread_mappo_ippo_smoke.yaml": (r"^4 cells",),
    "mosaic experiment run examples/experiments/spread_mappo_ippo_smoke.yaml": (r"^completed 4$",),
    "mosaic experiment report spread-smoke": (r"report\.md$",),
}
#: The same for stderr, where a command prints for the reader what scripts should not parse.
EXPECT_STDERR: dict[str, tuple[str, ...]] = {
    # the report's main table on the terminal: a row per configuration with its IQM and mean intervals, a verdict
    "mosaic experiment report spread-smoke": (
        r"^CONFIGURATION\s+SEEDS\s+IQM\s+MEAN\s+VERDICT$",
        r"^worker=ray algorithm=mappo\s+\d+\s+-?[\d.]+ \[-?[\d.]+, -?[\d.]+\]\s+-?[\d.]+ \[",
        r"^worker=xuance algorithm=ippo\s+\d+\s+", r"^files: \S+/report/ \("),
}


def _command(line: str) -> str:
    """A page line without its comment."""
    return shlex.join(shlex.split(line, comments=True))


def _marked(line: str) -> bool:
    return line.rstrip().endswith(NO_RUN_MARK)


def _all_bash_lines(path: Path) -> list[str]:
    """Every command line of the page's ```bash blocks (not only `mosaic` ones)."""
    lines = []
    for lang, body in FENCE.findall(path.read_text(encoding="utf-8")):
        if lang.strip() in ("bash", "sh", "shell", "console"):
            lines += [ln.strip() for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
    return lines


def _page_commands() -> list[str]:
    return _bash_commands(PAGE)


# -- the home ------------------------------------------------------------------
@pytest.fixture(scope="module")
def walk_home(tmp_path_factory):
    """(home, workdir): a MOSAIC_HOME linking the built worker environments, and the folder commands run in."""
    from mosaic.host import environments as worker_envs
    from mosaic.testing.worker_homes import worker_env_for_tests

    root = tmp_path_factory.mktemp("getting-started")
    home, workdir = root / "home", root / "work"
    (home / "envs").mkdir(parents=True)
    workdir.mkdir()
    (workdir / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    scan = worker_envs.scan()
    for name, source in sorted(scan.sources.items()):
        if not source.declared:
            continue
        if name in NEEDED_ENVS:
            env = worker_env_for_tests(name, REPO, lambda: tmp_path_factory.mktemp(f"{name}-env-home"))
        elif worker_envs.status(source, REPO / "var", check=False).status == "ok":
            env = worker_envs.envs_root(REPO / "var") / name
        else:
            continue  # listed as broken by `mosaic workers`: the page's commands do not need it
        (home / "envs" / name).symlink_to(env, target_is_directory=True)
    _small_spec(workdir / SMALL_SPEC)
    yield home, workdir
    _stop_daemon(home)


def _small_spec(path: Path) -> None:
    """The page's experiment spec with each cell's budget cut from one 2000-step rollout on 8 envs to one
    400-step rollout on 2 envs (RLlib's minibatch 500 -> 100, XuanCe reports once per 400 steps); the same
    name, cells and settings otherwise."""
    import yaml

    spec = yaml.safe_load((REPO / "examples" / "experiments" / "spread_mappo_ippo_smoke.yaml").read_text())
    spec["settings"].update(total_timesteps=400, rollout_env_steps=400, num_envs=2)
    spec["base"]["ray"]["algo_params"]["minibatch_size"] = 100
    spec["base"]["xuance"]["reporting"]["every_timesteps"] = 400
    path.write_text(yaml.safe_dump(spec, sort_keys=False))


def _stop_daemon(home: Path) -> None:
    """`mosaic experiment run` started this home's trainer daemon: stop it and see it gone."""
    from mosaic.host.daemon.endpoint import find_daemon
    from mosaic.testing.waiting import wait_until

    endpoint = find_daemon(home)
    if endpoint is None:
        return
    subprocess.run([sys.executable, "-m", "mosaic", "daemon", "stop"], capture_output=True, text=True,
                   timeout=120, env=_env(home))

    def gone() -> bool:
        try:
            os.kill(endpoint.pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_until(gone, 120, f"daemon pid {endpoint.pid} to stop", interval=0.2)


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "MOSAIC_HOME": str(home), **ENV}


# -- the walk ------------------------------------------------------------------
def _argv(command: str) -> list[str]:
    rewrite = REWRITES.get(command, Rewrite(""))
    words = [rewrite.replace.get(w, w) for w in shlex.split(command)[1:]]
    return [sys.executable, "-m", "mosaic", *words, *rewrite.extra]


def _failure(command: str, argv: list[str], code: int | None, stdout: str, stderr: str, why: str) -> str:
    return (f"{why}\n  page: {command}\n  ran:  {shlex.join(argv[2:])}\n  exit: {code}\n"
            f"--- stdout (tail) ---\n{stdout[-1500:]}\n--- stderr (tail) ---\n{stderr[-3000:]}")


def _check(command: str, argv: list[str], code: int | None, stdout: str, stderr: str) -> None:
    if code != 0:
        raise AssertionError(_failure(command, argv, code, stdout, stderr, "a documented command failed"))
    missing = [s for s in EXPECT.get(command, ()) if not re.search(s, stdout, re.M)]
    missing += [f"stderr: {s}" for s in EXPECT_STDERR.get(command, ()) if not re.search(s, stderr, re.M)]
    if missing:
        raise AssertionError(_failure(command, argv, code, stdout, stderr, f"its output lacks {missing}"))


def test_every_page_command_runs_in_order(walk_home):
    home, workdir = walk_home
    background: tuple[str, list[str], subprocess.Popen, float] | None = None
    durations: list[tuple[float, str]] = []

    def finish_background() -> None:
        nonlocal background
        if background is None:
            return
        command, argv, proc, started_at = background
        background = None
        proc.wait(timeout=600)
        stdout, stderr = (workdir / "background.out").read_text(), (workdir / "background.err").read_text()
        durations.append((time.monotonic() - started_at, f"{command}  (from its start to its end)"))
        _check(command, argv, proc.returncode, stdout, stderr)

    ran, run, watched = 0, None, False
    try:
        for line in _page_commands():
            if _marked(line):
                continue
            command = _command(line)
            if not command.startswith("mosaic watch"):
                finish_background()
            elif background is not None and not watched:
                _wait_for_frames(run, background[2])
                watched = True
            argv = _argv(command)
            started = time.monotonic()
            if REWRITES.get(command, Rewrite("")).background:
                with open(workdir / "background.out", "w") as out, open(workdir / "background.err", "w") as err:
                    proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=workdir, env=_env(home))
                background = (command, argv, proc, started)
                run, watched = _wait_for_run_folder(home, proc), False
            else:
                try:
                    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=workdir,
                                          env=_env(home))
                except subprocess.TimeoutExpired as exc:
                    raise AssertionError(_failure(command, argv, None, str(exc.stdout or ""),
                                                  str(exc.stderr or ""), "a documented command timed out"))
                _check(command, argv, done.returncode, done.stdout, done.stderr)
            durations.append((time.monotonic() - started, command))
            ran += 1
        finish_background()
    finally:
        if background is not None:  # a failure while it trained: end it as Ctrl-C would
            background[2].terminate()
            background[2].wait(timeout=120)
        print("\n".join(f"{s:6.1f} s  {c}" for s, c in durations))
    assert ran >= 14, f"only {ran} commands walked: is the extraction broken?"
    # what the walk left behind is what the page describes
    assert (workdir / "frame.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (home / "experiments" / "spread-smoke" / "report" / "report.md").exists()


def _wait_for_run_folder(home: Path, proc: subprocess.Popen) -> Path:
    """`latest` names the new run only once its folder exists: the `mosaic watch` lines need that."""
    from mosaic.testing.waiting import wait_until

    runs = home / "trainer" / "runs"

    def folders() -> set[Path]:  # as `latest` sees them: not a hidden staging folder, its manifest written
        if not runs.is_dir():
            return set()
        return {p for p in runs.iterdir() if not p.name.startswith(".") and (p / "analytics.json").exists()}

    before = folders()
    (run,) = wait_until(lambda: folders() - before, 300, "the run folder", interval=0.1, proc=proc)
    return run


def _wait_for_frames(run: Path, proc: subprocess.Popen) -> None:
    """A reader runs `mosaic watch` once the run shows frames; its --snapshot waits 30 s for the first one,
    less than Ray takes to start on a loaded machine. So: a stream in the run's FastLane registry first."""
    from mosaic.fastlane.registry import read_registry
    from mosaic.testing.waiting import wait_until

    wait_until(lambda: read_registry(run)["streams"], 600, "a FastLane stream", interval=0.1, proc=proc)


# -- the tables stay true ------------------------------------------------------
def test_rewrites_and_expectations_name_page_commands():
    commands = {_command(line) for line in _page_commands()}
    stale = [c for c in [*REWRITES, *EXPECT, *EXPECT_STDERR] if c not in commands]
    assert not stale, f"entries for commands no longer on {PAGE.name}: {stale}"


@pytest.mark.parametrize("path", [PAGE, README], ids=lambda p: p.name)
def test_marked_lines_name_a_covering_test(path: Path):
    lines = _page_commands() if path == PAGE else _all_bash_lines(README)
    marked = [_command(line) for line in lines if _marked(line)]
    uncovered = [c for c in marked if c not in COVERED_ELSEWHERE and c not in NOT_TESTABLE]
    assert not uncovered, f"{path.name}: lines marked {NO_RUN_MARK!r} without a covering test: {uncovered}"
    for command in (c for c in marked if c in COVERED_ELSEWHERE):
        file, _, name = COVERED_ELSEWHERE[command].partition("::")
        source = (REPO / file).read_text(encoding="utf-8") if (REPO / file).exists() else ""
        assert re.search(rf"^def {re.escape(name)}\(", source, re.M), f"{command}: no test {COVERED_ELSEWHERE[command]}"


def test_readme_commands_are_run_or_covered():
    """The README's command lines are not `mosaic` lines: none runs in the walk, so each is marked and covered."""
    lines = _all_bash_lines(README)
    assert lines, "no command lines found in README.md"
    everywhere = [_command(line) for line in [*lines, *_page_commands()] if _marked(line)]
    unused = [c for c in [*COVERED_ELSEWHERE, *NOT_TESTABLE] if c not in everywhere]
    assert not unused, f"entries for lines no longer marked on the pages: {unused}"
    unmarked = [line for line in lines if not _marked(line)]
    assert not unmarked, f"README.md command lines neither run nor marked {NO_RUN_MARK!r}: {unmarked}"
