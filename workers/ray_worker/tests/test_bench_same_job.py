"""The wall-time bench compares like with like: its plain RLlib script is the job `mosaic run` trains.

`bench/run_wall_time.py` times `mosaic run CONFIG` against a plain RLlib script. Until 2026-11-26 the
script gave RLlib a ``DefaultModelConfig`` object (policy and value sharing one network) while MOSAIC
passes a dict (RLlib's PPO then keeps them apart): MOSAIC trained twice the network and looked 7% slower.
This builds both algorithm configs and checks they hold the same module and the same settings, except
where MOSAIC's must differ (its callbacks, its agent-to-module mapping object).
"""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[3] / "bench"
#: Keys of ``AlgorithmConfig.to_dict()`` where MOSAIC's config differs by design, not by setting.
MOSAIC_ONLY = {"callbacks", "policy_mapping_fn", "policies_to_train", "_rl_module_spec"}


def _bench():
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("run_wall_time", BENCH / "run_wall_time.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(a, b)
    return a == b or (a in (None, 0) and b in (None, 0))


def test_the_plain_script_builds_the_module_and_settings_mosaic_builds(ray_session):
    from ray.tune.registry import register_env

    from ray_worker.algorithms import build_algorithm_config
    from ray_worker.callbacks import MosaicCallbacks
    from ray_worker.config import RayWorkerConfig
    from ray_worker.environment import EnvironmentFactory
    from ray_worker.policies import prepare

    bench = _bench()
    cfg = RayWorkerConfig.from_dict({**bench.mosaic_config(1000), "run_id": "bench-same-job"})
    _, env_info, layout = prepare(cfg)
    register_env("spread", EnvironmentFactory(cfg.environment))
    ours = build_algorithm_config(cfg, env_info, layout, "spread", MosaicCallbacks)
    ours.learners(**cfg.learner_resources())
    names: dict = {}
    exec(bench.PLAIN_IMPORTS + bench.PLAIN_CONFIG, names)  # the script's own lines, not a copy of them
    plain = names["config"]

    a, b = ours.to_dict(), plain.to_dict()
    differ = {k: (a.get(k), b.get(k)) for k in set(a) | set(b)
              if k not in MOSAIC_ONLY and not _same(a.get(k), b.get(k))}
    assert not differ, f"the plain script's settings must be MOSAIC's job's: {differ}"

    shapes = []
    for config in (ours, plain):
        config.env_runners(num_env_runners=0)  # the module is the same however many runners sample
        algo = config.build_algo()
        try:
            module = algo.get_module("shared")
            shapes.append({name: tuple(p.shape) for name, p in module.named_parameters()})
        finally:
            algo.stop()
    assert shapes[0] == shapes[1], f"MOSAIC's module {shapes[0]} is not the plain script's {shapes[1]}"
