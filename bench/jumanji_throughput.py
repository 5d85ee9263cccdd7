"""Env steps per second of Jumanji's A2C training through MOSAIC against jumanji.training run directly.

Both sides run in the jumanji worker's environment, with the same hydra overrides
of Jumanji's own config (environment, agent, seed, batch sizes, network), the same
XLA flags and no compilation cache:

* direct: ``python -m jumanji.training.train <overrides> logger.type=terminal``,
  Jumanji's own script and loop;
* mosaic: ``mosaic run CONFIG``: the same ``train`` function with MOSAIC's logger,
  telemetry, safe point after every epoch and the final checkpoint.

The rate is the env steps of epochs 2..N over the wall time from the end of epoch 1
to the end of epoch N, read from each side's own clock (the direct side's log line
times, MOSAIC's ``metrics`` events): process start-up and the first epoch, which
compiles, are left out; each epoch's evaluation counts on both sides, as it runs on
both. The direct side starts as MOSAIC starts a worker. ``bench/pairs.py`` runs each pair
(``--mode concurrent``, the default: both at once, each on its own CPU; or ``alternate``)
and turns the pairs into a verdict (the paired ratio decides).

    python bench/jumanji_throughput.py [--environment tsp] [--epochs 6] [--pairs 3] [--tiny]
                                       [--mode concurrent|alternate] [--json FILE]

Target: mosaic / direct >= 0.97, on an idle machine. Needs the worker's environment
(`mosaic envs build jumanji`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from pairs import MODES, Side, bench_home, check_mode, conclude, direct_env, measure, newest_run_events

#: The worker's tests' tiny settings (--tiny): a smoke run of this script, not a measurement.
TINY = {"n_steps": 5, "num_envs": 8, "num_learner_steps_per_epoch": 2, "eval_episodes": 8,
        "greedy_eval_episodes": 8}
TINY_NETWORK = {"tsp": {"transformer_num_blocks": 1, "transformer_num_heads": 2, "transformer_key_size": 8,
                        "transformer_mlp_units": [32]}}
#: Moderate settings: epochs of seconds, not of minutes, with Jumanji's own network.
DEFAULT = {"n_steps": 20, "num_envs": 32, "num_learner_steps_per_epoch": 20, "eval_episodes": 100,
           "greedy_eval_episodes": 100}
TRAIN_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]\[.*Train >> Env Steps: ([0-9.e+]+)")


def direct_rate(lines: list[str], steps_per_epoch: int) -> float:
    """Env steps/s from the direct side's ``Train >>`` log lines (hydra stamps each with its time)."""
    stamps = [datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f") for m in map(TRAIN_LINE.search, lines) if m]
    if len(stamps) < 2:
        raise SystemExit("the direct run logged fewer than two epochs")
    return (len(stamps) - 1) * steps_per_epoch / (stamps[-1] - stamps[0]).total_seconds()


def mosaic_rate(events: list[dict], steps_per_epoch: int) -> float:
    stamps = [e["ts"] for e in events if e["type"] == "metrics"]
    return (len(stamps) - 1) * steps_per_epoch / (stamps[-1] - stamps[0])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--environment", default="tsp")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--tiny", action="store_true", help="the tests' tiny network and batches (a smoke run)")
    parser.add_argument("--mode", choices=MODES, default="concurrent")
    parser.add_argument("--json", type=Path, help="write every pair's rates and the estimates to this file")
    args = parser.parse_args()
    check_mode(args.mode)

    worker_home = bench_home("jumanji")
    home, python = worker_home.root, worker_home.python
    sizes = TINY if args.tiny else DEFAULT
    network = TINY_NETWORK.get(args.environment, {}) if args.tiny else {}
    steps_per_epoch = sizes["n_steps"] * sizes["num_envs"] * sizes["num_learner_steps_per_epoch"]
    fields = {"worker": "jumanji", "environment": {"family": "jumanji", "env_id": args.environment}, "seed": 0,
              "total_timesteps": args.epochs * steps_per_epoch, **sizes, "network": network,
              "resources": {"threads": 1}}
    config = home / "bench.json"
    config.write_text(json.dumps(fields))
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith("JAX_COMPILATION_CACHE") and k != "PYTHONHASHSEED"}
    environ["JAX_ENABLE_COMPILATION_CACHE"] = "false"  # the worker keeps compilations by default: not here
    environ["MOSAIC_HOME"] = str(home)
    dry = subprocess.run([sys.executable, "-m", "mosaic", "run", "--dry-run", str(config)], capture_output=True,
                         text=True, env=environ)
    if dry.returncode != 0:
        raise SystemExit(dry.stderr[-3000:])
    overrides = json.loads(dry.stdout)["hydra_overrides"]

    # the XLA flags the worker sets for itself (the direct side gets the same; checked after each pair)
    flags = subprocess.run([python, "-c", "import json; from jumanji_worker.runtime import xla_environment; "
                            f"print(json.dumps(xla_environment({fields['resources']['threads']})))"],
                           capture_output=True, text=True, check=True)
    xla_flags = json.loads(flags.stdout)["XLA_FLAGS"]

    def sides(pair: int, folder: Path) -> tuple[Side, Side]:
        return (Side("mosaic", [sys.executable, "-m", "mosaic", "run", str(config)], environ, folder),
                Side("direct", [python, "-m", "jumanji.training.train", *overrides, "logger.type=terminal",
                                f"hydra.run.dir={folder / 'hydra'}"],
                     direct_env({**environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": xla_flags}, fields["seed"]),
                     folder, new_session=True))

    def mosaic_side(_: Side) -> float:
        events = newest_run_events(home)
        started = next(e for e in events if e["type"] == "run_started")["resources"]["xla_flags"]
        if started != xla_flags:
            raise SystemExit(f"the worker ran with XLA_FLAGS {started!r}, the direct side with {xla_flags!r}")
        return mosaic_rate(events, steps_per_epoch)

    mosaic_rates, direct_rates = measure(args.pairs, args.mode, home, sides, mosaic_side,
                                         lambda d: direct_rate((d.out + d.err).splitlines(), steps_per_epoch))
    return conclude(f"{args.environment}, {args.epochs} epochs of {steps_per_epoch} env steps"
                    f"{' (tiny)' if args.tiny else ''}, {args.mode}, {args.pairs} pairs:",
                    {"worker": "jumanji", "environment": args.environment, "epochs": args.epochs,
                     "steps_per_epoch": steps_per_epoch, "tiny": args.tiny, "mode": args.mode},
                    [fields["seed"]] * args.pairs, mosaic_rates, direct_rates, args.json)

if __name__ == "__main__":
    sys.exit(main())
