"""MOSAIC worker ``mosaic_llm``: language models as the agents of PettingZoo envs.

Every agent of an env (or some of them) is played by a language model that reads
the env as text and answers with an action. Agents can coordinate: each on its own,
after a round of messages, or through one planner per team. Before acting, each
model can be asked to predict the others' next actions (theory of mind), and those
predictions are scored against what the others then do. Agents the model does not
play are played at random or by a policy from a Ray worker checkpoint (mixed
matches, with win rates). It evaluates; it does not train.

This module stays cheap: discovery imports it.
"""

from __future__ import annotations

from mosaic.workerkit.contract import Packages, WorkerCapabilities, WorkerMetadata, worker_metadata

__version__ = "0.1.0"
ENV_FAMILIES = ("classic", "mpe")
#: What ``--describe`` and ``run_started`` report the versions of.
PACKAGES = Packages(("mosaic-llm-worker", "pettingzoo", "mpe2", "openai"),
                    optional=("gymnasium", "numpy", "transformers", "ray", "torch"))


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    return worker_metadata(
        name="MOSAIC LLM (multi-agent)", version=__version__, upstream="pettingzoo",
        description="Language models play the agents of PettingZoo games and MPE tasks: independent, with a "
                    "message round or a central planner, optional theory of mind scored against what the "
                    "others do; mixed matches against random play or a Ray checkpoint.",
        worker_type="mosaic_llm", paradigms=("multi_agent",), policy_configurations=("LANGUAGE_MODEL",),
        env_families=ENV_FAMILIES, algorithms=("llm",), action_spaces=("discrete",),
        observation_spaces=("masked_discrete", "box", "discrete"), max_agents=8, supports_checkpointing=False,
        supports_pause_resume=True, resources={"cpus": 1.0, "memory_mb": 500})
