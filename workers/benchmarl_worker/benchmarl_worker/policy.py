"""A BenchMARL checkpoint's trained policy acting on an env's raw observations (``mosaic eval`` and ``--player``).

The experiment is rebuilt the way training built it (``runtime.build_experiment``: the run's recorded config over
BenchMARL's yaml) and its losses load the checkpoint's ``loss_<group>`` entries of ``Experiment.state_dict`` (the
networks the policy shares with them; the replay buffers, the collector and the optimisers, which playing does not
use, are left out). Each group's policy is BenchMARL's own collection policy of that group
(``Experiment.group_policies``), run under TorchRL's ``ExplorationType.DETERMINISTIC`` (greedy: the mode or mean of
MAPPO's, IPPO's, MASAC's and ISAC's action distributions; MADDPG's and IDDPG's actions without their exploration
noise; QMIX's, VDN's and IQL's highest Q value without epsilon), as BenchMARL's own evaluation does with
``evaluation_deterministic_actions``; ``ExplorationType.RANDOM`` (what BenchMARL collects with) when not
deterministic.

Observations: an agent's raw observation is encoded by its slot of the TorchRL env's observation spec (``encode``:
the tensor, dtype and device TorchRL's PettingZoo and VMAS wrappers hand BenchMARL), the only transformation those
wrappers apply and BenchMARL adds none for these families (``TaskClass.get_env_transforms`` is empty). Every
BenchMARL actor is decentralised (its model is built with ``centralised=False``: an agent's action reads its own
observation only; the centralised critics and mixers serve training), so one agent's action is the one its row of
the group's batch gives, whatever the other rows hold.
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from mosaic.errors import UserError

#: PettingZoo tasks: BenchMARL's task name -> MOSAIC's env family of its PettingZoo env.
SISL_TASKS = ("multiwalker", "waterworld")


def pettingzoo_environment(config: Any, continuous: bool, task: Any) -> dict[str, Any]:
    """The PettingZoo env a pettingzoo run trained on, in MOSAIC's words (mosaic.workerkit.envs): family ``mpe`` or
    ``sisl``, its versioned id (the TaskConfig's ``task``), and the keyword arguments BenchMARL built it with
    (``PettingZooClass.get_env_fun``: the TaskConfig's fields, and ``continuous_actions`` where the task has both)."""
    values = dict(config.task_values())
    env_id = str(values.pop("task"))
    if task.supports_continuous_actions() and task.supports_discrete_actions():
        values["continuous_actions"] = continuous
    family = "sisl" if config.environment.env_id in SISL_TASKS else "mpe"
    return {"family": family, "env_id": env_id, "env_kwargs": values, "api_type": "PARALLEL"}


def eval_config(state: Any) -> Any:
    """The run's config as the checkpoint recorded it, to rebuild its experiment for playing: one env (the
    collector BenchMARL builds is not used), the CPU, nothing to restore."""
    from benchmarl_worker.config import BenchMARLConfig

    data = {k: v for k, v in state.config.items() if k != "run_id"}
    data["algo_params"] = {k: v for k, v in (data.get("algo_params") or {}).items()
                           if not k.endswith("n_envs_per_worker")}
    data.update(run_id=state.run_id or "eval", num_envs=1)
    data["checkpoint"] = {**(data.get("checkpoint") or {}), "restore_from": None}
    data["resources"] = {**(data.get("resources") or {}), "gpus": 0.0}  # played on the CPU wherever it trained
    return BenchMARLConfig.from_dict(data)


@dataclass
class TrainedPolicy:
    """BenchMARL's group policies with their observation specs: ``act`` turns raw observations into actions."""

    experiment: Any
    continuous: bool
    deterministic: bool = True

    def __post_init__(self) -> None:
        self.group_map: dict[str, list[str]] = {g: list(a) for g, a in self.experiment.group_map.items()}
        self.seat = {agent: (group, i) for group, agents in self.group_map.items() for i, agent in enumerate(agents)}
        env = self.experiment.test_env
        self.specs: dict[str, Any] = {}
        for group in self.group_map:
            spec = env.observation_spec[group, "observation"]
            for _ in env.batch_size:  # VMAS: the test env's vectorised envs; PettingZoo: none
                spec = spec[0]
            if not hasattr(spec, "encode") or type(spec).__name__ == "Composite":
                raise UserError(f"group {group!r}: its observations are a dict ({type(spec).__name__}), which "
                                "the benchmarl worker's evaluation and player do not encode yet")
            self.specs[group] = spec

    @property
    def agents(self) -> list[str]:
        return list(self.seat)

    def act(self, group: str, observations: Mapping[int, Any]) -> dict[int, Any]:
        """Actions of the group's agents at ``observations``' indices (their order in ``group_map``); the group's
        other rows are zeros (each actor reads its own row only)."""
        import torch
        from tensordict import TensorDict
        from torchrl.envs.utils import ExplorationType, set_exploration_type

        spec = self.specs[group]
        rows = spec.zero()
        for i, obs in observations.items():
            rows[i] = spec[i].encode(obs)
        td = TensorDict({group: TensorDict({"observation": rows}, batch_size=[len(self.group_map[group])])},
                        batch_size=[])
        kind = ExplorationType.DETERMINISTIC if self.deterministic else ExplorationType.RANDOM
        with torch.no_grad(), set_exploration_type(kind):
            actions = self.experiment.group_policies[group](td).get((group, "action"))
        out = {}
        for i in observations:
            action = actions[i].cpu().numpy()
            out[i] = action.item() if action.ndim == 0 else action  # a discrete action: a plain integer
        return out


def load(target: str, flag: str, deterministic: bool = True,
         check: Callable[[Path, Any], None] | None = None) -> tuple[Path, Any, Any, TrainedPolicy]:
    """(checkpoint folder, its state, the run's config, its trained policy); ``check(folder, state)``, if given, may
    refuse the checkpoint before anything is built."""
    import torch

    from mosaic.workerkit.checkpoints import resolve
    from mosaic.workerkit.threads import limit_torch_threads

    from benchmarl_worker.checkpoint import BenchMARLCheckpointState
    from benchmarl_worker.runtime import build_experiment, build_task, continuous_actions, quiet

    state = BenchMARLCheckpointState.read(target, flag, "the benchmarl worker")
    folder = resolve(target, flag, "the benchmarl worker")
    if not (folder / state.state_file).is_file():
        raise UserError(f"{flag}: {folder} has no BenchMARL experiment state ({state.state_file})")
    if check is not None:
        check(folder, state)
    quiet()
    warnings.filterwarnings("ignore", module="torchrl.envs.libs.pettingzoo")  # PettingZoo's families it cannot load
    limit_torch_threads(1)
    config = eval_config(state)
    continuous = continuous_actions(config, build_task(config))
    # BenchMARL prints as it builds; stdout is for the results (--json) or the player's protocol
    with tempfile.TemporaryDirectory(prefix="mosaic-benchmarl-eval-") as scratch, \
            contextlib.redirect_stdout(sys.stderr):
        experiment = build_experiment(config, Path(scratch), [])
    saved = torch.load(folder / state.state_file, map_location="cpu", weights_only=False)
    for group, loss in experiment.losses.items():
        loss.load_state_dict(saved[f"loss_{group}"])
    return folder, state, config, TrainedPolicy(experiment, continuous, deterministic)
