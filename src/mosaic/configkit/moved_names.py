"""Names users bring from the libraries and the design documents, and where each is in MOSAIC's run vocabulary.

One table (:data:`MOVED`), read by :func:`mosaic.configkit.from_dict` for a key its class does not take: before
the closest spelling (difflib), the refusal says where the name's meaning lives, e.g.
``lr: unknown field; RLlib's lr is learning_rate here; allowed: ...``. A row names the key as written (a dotted
path from the config's top: ``resources.num_workers``) and the places its meaning may be, in order; the first one
the config has, and its worker does not refuse (``FIELDS.refused``), is named. The same names given among a
library's own options (``algo_params``) are named so too (:func:`library_name`, read by
mosaic.workerkit.options). docs/worker-contract.md shows the table.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class To:
    """One place a name may have moved to: ``path`` (dotted, from the config's top), named where the config has
    ``when`` (a path; default ``path`` itself: an ``algo_params`` key needs its worker's own section)."""

    path: str
    when: str = ""
    note: str = ""


@dataclass(frozen=True)
class Moved:
    """A name from ``source`` (``RLlib``, ``CleanRL``, ``the design documents``) and where it moved (``to``, the
    first that fits; ``source`` empty: a key that belongs in a section, given at the top); ``otherwise``: what
    to say where none fits."""

    name: str
    source: str
    to: tuple[To, ...]
    otherwise: str = ""

    def said(self, root: type | None) -> str:
        """Where this name is in a config of class ``root`` (None: the first place), in words; '' where the
        table has nothing to say about it there."""
        if not self.source:
            whose = f"a top-level {self.name}"
        else:
            whose = f"{self.source}' {self.name}" if self.source.endswith("s") else f"{self.source}'s {self.name}"
        for to in self.to:
            if root is None or (has_path(root, to.when or to.path) and not _refused(root, to.path)):
                return f"{whose} is {to.path} here" + (f" ({to.note})" if to.note else "")
        return f"{whose} {self.otherwise}" if self.otherwise else ""


_NO_BATCH = ("has no field of its own in this worker's config; its library's own names go under algo_params "
             "(`mosaic workers show NAME --algorithm ALGO` lists them)")
_SPLIT = ("samples per gradient update; RLlib's train batch is the Ray worker's "
          "algo_params.train_batch_size_per_learner")
_ENV_RUNNERS = To("rllib.num_env_runners", note="RLlib's env runner actors")
_ENVS = To("num_envs", note="envs stepped side by side; this worker runs no sampling actors")

#: The names, in the order docs/worker-contract.md lists them.
MOVED: tuple[Moved, ...] = (
    Moved("lr", "RLlib", (To("learning_rate"),)),
    Moved("num_workers", "RLlib", (_ENV_RUNNERS, _ENVS)),
    Moved("num_envs_per_worker", "RLlib", (To("num_envs"),)),
    Moved("train_batch_size", "RLlib", (To("algo_params.train_batch_size_per_learner", when="rllib",
                                          note="per learner; the shared batch_size sets it where the algorithm has no "
                                               "minibatch"),
                                       To("batch_size", note=_SPLIT)), _NO_BATCH),
    Moved("num_gpus", "RLlib", (To("resources.gpus"),)),
    Moved("env-id", "CleanRL", (To("environment.env_id"),)),
    Moved("total-timesteps", "CleanRL", (To("total_timesteps", note="env steps"),)),
    Moved("running_steps", "XuanCe", (To("total_timesteps", note="env steps; a parallel step of all agents is "
                                                                 "one"),)),
    Moved("parallels", "XuanCe", (To("num_envs"),)),
    Moved("total_batch_size", "Jumanji", (To("num_envs", note="envs stepped together"),)),
    Moved("epoch", "Tianshou", (To("total_timesteps", note="the whole budget in env steps: epoch x "
                                                           "step_per_epoch"),)),
    Moved("step_per_epoch", "Tianshou", (To("test_every_timesteps", note="an epoch ends with a test"),
                                         To("reporting.every_timesteps", note="a metrics event every N env "
                                                                              "steps"))),
    Moved("training", "the design documents", (), "section is gone: its fields are top-level fields "
                                                  "(algorithm, total_timesteps, learning_rate, gamma, batch_size)"),
    Moved("resources.num_workers", "the design documents", (_ENV_RUNNERS, _ENVS)),
    Moved("resources.num_gpus", "the design documents", (To("resources.gpus"),)),
    Moved("resources.num_cpus", "the design documents", (To("resources.cpus"),)),
    Moved("env_id", "", (To("environment.env_id"),)),
    Moved("env_family", "", (To("environment.family"),)),
    Moved("env_kwargs", "", (To("environment.env_kwargs"),)),
    Moved("tasks", "BALROG", (To("environment.env_ids"),)),
    Moved("episodes_per_task", "BALROG", (To("episodes", note="episodes of each task"),)),
    Moved("heartbeat_interval_s", "", (To("reporting.heartbeat_interval_s"),)),
    Moved("report_every_timesteps", "", (To("reporting.every_timesteps"),)),
    Moved("checkpoint_every_timesteps", "", (To("checkpoint.every_timesteps"),)),
)
_BY_NAME: Mapping[str, Moved] = {row.name: row for row in MOVED}


def where_moved(path: str, root: type | None) -> str:
    """What the table says of the unknown key at dotted ``path`` of a config of class ``root``; '' for a name
    it does not list (or one it has nothing to say of in this config)."""
    row = _BY_NAME.get(path)
    if row is None:
        return ""
    return row.said(root)


def library_name(key: str, owner: str) -> str:
    """What the table says of ``key`` given among the library's own options of ``owner`` (``algo_params`` of
    ``Jumanji's a2c on tsp``): a name of that library that a shared field sets; '' for any other."""
    row = _BY_NAME.get(key)
    if row is None or not row.source or not owner.startswith(f"{row.source}'s "):
        return ""
    return row.said(None)


def has_path(cls: Any, path: str) -> bool:
    """Whether dataclass ``cls`` has the field at dotted ``path`` (a mapping field takes any key below it)."""
    fields, mappings = _field_paths(cls)
    return path in fields or any(path.startswith(f"{m}.") for m in mappings)


def _field_paths(cls: Any, prefix: str = "") -> tuple[set[str], set[str]]:
    """Every field path of dataclass ``cls`` (sections' fields too), and those of its mapping fields."""
    fields: set[str] = set()
    mappings: set[str] = set()
    tp = _unwrapped(cls)
    if not dataclasses.is_dataclass(tp):
        return fields, mappings
    hints = typing.get_type_hints(tp, include_extras=True)
    for f in dataclasses.fields(tp):
        if not f.init:
            continue
        path, inner = f"{prefix}{f.name}", _unwrapped(hints[f.name])
        fields.add(path)
        if typing.get_origin(inner) in (dict, Mapping) or inner in (dict, Mapping):
            mappings.add(path)
        below = _field_paths(inner, f"{path}.")
        fields |= below[0]
        mappings |= below[1]
    return fields, mappings


def _unwrapped(tp: Any) -> Any:
    """``tp`` without Annotated, and the one class of an optional (``X | None``)."""
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    if typing.get_origin(tp) in (typing.Union, types.UnionType) and len(args) == 1:
        return _unwrapped(args[0])
    return tp


def _refused(root: type, path: str) -> bool:
    """Whether ``root``'s worker refuses the shared field at ``path`` (its ``FIELDS.refused``)."""
    refused = getattr(getattr(root, "FIELDS", None), "refused", None) or {}
    return any(path == key or path.startswith(f"{key}.") for key in refused)
