"""MOSAIC worker ``balrog``: a language model evaluated on MiniGrid and BabyAI, BALROG's protocol.

BALROG (a benchmark of language models as agents) is not installable here: the
PyPI name ``balrog`` belongs to an unrelated access-control library. This worker
reproduces its protocol for the MiniGrid/BabyAI part instead: each step the model
gets the mission and a text description of what the agent sees, answers with one of
the env's actions, and the run reports success rate and progression with confidence
intervals, the invalid-action rate and tokens per episode. Every prompt, reply and
action is kept in the run folder. It evaluates; it does not train.

This module stays cheap: discovery imports it from MOSAIC's own environment.
"""

from __future__ import annotations

from mosaic.workerkit.contract import Packages, WorkerCapabilities, WorkerMetadata, worker_metadata

__version__ = "0.1.0"
ENV_FAMILIES = ("minigrid", "babyai")
#: What ``--describe`` and ``run_started`` report the versions of.
PACKAGES = Packages(("mosaic-balrog-worker", "minigrid", "gymnasium", "openai"),
                    optional=("numpy", "transformers", "torch"))


def get_worker_metadata() -> tuple[WorkerMetadata, WorkerCapabilities]:
    return worker_metadata(
        name="BALROG-style LLM evaluator", version=__version__, upstream="minigrid",
        description="A language model plays MiniGrid and BabyAI tasks from text; success rate, progression, "
                    "invalid actions and tokens, with every prompt and reply kept.",
        worker_type="balrog", paradigms=("single_agent",), policy_configurations=("LANGUAGE_MODEL",),
        env_families=ENV_FAMILIES, algorithms=("llm",), action_spaces=("discrete",),
        observation_spaces=("dict", "image"), max_agents=1, supports_checkpointing=False,
        supports_pause_resume=True, resources={"cpus": 1.0, "memory_mb": 400})
