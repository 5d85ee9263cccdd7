"""Env steps per second of BenchMARL's MAPPO training through MOSAIC against BenchMARL used directly.

Both sides run in the benchmarl worker's environment with the same algorithm, task, seed and
settings: MAPPO on VMAS balance, BenchMARL's yaml defaults otherwise (10 envs, 6000 frames and
45 passes of 15 minibatches an iteration, one torch thread, BenchMARL's own loggers, evaluation
and checkpoints off):

* direct: a plain BenchMARL script (:data:`DIRECT`, written to each pair's temporary folder):
  ``ExperimentConfig``, ``MappoConfig``, ``VmasTask.BALANCE`` and ``MlpConfig`` from their yaml,
  ``Experiment(...).run()``, as BenchMARL's README writes it without Hydra, nothing observing;
* mosaic: ``mosaic run CONFIG``, with MOSAIC's Callback, telemetry, the safe point after every
  iteration and the final checkpoint.

Before the pairs, the bench checks that the two build the same thing: the direct script's config
dataclasses' values against what ``mosaic run --dry-run`` says the worker builds (the fields that only
say where files go aside).

The rate is env steps (BenchMARL's frames) over the seconds ``Experiment.run()`` took on each side
(MOSAIC's ``run_completed`` reports ``train_seconds``; the direct script prints its own), so
process start-up and building the experiment, which differ in kind, are left out. Pair i uses
seed i + 1 on both sides; the direct side starts as MOSAIC starts a worker. ``bench/pairs.py`` runs
each pair (``--mode concurrent``, the default: both at once, each on its own CPU; or ``alternate``:
one after the other, MOSAIC first in even pairs) and turns the pairs into a verdict (the paired
ratio's 95% interval decides). ``--out`` keeps every pair's rates and the estimates as JSON.

    python bench/benchmarl_throughput.py [--pairs 10] [--frames 24000] [--mode concurrent|alternate]
                                         [--out FILE.json]

``--frames`` is rounded up to whole collections of 6000 by both sides alike. Target: mosaic / direct
>= 0.97. Needs the worker's environment (`mosaic envs build benchmarl`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from mosaic.workerkit.threads import thread_env  # MOSAIC's one torch thread: its variables too
from pairs import (MODES, Side, bench_home, check_mode, conclude, direct_env, direct_train_rate, measure,
                   mosaic_train_rate)

#: BenchMARL as its users run it. ``--settings`` prints the config dataclasses' values instead of training;
#: otherwise the frames and seconds of ``Experiment.run()`` on the line before the last (as the sibling direct
#: scripts' ``--timing`` prints them, read by ``pairs.direct_train_rate``) and the iterations on the last line.
DIRECT = '''\
import dataclasses, json, os, sys, time

os.environ.setdefault("TQDM_DISABLE", "1")
import torch
from benchmarl.algorithms import MappoConfig
from benchmarl.environments import VmasTask
from benchmarl.experiment import Experiment, ExperimentConfig
from benchmarl.models import MlpConfig

frames, seed, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(1)
config = ExperimentConfig.get_from_yaml()
config.max_n_frames = frames
config.loggers = []
config.create_json = False
config.evaluation = False
config.render = False
config.save_folder = folder
task = VmasTask.BALANCE.get_from_yaml()
algorithm = MappoConfig.get_from_yaml()
model = MlpConfig.get_from_yaml()
if "--settings" in sys.argv:
    print(json.dumps({"experiment_config": dataclasses.asdict(config), "algorithm_config": dataclasses.asdict(algorithm),
                      "task_config": task.config, "model_config": {"num_cells": model.num_cells,
                      "activation_class": "torch.nn." + model.activation_class.__name__}}))
    sys.exit()
experiment = Experiment(task=task, algorithm_config=algorithm, model_config=model, seed=seed, config=config)
started = time.perf_counter()
experiment.run()
train_seconds = time.perf_counter() - started
print(json.dumps({"timesteps": experiment.total_frames, "train_seconds": train_seconds}))
print(json.dumps({"iterations": experiment.n_iters_performed}))
'''

#: ExperimentConfig fields that say where files go or how many to keep, not what is trained.
FILES_ONLY = {"save_folder", "restore_file", "restore_map_location", "keep_checkpoints_num"}


def mosaic_config(folder: Path, seed: int, frames: int) -> Path:
    config = folder / "bench.json"
    config.write_text(json.dumps({"worker": "benchmarl", "algorithm": "mappo", "seed": seed,
                                  "environment": {"family": "vmas", "env_id": "balance"},
                                  "total_timesteps": frames, "checkpoint": {"at_end": True}}))
    return config


def check_same_settings(home: Path, python: Path, frames: int) -> None:
    """Exit naming the fields where the direct script's config dataclasses differ from the worker's dry run."""
    folder = home / "settings"
    folder.mkdir()
    (folder / "direct.py").write_text(DIRECT)
    env = {**os.environ, "MOSAIC_HOME": str(home)}
    dry = subprocess.run([sys.executable, "-m", "mosaic", "run", "--dry-run", str(mosaic_config(folder, 1, frames))],
                         capture_output=True, text=True, env=env)
    direct = subprocess.run([str(python), str(folder / "direct.py"), str(frames), "1", str(folder), "--settings"],
                            capture_output=True, text=True, env=env)
    for name, proc in (("mosaic run --dry-run", dry), ("the direct script", direct)):
        if proc.returncode != 0:
            raise SystemExit(f"{name} exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    worker, plain = json.loads(dry.stdout), json.loads(direct.stdout.strip().splitlines()[-1])
    differ = [f"{part}.{field}: mosaic {worker[part].get(field)!r}, direct {value!r}"
              for part in ("experiment_config", "algorithm_config", "task_config", "model_config")
              for field, value in plain[part].items()
              if field not in FILES_ONLY and worker[part].get(field) != value]
    if differ:
        raise SystemExit("the two sides would not train alike:\n  " + "\n  ".join(differ))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--frames", type=int, default=24_000, help="env steps a side trains (whole collections)")
    parser.add_argument("--mode", choices=MODES, default="concurrent")
    parser.add_argument("--out", "--json", type=Path, help="write every pair's rates and the estimates to this file")
    args = parser.parse_args()
    check_mode(args.mode)

    worker_home = bench_home("benchmarl")
    home, python = worker_home.root, worker_home.python
    check_same_settings(home, python, args.frames)
    base = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}

    def sides(pair: int, folder: Path) -> tuple[Side, Side]:
        seed = pair + 1
        script = folder / "direct.py"
        script.write_text(DIRECT)
        (folder / "direct-exp").mkdir()
        return (Side("mosaic", [sys.executable, "-m", "mosaic", "run", str(mosaic_config(folder, seed, args.frames))],
                     {**base, "MOSAIC_HOME": str(home)}, folder),
                Side("direct", [str(python), str(script), str(args.frames), str(seed), str(folder / "direct-exp")],
                     {**direct_env(base, seed), **thread_env(1)}, folder, new_session=True))

    mosaic_rates, direct_rates = measure(args.pairs, args.mode, home, sides, lambda _: mosaic_train_rate(home),
                                         lambda direct: direct_train_rate(direct.out))
    return conclude(f"mappo, VMAS balance, {args.frames} env steps, BenchMARL's yaml settings, {args.mode}, "
                    f"seeds 1-{args.pairs}:",
                    {"worker": "benchmarl", "algorithm": "mappo", "env_id": "vmas/balance", "frames": args.frames,
                     "mode": args.mode}, list(range(1, args.pairs + 1)), mosaic_rates, direct_rates, args.out)

if __name__ == "__main__":
    sys.exit(main())
