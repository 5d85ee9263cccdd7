"""BenchMARL's own options, read from the package it ships: its config dataclasses and their yaml defaults.

Every option a config may give is a field of one of BenchMARL's config dataclasses (``ExperimentConfig``, an
algorithm's ``<Name>Config``, a task's ``TaskConfig``), with the default BenchMARL's yaml under
``benchmarl/conf`` gives it, typed by the dataclass's annotation (``Optional[float]``: a number or null). Both
are read from BenchMARL's files, not imported (torch and TorchRL take seconds to import): names, types and
defaults follow whichever BenchMARL is installed. What the algorithm can do (on-policy, discrete or continuous
actions) is read the same way, from the config class's static methods.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mosaic.errors import UserError
from mosaic.workerkit.options import UpstreamOption, bounds_by_meaning

#: BenchMARL's algorithms: name -> its config class (``benchmarl/algorithms/<name>.py``).
ALGORITHMS = {"mappo": "MappoConfig", "ippo": "IppoConfig", "maddpg": "MaddpgConfig", "iddpg": "IddpgConfig",
              "masac": "MasacConfig", "isac": "IsacConfig", "qmix": "QmixConfig", "vdn": "VdnConfig",
              "iql": "IqlConfig"}

#: Bounds of BenchMARL's numeric options where their meaning fixes them (BenchMARL checks none of them itself).
_ONE_OR_MORE = ("on_policy_collected_frames_per_batch", "on_policy_n_envs_per_worker", "on_policy_n_minibatch_iters",
                "on_policy_minibatch_size", "off_policy_collected_frames_per_batch", "off_policy_n_envs_per_worker",
                "off_policy_n_optimizer_steps", "off_policy_train_batch_size", "off_policy_memory_size",
                "hard_target_update_frequency", "mixing_embed_dim", "num_qvalue_nets", "exploration_anneal_frames",
                "max_steps", "max_cycles", "n_agents", "N")
_FRACTIONS = ("gamma", "lmbda", "polyak_tau", "exploration_eps_init", "exploration_eps_end", "clip_epsilon",
              "off_policy_prb_alpha", "off_policy_prb_beta", "local_ratio")
_NOT_NEGATIVE = ("lr", "adam_eps", "clip_grad_val", "entropy_coef", "critic_coef", "off_policy_init_random_frames",
                 "alpha_init", "min_alpha", "max_alpha")
BOUNDS = bounds_by_meaning(_ONE_OR_MORE, _FRACTIONS, _NOT_NEGATIVE)
#: String options whose values are a closed set: the distances TorchRL's ``distance_loss`` computes.
DISTANCES = ("l2", "l1", "smooth_l1")
CHOICES = {"loss_critic_type": DISTANCES, "loss_function": DISTANCES}

_JSON_TYPES = {"bool": "boolean", "int": "integer", "float": "number", "str": "string"}


def benchmarl_folder() -> Path:
    """Where BenchMARL is installed, found without importing it."""
    spec = importlib.util.find_spec("benchmarl")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("benchmarl: BenchMARL is not installed here; the benchmarl worker runs in its own "
                        "environment: `mosaic envs build benchmarl`, then run it through `mosaic`")
    return Path(list(spec.submodule_search_locations)[0])


def read_yaml(relative: str) -> dict[str, Any]:
    """A yaml file under ``benchmarl/conf`` as BenchMARL reads it (``benchmarl.utils._read_yaml_config``: Hydra's
    ``defaults`` list dropped)."""
    import yaml

    data = yaml.safe_load((benchmarl_folder() / "conf" / relative).read_text(encoding="utf-8")) or {}
    data.pop("defaults", None)
    return data


def _class_node(module: str, name: str) -> ast.ClassDef:
    source = benchmarl_folder() / (module.replace(".", "/") + ".py")
    tree = ast.parse(source.read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def dataclass_fields(module: str, name: str) -> dict[str, str]:
    """A dataclass's fields and their annotations (as written), from BenchMARL's source."""
    return {n.target.id: ast.unparse(n.annotation) for n in _class_node(module, name).body
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}


def static_answers(module: str, name: str) -> dict[str, bool]:
    """A config class's static methods that return a constant (``on_policy``, ``supports_discrete_actions``...)."""
    out = {}
    for node in _class_node(module, name).body:
        if isinstance(node, ast.FunctionDef) and len(node.body) >= 1:
            last = node.body[-1]
            if isinstance(last, ast.Return) and isinstance(last.value, ast.Constant):
                out[node.name] = last.value.value
    return out


def option_type(annotation: str) -> tuple[str, bool]:
    """(JSON type, takes null) of a dataclass annotation: ``Optional[float]`` is a number or null, ``List[str]``
    an array; anything else (dicts, classes) any value."""
    text = annotation.replace(" ", "")
    null = text.startswith("Optional[")
    inner = text[len("Optional["):-1] if null else text
    if inner in _JSON_TYPES:
        return _JSON_TYPES[inner], null
    if inner.startswith(("List[", "Sequence[")):
        return "array", null
    return "any", null


def upstream(name: str, default: Any, annotation: str, owner: str) -> UpstreamOption:
    kind, null = option_type(annotation)
    if kind == "number" and isinstance(default, int) and not isinstance(default, bool):
        default = float(default)
    param = UpstreamOption(name, default, "BenchMARL", f"{owner}.{name} ({annotation})", owner=owner, type=kind,
                           null=null)
    return param.bounded(*BOUNDS.get(name, (None, None)), choices=CHOICES.get(name, ()))


def _table(module: str, cls: str, yaml_path: str, owner: str) -> dict[str, UpstreamOption]:
    fields, defaults = dataclass_fields(module, cls), read_yaml(yaml_path)
    return {name: upstream(name, defaults.get(name), annotation, owner) for name, annotation in fields.items()}


@functools.lru_cache(maxsize=None)
def experiment_options() -> dict[str, UpstreamOption]:
    """``ExperimentConfig``'s fields with ``conf/experiment/base_experiment.yaml``'s defaults."""
    return _table("experiment.experiment", "ExperimentConfig", "experiment/base_experiment.yaml", "ExperimentConfig")


@dataclass(frozen=True)
class Algorithm:
    """One of BenchMARL's algorithms as its config class declares it."""

    name: str
    config_class: str
    on_policy: bool
    continuous: bool
    discrete: bool

    @property
    def action_spaces(self) -> tuple[str, ...]:
        return tuple(k for k, ok in (("discrete", self.discrete), ("box", self.continuous)) if ok)


@functools.lru_cache(maxsize=None)
def algorithm(name: str) -> Algorithm:
    answers = static_answers(f"algorithms.{name}", ALGORITHMS[name])
    return Algorithm(name, ALGORITHMS[name], bool(answers["on_policy"]),
                     bool(answers["supports_continuous_actions"]), bool(answers["supports_discrete_actions"]))


@functools.lru_cache(maxsize=None)
def algorithm_options(name: str) -> dict[str, UpstreamOption]:
    """The algorithm's config dataclass fields with ``conf/algorithm/<name>.yaml``'s defaults."""
    cls = ALGORITHMS[name]
    return _table(f"algorithms.{name}", cls, f"algorithm/{name}.yaml", cls)


#: The fields of ``benchmarl.models.MlpConfig`` a config may set (``model`` and ``critic_model``).
MODEL_FIELDS = ("num_cells", "activation_class")


@functools.lru_cache(maxsize=None)
def model_defaults() -> dict[str, Any]:
    """BenchMARL's default MLP (``conf/model/layers/mlp.yaml``, what ``MlpConfig.get_from_yaml()`` reads): the
    fields of :data:`MODEL_FIELDS`, as the yaml writes them (``torch.nn.Tanh``)."""
    data = read_yaml("model/layers/mlp.yaml")
    return {name: data[name] for name in MODEL_FIELDS}


@functools.lru_cache(maxsize=None)
def activation_classes() -> tuple[str, ...]:
    """torch.nn's activation modules that take no required argument, named as BenchMARL's yaml names them
    (``torch.nn.ReLU``): the ``__all__`` of the installed torch's ``torch/nn/modules/activation.py``, read, not
    imported (``Threshold`` and ``MultiheadAttention`` need arguments, and a model config gives none)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("torch: not installed here; the benchmarl worker runs in its own environment")
    source = Path(list(spec.submodule_search_locations)[0]) / "nn" / "modules" / "activation.py"
    tree = ast.parse(source.read_text(encoding="utf-8"))
    exported = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets))
    out = []
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name in exported:
            init = next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
            args = init.args if init else None
            if args is None or (len(args.args) - 1 == len(args.defaults) and None not in args.kw_defaults):
                out.append(f"torch.nn.{node.name}")
    return tuple(out)


def task_names(family: str) -> list[str]:
    """The tasks BenchMARL ships for a family: its ``conf/task/<family>/*.yaml``."""
    return sorted(p.stem for p in (benchmarl_folder() / "conf" / "task" / family).glob("*.yaml"))


@functools.lru_cache(maxsize=None)
def task_options(family: str, task: str) -> dict[str, UpstreamOption]:
    """The task's ``TaskConfig`` fields with ``conf/task/<family>/<task>.yaml``'s defaults."""
    return _table(f"environments.{family}.{task}", "TaskConfig", f"task/{family}/{task}.yaml",
                  f"{family}/{task} TaskConfig")
