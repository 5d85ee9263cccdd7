"""Whole-process wall time: `mosaic run` against a plain RLlib script of the same job.

A user waits for the whole process, not for steady-state iterations: start-up,
validation, Ray, training, TensorBoard, the final checkpoint and shutdown. Both
sides run the same job as a fresh process: PPO, one module shared by the 3 agents
of MPE simple_spread, one env runner, 10k env steps, a checkpoint at the end.

* plain: a script that uses RLlib directly (written to a temporary folder, shown
  with ``--show-script``): ``ray.init``, ``PPOConfig``, ``train()`` until 10k steps,
  ``save_to_path``, ``ray.shutdown``;
* mosaic: ``mosaic run CONFIG`` with the same settings (its defaults otherwise:
  telemetry, TensorBoard, manifest, progress line).

Both are timed from outside, as a user's stopwatch would, each in a session of its own
with the same ``PYTHONHASHSEED`` (``bench/pairs.py``). MOSAIC's home sees every worker
environment the checkout has built (``var/envs``, or ``$MOSAIC_HOME/envs``), as a user's
does: `mosaic run` then finds them all, and that costs what it costs a user. Pairs
alternate which side goes first; the verdict is the paired ratio of the two speeds
(1 / wall time) with its 95% interval (``bench/pairs.py``). ``phases`` says where MOSAIC's
time before the first env step goes: from the process start to the run folder (CLI
start-up, discovery, the worker's check of the config) and from there to ``run_started``.

    python bench/run_wall_time.py [--pairs 6] [--timesteps 10000] [--out FILE.json]

Target: mosaic / plain <= 1.03 in wall time (speed ratio >= 0.971).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from pairs import Side, direct_env, run_pair, save, verdict  # noqa: E402

BATCH = 1000
THREADS = 1  # torch threads of the driver process, on both sides
ENV_KWARGS = {"N": 3, "max_cycles": 25, "continuous_actions": False}
PARAMS = {"train_batch_size_per_learner": BATCH, "minibatch_size": 250, "num_epochs": 4,
          "fcnet_hiddens": [64, 64], "lr": 3e-4}

#: The plain script's algorithm config, on its own so that a test can build it and check it is MOSAIC's job
#: (workers/ray_worker/tests/test_bench_same_job.py: the same module, the same training settings).
PLAIN_CONFIG = textwrap.dedent('''\
    config = (
        PPOConfig().environment("spread")
        .env_runners(num_env_runners=1, num_envs_per_env_runner=1, num_cpus_per_env_runner=1,
                     episodes_to_numpy=False)  # MOSAIC's (RLlib's default numpy'es: bench/rllib_episode_lists.py)
        .training(train_batch_size_per_learner={batch}, minibatch_size=250, num_epochs=4, lr=3e-4,
                  lambda_=0.95)  # MOSAIC's PPO default (RLlib's is 1.0)
        .multi_agent(policies={{"shared"}}, policy_mapping_fn=lambda agent_id, episode, **kw: "shared")
        .rl_module(rl_module_spec=MultiRLModuleSpec(rl_module_specs={{
            # a dict, as MOSAIC passes it: RLlib's PPO then keeps the value network apart from the policy's
            # (vf_share_layers False); a DefaultModelConfig object would share them, a smaller network
            "shared": RLModuleSpec(model_config={{"fcnet_hiddens": [64, 64]}})}}))
        .debugging(seed=0)
    )
    ''').format(batch=BATCH)
PLAIN_IMPORTS = textwrap.dedent('''\
    import math, os, sys
    import ray
    import torch
    from mpe2 import simple_spread_v3
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.multi_rl_module import MultiRLModuleSpec
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env
    ''')
PLAIN = ('"""The same job as the MOSAIC config, written against RLlib directly."""\n' + PLAIN_IMPORTS + textwrap.dedent('''
    TOTAL, OUT = int(sys.argv[1]), sys.argv[2]
    torch.set_num_threads({threads})  # the driver's learner: as MOSAIC's resources.threads
    ray.init(address="local", num_cpus=max(os.cpu_count() or 1, 2), include_dashboard=False, log_to_driver=True)
    register_env("spread", lambda _: ParallelPettingZooEnv(simple_spread_v3.parallel_env(**{env_kwargs!r})))
    ''').format(threads=THREADS, env_kwargs=ENV_KWARGS) + PLAIN_CONFIG + textwrap.dedent('''\
    algo = config.build_algo()
    steps = 0
    while steps < TOTAL:
        result = algo.train()
        steps += int(float(result["env_runners"]["num_env_steps_sampled"]))
        print(f"{steps} env steps, return {result['env_runners'].get('episode_return_mean')}", flush=True)
    algo.save_to_path(OUT)
    algo.stop()
    ray.shutdown()
    '''))


def mosaic_config(timesteps: int) -> dict:
    return {"worker": "ray", "seed": 0, "policy_configuration": "PARAMETER_SHARING",
            "environment": {"family": "mpe", "env_id": "simple_spread_v3", "api_type": "PARALLEL",
                            "env_kwargs": ENV_KWARGS},
            "algorithm": "ppo", "total_timesteps": timesteps, "algo_params": PARAMS,
            "rllib": {"num_env_runners": 1}, "num_envs": 1, "resources": {"threads": THREADS},
            "checkpoint": {"at_end": True}}


class TimedSide(Side):
    """A side of a pair whose wall time is measured from outside (start to exit)."""

    def start(self, folder: Path, cpu: int | None) -> subprocess.Popen:
        self.started_wall, self.started = time.time(), time.perf_counter()
        return super().start(folder, cpu)

    def finish(self, proc: subprocess.Popen) -> "TimedSide":
        proc.wait()
        self.elapsed = time.perf_counter() - self.started
        return super().finish(proc)


def phases(home: Path, started_wall: float) -> tuple[float, float]:
    """(process start -> run folder, run folder -> run_started) of the newest run in ``home``, seconds."""
    run = max((home / "trainer" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    created = json.loads((run / "analytics.json").read_text())["created_at"]
    started = json.loads((run / "telemetry.jsonl").read_text().splitlines()[0])["ts"]
    return created - started_wall, started - created


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--timesteps", type=int, default=10_000)
    parser.add_argument("--out", type=Path, help="keep every pair and the verdict as JSON")
    parser.add_argument("--show-script", action="store_true", help="print the plain RLlib script and exit")
    args = parser.parse_args()
    if args.show_script:
        print(PLAIN)
        return 0
    python = sys.executable
    mosaic = str(Path(python).with_name("mosaic"))
    envs = Path(os.environ.get("MOSAIC_HOME") or Path(__file__).resolve().parents[1] / "var") / "envs"
    mosaic_speed, plain_speed, seeds, before_run, to_started = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        home = tmp_path / "home"
        home.mkdir()
        if envs.is_dir():
            (home / "envs").symlink_to(envs)  # every built worker environment, as in a user's home
        script = tmp_path / "plain_rllib.py"
        script.write_text(PLAIN)
        config = tmp_path / "job.json"
        config.write_text(json.dumps(mosaic_config(args.timesteps)))
        env = direct_env({**os.environ, "RAY_AUTH_MODE": "disabled", "MOSAIC_HOME": str(home)}, 0)
        for pair in range(args.pairs):
            folder = tmp_path / f"pair-{pair}"
            plain = TimedSide("plain", [python, str(script), str(args.timesteps), str(folder / "ckpt")], env,
                              tmp_path, new_session=True)
            ours = TimedSide("mosaic", [mosaic, "run", str(config)], env, tmp_path, new_session=True)
            run_pair(pair, "alternate", ours, plain, folder)
            mosaic_speed.append(1 / ours.elapsed)
            plain_speed.append(1 / plain.elapsed)
            seeds.append(0)
            head, tail = phases(home, ours.started_wall)
            before_run.append(head)
            to_started.append(tail)
            print(f"pair {pair + 1}: plain {plain.elapsed:6.1f} s   mosaic run {ours.elapsed:6.1f} s "
                  f"(run folder after {head:.2f} s, run_started {tail:.2f} s later)", flush=True)
    result = verdict(mosaic_speed, plain_speed, target=1 / 1.03)
    ratio, low, high = result.paired
    print(f"plain RLlib script: median {statistics.median(1 / v for v in plain_speed):.1f} s; "
          f"mosaic run: median {statistics.median(1 / v for v in mosaic_speed):.1f} s")
    print(f"wall time mosaic/plain, paired over {args.pairs} pairs: {1 / ratio:.3f}, 95% interval "
          f"[{1 / high:.3f}, {1 / low:.3f}] (target <= 1.03: {result.word})")
    print(f"phases of mosaic run (medians): process start -> run folder {statistics.median(before_run):.2f} s, "
          f"run folder -> run_started {statistics.median(to_started):.2f} s")
    save(args.out, {"bench": "run_wall_time", "timesteps": args.timesteps, "unit": "1 / wall seconds",
                    "phases": {"to_run_folder_s": before_run, "to_run_started_s": to_started}},
         seeds, mosaic_speed, plain_speed, result)
    return 0 if result.word == "met" else 1


if __name__ == "__main__":
    sys.exit(main())
