"""MOSAIC worker for Ray RLlib (new API stack): multi-agent training on PettingZoo, single-agent on Gymnasium.

Importing this package is cheap (no Ray, no torch); discovery calls
:func:`get_worker_metadata` only.
"""

from __future__ import annotations

from mosaic.workerkit.contract import Packages, WorkerCapabilities, WorkerMetadata, worker_metadata

__version__ = "0.1.0"
#: What ``--describe`` and ``run_started`` report the versions of.
PACKAGES = Packages(("mosaic-ray-worker", "ray", "torch", "gymnasium", "pettingzoo"),
                    optional=("numpy", "mpe2", "tensorboardX", "wandb"))

#: Public names loaded on first use, so discovery's import of this package stays cheap.
_LAZY = {
    "RayPolicyConfig": "ray_worker.policy_actor", "RayPolicyActor": "ray_worker.policy_actor",
    "RayPolicyController": "ray_worker.policy_actor", "create_ray_actor": "ray_worker.policy_actor",
    "EvaluationConfig": "ray_worker.policy_evaluator", "run_evaluation": "ray_worker.policy_evaluator",
    "EpisodeMetrics": "mosaic.workerkit.evaluation", "EvaluationResults": "mosaic.workerkit.evaluation",
    "RayWorkerConfig": "ray_worker.config", "PolicyConfiguration": "ray_worker.config",
}
__all__ = ["get_worker_metadata", *_LAZY]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'ray_worker' has no attribute {name!r}")


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    from ray_worker import algo_params
    from ray_worker.config import IMPLEMENTED_POLICY_CONFIGURATIONS

    return worker_metadata(
        name="Ray RLlib", version=__version__, upstream="ray[rllib]", homepage="https://docs.ray.io/en/latest/rllib/",
        description="Multi-agent training of PettingZoo envs, and single-agent training of Gymnasium envs, "
                    "with RLlib's new API stack.",
        worker_type="ray",
        paradigms=("single_agent", "multi_agent"),  # gymnasium: tests/test_single_agent.py
        policy_configurations=tuple(p.name for p in IMPLEMENTED_POLICY_CONFIGURATIONS),
        env_families=("sisl", "classic", "butterfly", "mpe", "gymnasium"),
        algorithms=tuple(a.lower() for a in algo_params.algorithms()),  # canonical spellings
        action_spaces=("discrete", "masked_discrete", "box"),
        observation_spaces=("box", "image", "masked_discrete"),
        max_agents=50,  # simple_spread with N=50, parameter sharing: tests/test_many_agents.py
        supports_self_play=True,  # SELF_PLAY: frozen snapshots, symmetric or team-wise (tests/test_self_play.py)
        supports_population=True,  # league: main exploiters per side (self_play.main_exploiters)
        supports_checkpointing=True, supports_pause_resume=True, requires_gpu=False,
        resources={"cpus": 3.0, "memory_mb": 3000, "gpus": 0.0})
