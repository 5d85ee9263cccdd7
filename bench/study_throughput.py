"""A study's trials run side by side against the same trials one after another; and the driver's own time per trial.

A study exists to spend a tuning budget in as little wall time as the machine allows. Its trials (here: random
play of connect four by the reference worker, one tuning seed, one CPU each, ``tuning.parallel: 2``) are run twice,
in one process of this bench:

* as a study: ``mosaic experiment run SPEC`` through the local daemon (started for the bench's home first, so
  neither side pays a daemon start-up), with ``tuning.parallel: 3``: the daemon's CPU limit runs two trials at
  once and the third waits in its queue, so a core is never idle while the driver tells Optuna of the trial that
  ended and asks for the next (with ``parallel: 2`` that gap cost about 10%: 1.71 at 120k env steps); its tuning wall time runs from the driver's start to the end of its last
  trial (the journal's ``coordinator_started`` and last ``trial_ended``); it is then cancelled (its test runs on
  the five test seeds are not the point);
* one after another: ``mosaic run CELL.json`` for each trial's cell, as the study ran it (its config from the
  journal), each waited for.

The verdict is the paired ratio sequential wall time / study wall time (``bench/pairs.py``) with its 95% interval,
over rounds that alternate which side goes first. Target: at least 1.8 on 2 cores.

The driver's time (journal ``study_driver_time``: every round of the study driver, Optuna's asks, tells and
storage reads and the driver's reading of the experiment's journal, all of it) per trial is compared with a
trial's wall time (its cell's submission to its end). Target: under 1%.

    python bench/study_throughput.py [--rounds 3] [--trials 8] [--timesteps 60000] [--parallel 3] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pairs import save, start_daemon, verdict  # noqa: E402

TARGET = 1.8
DRIVER_SHARE_TARGET = 0.01


def spec(name: str, trials: int, timesteps: int, parallel: int = 3) -> dict:
    return {"name": name, "seeds": [0, 1, 2, 3, 4],
            "base": {"random": {"environment": {"family": "classic", "env_id": "connect_four_v3"},
                                "total_timesteps": timesteps,
                                "reporting": {"every_timesteps": max(1, timesteps // 10)}}},
            # a cap above connect four's longest game (42 moves): sampled, yet every trial plays the same whole games,
            # the workload of bench/experiment_throughput.py (a shorter cap floods the daemon with episode events)
            "tuning": {"space": {"max_episode_steps": {"type": "int", "low": 100, "high": 200}}, "trials": trials,
                       "seeds": [100], "parallel": parallel, "sampler": {"name": "random", "seed": 0}}}


def journal(home: Path, name: str) -> list[dict]:
    path = home / "experiments" / name / "journal.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def mosaic(home: Path, *args: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "mosaic", *args], capture_output=True, text=True,
                          env={**os.environ, "MOSAIC_HOME": str(home)})
    if proc.returncode != 0:
        raise SystemExit(f"mosaic {' '.join(args)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return proc


def study(home: Path, folder: Path, trials: int, timesteps: int, tag: str, parallel: int) -> dict:
    name = f"{tag}-study"
    path = folder / f"{name}.json"
    path.write_text(json.dumps(spec(name, trials, timesteps, parallel)))
    driver = subprocess.Popen([sys.executable, "-m", "mosaic", "experiment", "run", str(path)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "MOSAIC_HOME": str(home)})
    while not any(e["event"] == "best" for e in journal(home, name)):
        if driver.poll() is not None:
            raise SystemExit(f"the study ended before its test: {driver.stderr.read()[-2000:]}")
        time.sleep(0.05)
    mosaic(home, "experiment", "cancel", name)
    driver.wait(120)
    events = journal(home, name)
    start = next(e["ts"] for e in events if e["event"] == "coordinator_started")
    end = max(e["ts"] for e in events if e["event"] == "trial_ended")
    submitted = {e["cell"]: e["ts"] for e in events if e["event"] == "submitted" and e["cell"].startswith("k")}
    ended = {e["cell"]: e["ts"] for e in events if e["event"] == "ended" and e["cell"].startswith("k")}
    trial_walls = [ended[c] - submitted[c] for c in submitted if c in ended]
    driver_s = sum(e["seconds"] for e in events if e["event"] == "study_driver_time")
    configs = [e["cell"]["config"] for e in events if e["event"] == "cell_added" and e.get("trial") is not None]
    return {"wall_s": end - start, "trial_wall_s": sum(trial_walls) / len(trial_walls), "driver_s": driver_s,
            "trials": len(configs), "configs": configs}


def sequential(home: Path, folder: Path, configs: list[dict], tag: str) -> float:
    start = time.monotonic()
    for i, config in enumerate(configs):
        run_id = f"{tag}-seq-{i}"
        path = folder / f"{run_id}.json"
        path.write_text(json.dumps({**config, "run_id": run_id}))
        mosaic(home, "run", str(path))
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--timesteps", type=int, default=60_000, help="env steps per trial")
    parser.add_argument("--parallel", type=int, default=3,
                        help="the study's tuning.parallel: trials in flight; one more than the two that run at once "
                             "keeps the next trial waiting in the daemon's queue")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="mosaic-bench-study-"))
    daemon = start_daemon(home)
    try:
        study_rates, seq_rates, shares = [], [], []
        for r in range(args.rounds):
            folder = home / f"round-{r}"
            folder.mkdir()
            if r % 2 == 0:
                found = study(home, folder, args.trials, args.timesteps, f"r{r}", args.parallel)
                seq_s = sequential(home, folder, found["configs"], f"r{r}")
            else:  # the sequential side first: the same trials, sampled by a study run in a scratch home
                scratch = Path(tempfile.mkdtemp(prefix="mosaic-bench-study-plan-"))
                from mosaic.experiments.spec import parse_spec
                from mosaic.experiments.study.driver import config_values, distributions, per_trial_seed, \
                    quiet_optuna, sampler_for

                parsed = parse_spec(spec(f"r{r}-study", args.trials, args.timesteps))
                dims = parsed.study.dimensions  # type: ignore[union-attr]
                optuna = quiet_optuna()
                sampled = optuna.create_study(storage=None)
                configs = []
                for n in range(args.trials):
                    sampled.sampler = sampler_for("random", per_trial_seed(0, n))
                    t = sampled.ask(fixed_distributions=distributions(dims))
                    sampled.tell(t, 0.0)
                    configs.append(parsed.cell("x", {}, 100, config_values(dims, t.params)).config)
                seq_s = sequential(home, folder, configs, f"r{r}")
                found = study(home, folder, args.trials, args.timesteps, f"r{r}", args.parallel)
                assert [c["max_episode_steps"] for c in configs] == \
                    [c["max_episode_steps"] for c in found["configs"]], "the two sides ran other trials"
                del scratch
            # rates in trials per hour: the pairs' verdict is their ratio, study / sequential
            study_rates.append(found["trials"] / found["wall_s"] * 3600)
            seq_rates.append(found["trials"] / seq_s * 3600)
            shares.append(found["driver_s"] / found["trials"] / found["trial_wall_s"])
            print(f"round {r + 1}: sequential {seq_s:.1f} s, study {found['wall_s']:.1f} s "
                  f"({seq_s / found['wall_s']:.2f}); driver {found['driver_s']:.3f} s for {found['trials']} trials "
                  f"of {found['trial_wall_s']:.1f} s each ({shares[-1]:.3%} per trial)", flush=True)
        result = verdict(study_rates, seq_rates, TARGET)
        print(f"{args.trials} trials of {args.timesteps} env steps on {os.cpu_count()} cores, {args.rounds} rounds")
        for line in result.lines(study_rates, seq_rates):
            print(line.replace("mosaic", "study").replace("direct", "sequential").replace("env steps/s", "trials/h"))
        worst = max(shares)
        print(f"driver time per trial: at most {worst:.3%} of a trial's wall time over the rounds (target under "
              f"{DRIVER_SHARE_TARGET:.0%}): {'PASS' if worst < DRIVER_SHARE_TARGET else 'FAIL'}")
        save(args.out, {"bench": "study_throughput", "trials": args.trials, "timesteps": args.timesteps,
                        "cores": os.cpu_count(), "sides": {"mosaic": "study", "direct": "sequential"},
                        "driver_share_per_trial": shares},
             list(range(args.rounds)), study_rates, seq_rates, result)
    finally:
        daemon.terminate()
        daemon.wait(60)


if __name__ == "__main__":
    main()
