"""MOSAIC worker for Jumanji: the A2C agent of ``jumanji.training``, and PPO on its networks, driven in-process.

Jumanji ships its own training code (``jumanji.training``: an A2C agent, an
actor-critic network and a hydra config per environment, and ``train.py``'s
loop). The worker composes that hydra config with the MOSAIC config's overrides
(``config.py``), runs ``train.py``'s own ``train`` function, and watches it
through a subclass of Jumanji's logger (``telemetry.py``), which is also the
safe point for pause, cancel and checkpoints (``runtime.py``). Jumanji has no PPO:
``ppo.py`` adds one, a subclass of its A2C agent with a PPO learner step.

This module imports nothing but MOSAIC: describing the worker must stay cheap
and work from MOSAIC's own environment, where JAX is not installed.
"""

from __future__ import annotations

from mosaic.workerkit.contract import Packages, WorkerCapabilities, WorkerMetadata, worker_metadata

__version__ = "0.1.0"

#: jumanji.training's agents: A2C learns; 'random' is its uniform-random agent over the legal actions;
#: 'ppo' is MOSAIC's PPO on the same networks and rollout as A2C (ppo.py).
ALGORITHMS = ("a2c", "ppo", "random")
#: What ``--describe`` and ``run_started`` report the versions of.
PACKAGES = Packages(("mosaic-jumanji-worker", "jumanji", "jax", "jaxlib", "dm-haiku", "optax", "hydra-core"),
                    optional=("chex", "numpy"))


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    return worker_metadata(
        name="Jumanji", version=__version__, upstream="jumanji", license="Apache-2.0",
        description="Jumanji's A2C (jumanji.training), and PPO on the same networks, on its logic, packing, "
                    "routing and swarm envs (TSP, BinPack, ...), on JAX in-process, in its own environment.",
        worker_type="jumanji", paradigms=("single_agent",), policy_configurations=("INDEPENDENT",),
        env_families=("jumanji",), algorithms=ALGORITHMS, action_spaces=("masked_discrete", "multi_discrete"),
        observation_spaces=("dict",), max_agents=1, supports_checkpointing=True, supports_pause_resume=True,
        resources={"cpus": 1.0, "memory_mb": 3000})
