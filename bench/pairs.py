"""What the throughput benches share: how a direct run is started, and how pairs become a verdict.

Every ``bench/<worker>_throughput.py`` runs pairs: the same training through MOSAIC and
run with the library directly, same settings. Two things make a pair like for like, and
they are the same for every worker:

* **the process.** MOSAIC starts a worker with ``PYTHONHASHSEED`` from the run's seed (a
  fixed layout of every dict and set, for repeatable runs) and in a session of its own
  (so that a cancel reaches its whole process group). Linux schedules each session as one
  group (autogroup), so on a busy machine a process sharing the bench's session gets
  another share of the CPU than one in its own. :func:`direct_env` and :data:`NEW_SESSION`
  give the direct side the same two;
* **the estimate.** A pair is the unit: what drifts between pairs (the machine's load,
  its clock) cancels within one. :func:`verdict` decides on the geometric mean of the
  per-pair ratios with a 95% t-interval, and reports the ratio of the two medians with a
  bootstrap interval beside it (it ignores the pairing, so it is wider).

The target is met only when the paired interval lies wholly at or above it.

How the two sides of a pair share the machine (:func:`run_pair`):

* ``concurrent`` (the default, needs 2 CPUs): both at once, each pinned to its own CPU
  (MOSAIC's whole process tree, ``mosaic run`` included, on one; the direct run on the
  other; swapped every pair). The direct run starts when MOSAIC's worker process does.
  Drift over time hits both sides alike, and MOSAIC's own processes compete with its
  worker for one CPU, which can only make MOSAIC look slower;
* ``alternate``: one after the other, MOSAIC first in even pairs and second in odd ones,
  so neither side always runs on a machine the other has just warmed or heated.
"""

from __future__ import annotations

import math
import os
import random
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

TARGET = 0.97


def start_daemon(home: Path, timeout: float = 60.0) -> subprocess.Popen:
    """A MOSAIC daemon serving ``home``, started before a bench's first side so that neither side pays its start-up,
    returned once it answers (stop it with ``terminate()``)."""
    import sys

    daemon = subprocess.Popen([sys.executable, "-m", "mosaic", "daemon", "--port", "0"],
                              env={**os.environ, "MOSAIC_HOME": str(home)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from mosaic.host.daemon.endpoint import find_daemon

    deadline = time.monotonic() + timeout
    while find_daemon(home) is None:
        if daemon.poll() is not None or time.monotonic() > deadline:
            daemon.terminate()
            raise SystemExit("the bench's daemon did not start")
        time.sleep(0.1)
    return daemon


#: Keyword arguments of ``subprocess.run``/``Popen``: the direct side in a session of its own.
NEW_SESSION = {"start_new_session": True}


def direct_env(environ: dict[str, str], seed: int) -> dict[str, str]:
    """``environ`` with the ``PYTHONHASHSEED`` MOSAIC gives a worker whose run has ``seed``."""
    return {**environ, "PYTHONHASHSEED": str(seed % 4294967296)}


MODES = ("concurrent", "alternate")


def pinned(cpu: int | None) -> Callable[[], None] | None:
    """A ``preexec_fn`` that pins the child (and everything it starts) to one CPU; ``None`` for no pinning."""
    return None if cpu is None else (lambda: os.sched_setaffinity(0, {cpu}))


def wait_for_child(root_pid: int, match: Callable[[list[str]], bool], timeout: float = 300.0) -> list[str]:
    """The command line of the first process under ``root_pid`` that ``match`` accepts, once it runs."""
    import psutil

    deadline = time.monotonic() + timeout
    root = psutil.Process(root_pid)
    while time.monotonic() < deadline:
        for child in root.children(recursive=True):
            try:
                line = child.cmdline()
            except psutil.Error:
                continue
            if match(line):
                return line
        if not root.is_running() or root.status() == psutil.STATUS_ZOMBIE:
            break
        time.sleep(0.05)
    raise SystemExit(f"no matching process started under {root_pid}")


def is_worker(line: list[str]) -> bool:
    """A MOSAIC worker running a run, not a describe call: ``<worker>.cli --handshake`` (how ``mosaic run`` starts
    one: it is told its run folder once the config passed) or ``--config ... --run-dir ...``."""
    return "--handshake" in line or "--run-dir" in line


def check_mode(mode: str) -> None:
    if mode == "concurrent" and len(os.sched_getaffinity(0)) < 2:
        raise SystemExit("--mode concurrent needs 2 CPUs; use --mode alternate")


@dataclass
class Side:
    """How one side of a pair is started; its output goes to ``<folder>/<name>.stdout`` and ``.stderr``."""

    name: str
    command: list[str]
    env: dict[str, str]
    cwd: Path
    new_session: bool = False
    out: str = field(default="", init=False)
    err: str = field(default="", init=False)

    def start(self, folder: Path, cpu: int | None) -> subprocess.Popen:
        folder.mkdir(parents=True, exist_ok=True)
        self._files = (folder / f"{self.name}.stdout", folder / f"{self.name}.stderr")
        # files, not pipes: a pipe nobody reads while the other side runs could fill and stall the child
        with self._files[0].open("w") as out, self._files[1].open("w") as err:
            return subprocess.Popen(self.command, stdout=out, stderr=err, cwd=self.cwd, env=self.env,
                                    preexec_fn=pinned(cpu), start_new_session=self.new_session)

    def finish(self, proc: subprocess.Popen) -> "Side":
        code = proc.wait()
        self.out, self.err = (f.read_text() for f in self._files)
        if code != 0:
            raise SystemExit(f"{self.name} exited with {code}:\n{self.err[-3000:]}")
        return self


def run_pair(pair: int, mode: str, mosaic: Side, direct: Side, folder: Path,
             worker: Callable[[list[str]], bool] = is_worker) -> tuple[Side, Side, tuple[int | None, int | None]]:
    """Run pair number ``pair`` (from 0) in ``mode``; both sides' output, and the CPUs they were pinned to."""
    if mode == "concurrent":
        cores = (pair % 2, 1 - pair % 2)
        proc = mosaic.start(folder, cores[0])
        wait_for_child(proc.pid, worker)
        other = direct.start(folder, cores[1])
        return mosaic.finish(proc), direct.finish(other), cores
    first, second = (mosaic, direct) if pair % 2 == 0 else (direct, mosaic)
    first.finish(first.start(folder, None))
    second.finish(second.start(folder, None))
    return mosaic, direct, (None, None)


def where(cores: tuple[int | None, int | None]) -> str:
    return f" (mosaic on CPU {cores[0]}, direct on CPU {cores[1]})" if cores[0] is not None else ""


def paired_ratio(mosaic: list[float], direct: list[float]) -> tuple[float, float, float]:
    """Geometric mean of the per-pair ratios mosaic/direct, and its 95% t-interval (on the log ratios)."""
    from mosaic.scoring.interval import t_interval

    logs = [math.log(m / d) for m, d in zip(mosaic, direct)]
    if len(logs) < 2:  # one pair measures no spread
        return math.exp(statistics.fmean(logs)), 0.0, math.inf
    iv = t_interval(logs)
    return math.exp(iv.point), math.exp(iv.low), math.exp(iv.high)


def ratio_of_medians(mosaic: list[float], direct: list[float], draws: int = 5000) -> tuple[float, float, float]:
    """median(mosaic) / median(direct), and its 95% bootstrap interval (pairs resampled together)."""
    rng = random.Random(0)
    pairs = list(zip(mosaic, direct))
    ratios = []
    for _ in range(draws):
        sample = [rng.choice(pairs) for _ in pairs]
        ratios.append(statistics.median(m for m, _ in sample) / statistics.median(d for _, d in sample))
    ratios.sort()
    return (statistics.median(mosaic) / statistics.median(direct), ratios[int(0.025 * draws)],
            ratios[int(0.975 * draws) - 1])


@dataclass(frozen=True)
class Verdict:
    paired: tuple[float, float, float]
    medians: tuple[float, float, float]
    target: float

    @property
    def word(self) -> str:
        _, low, high = self.paired
        return ("met" if low >= self.target else "NOT met" if high < self.target
                else "undecided: the interval straddles the target; run more pairs")

    def lines(self, mosaic: list[float], direct: list[float]) -> list[str]:
        ratio, low, high = self.medians
        paired, p_low, p_high = self.paired
        return [f"per-pair ratios: {', '.join(f'{m / d:.2f}' for m, d in zip(mosaic, direct))}",
                f"direct median {statistics.median(direct):.0f}, mosaic median {statistics.median(mosaic):.0f} "
                f"env steps/s; ratio of medians {ratio:.3f}, 95% bootstrap interval [{low:.3f}, {high:.3f}]",
                f"paired ratio (geometric mean of {len(mosaic)} pairs) {paired:.3f}, 95% interval "
                f"[{p_low:.3f}, {p_high:.3f}] (target >= {self.target}: {self.word})"]

    def to_dict(self) -> dict[str, Any]:
        return {"paired_ratio": list(self.paired), "ratio_of_medians": list(self.medians), "target": self.target,
                "verdict": self.word}


def verdict(mosaic: list[float], direct: list[float], target: float = TARGET) -> Verdict:
    return Verdict(paired_ratio(mosaic, direct), ratio_of_medians(mosaic, direct), target)


def save(path: Path | None, meta: dict[str, Any], seeds: list[int], mosaic: list[float], direct: list[float],
         result: Verdict) -> None:
    """Every pair's rates and the verdict, as JSON (nothing when ``path`` is None)."""
    if path is None:
        return
    import json

    path.write_text(json.dumps({**meta, "pairs": [{"seed": s, "direct": d, "mosaic": m}
                                                  for s, m, d in zip(seeds, mosaic, direct)],
                                **result.to_dict()}, indent=1) + "\n")


def bench_home(worker: str) -> Any:
    """A fresh MOSAIC home (``mosaic.testing.WorkerHome``) whose ``envs/<worker>`` is the worker's environment in
    ``$MOSAIC_HOME``, else in the checkout's ``var/`` whatever the working folder (built first: a no-op when it is
    up to date)."""
    import tempfile

    from mosaic.host import environments as worker_envs
    from mosaic.testing import WorkerHome

    built = worker_envs.build(worker, home=os.environ.get("MOSAIC_HOME") or Path(__file__).resolve().parents[1] / "var")
    return WorkerHome.create(Path(tempfile.mkdtemp(prefix=f"mosaic-bench-{worker}-")), worker, built.path)


def newest_run_events(home: Path) -> list[dict[str, Any]]:
    """The telemetry of the newest run in ``home`` (the one ``mosaic run`` just made)."""
    import json

    run = max((home / "trainer" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    return [json.loads(line) for line in (run / "telemetry.jsonl").read_text().splitlines()]


def mosaic_train_rate(home: Path) -> float:
    """Env steps/s of the newest run in ``home``: ``run_completed``'s env steps over its ``train_seconds``."""
    summary = next(e for e in newest_run_events(home) if e["type"] == "run_completed")["summary"]
    return summary["timesteps_total"] / summary["train_seconds"]


def direct_train_rate(out: str) -> float:
    """Env steps/s a direct script printed with ``--timing`` (``{"timesteps", "train_seconds"}``, the line before
    its last)."""
    import json

    timing = json.loads(out.strip().splitlines()[-2])
    return timing["timesteps"] / timing["train_seconds"]


def measure(count: int, mode: str, home: Path, sides: Callable[[int, Path], tuple[Side, Side]],
            mosaic_rate: Callable[[Side], float],
            direct_rate: Callable[[Side], float]) -> tuple[list[float], list[float]]:
    """Run ``count`` pairs: ``sides(pair, folder)`` says how each side of pair ``pair`` starts (``folder`` is the
    pair's own, under ``home``), and the two rate functions read each finished side's env steps/s."""
    mosaic_rates: list[float] = []
    direct_rates: list[float] = []
    for pair in range(count):
        folder = home / f"pair-{pair}"
        folder.mkdir()
        mosaic, direct = sides(pair, folder)
        mosaic, direct, cores = run_pair(pair, mode, mosaic, direct, folder)
        mosaic_rates.append(mosaic_rate(mosaic))
        direct_rates.append(direct_rate(direct))
        print(f"pair {pair + 1}: direct {direct_rates[-1]:.0f} env steps/s, mosaic {mosaic_rates[-1]:.0f}"
              f"{where(cores)}", flush=True)
    return mosaic_rates, direct_rates


def conclude(title: str, meta: dict[str, Any], seeds: list[int], mosaic: list[float], direct: list[float],
             path: Path | None) -> int:
    """Print the verdict under ``title``, keep every pair in ``path`` (JSON) if given; the bench's exit code:
    0 when the target is met (the paired interval wholly at or above it), else 1."""
    result = verdict(mosaic, direct)
    print(title)
    print("\n".join(result.lines(mosaic, direct)))
    save(path, meta, seeds, mosaic, direct, result)
    return 0 if result.word == "met" else 1
