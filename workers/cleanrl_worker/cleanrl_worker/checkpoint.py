"""The checkpoint of a CleanRL run: the script's networks plus what is needed to play them.

``modules.pt`` holds the ``state_dict`` of every ``torch.nn.Module`` global of
the script's ``__main__`` (ppo's ``agent``, td3's ``actor``, ``qf1``, ...);
``obs_normalization.json``, where the script normalises observations in an env wrapper
(ppo_continuous_action), the statistics its policy acts on; ``mosaic_state.json`` (written
last: a folder without it is not a checkpoint)
says which script, task and options made them and which one is the policy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from mosaic.workerkit.checkpoints import CheckpointState

MODULES_FILE = "modules.pt"
#: The observation statistics the policy acts on, where the script normalises observations in its env
#: wrappers (ppo_continuous_action): ``{"mean", "var", "count", "epsilon"}`` of env 0.
OBS_NORM_FILE = "obs_normalization.json"


@dataclass
class CleanRLCheckpointState(CheckpointState):
    FORMAT: ClassVar[str] = "mosaic-cleanrl-worker/1"

    algorithm: str = ""
    env_id: str = ""
    #: Every option of the script as the run used it (argparse names).
    params: dict[str, Any] = field(default_factory=dict)
    #: ``__main__`` global -> class name, for every module saved.
    modules: dict[str, str] = field(default_factory=dict)
    policy: str = ""  # the global greedy play uses
    cleanrl_version: str = ""
