"""What a study's spec must hold at plan time, before anything runs (the spec alone is checked as it is parsed,
by ``mosaic.experiments.spec.check_study``): each parameter is a setting of each contender's worker, as ``mosaic
workers show`` lists them, and every contender gets the same env-step budget once its worker has normalised its
config (:func:`check_against_workers`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from mosaic.errors import UserError
from mosaic.experiments.study.space import BUDGET_TOLERANCE, Study

if TYPE_CHECKING:
    from mosaic.experiments.spec import Cell, ExperimentSpec


def check_against_workers(spec: "ExperimentSpec", study: Study, samples: "list[Cell]",
                          normalised: "list[Cell]") -> None:
    """Each parameter is a setting of each contender's worker (its config schema, and its algorithm's
    ``algo_params``, as ``mosaic workers show`` lists them), and the contenders' normalised configs hold the same
    env-step budget (within :data:`BUDGET_TOLERANCE` where a library rounds it). ``samples``: one cell per contender
    at the sample point, as the spec wrote it; ``normalised``: the same cells as their workers normalised them."""
    check_settings(spec, study, samples)
    check_budgets(normalised)


def check_settings(spec: "ExperimentSpec", study: Study, samples: "list[Cell]") -> None:
    """Each parameter is a setting of each contender's worker (:func:`check_against_workers`). Needs no worker run,
    so it goes before the workers check the sample cells: a worker refusing the sample cell of a parameter it lacks
    would name the cell, not the study's field."""
    from mosaic.host.daemon.catalog import WorkerCatalog

    catalog = WorkerCatalog()
    catalog.refresh()
    for cell in samples:
        try:
            document = catalog.description(cell.worker)
        except UserError:  # a worker not installed, or that cannot describe itself: its check of the cell says so
            continue
        algorithm = str(cell.config.get("algorithm") or (document.get("default_config") or {}).get("algorithm") or "")
        for dim in study.for_worker(cell.worker):
            path = dim.name if dim.worker else spec.path_for(dim.name, cell.worker, dim.field)
            entry = spec.translate.get(dim.name, {}).get(cell.worker) if not dim.worker else None
            if isinstance(entry, dict) and entry.get("derive"):
                path = str(entry["path"])
            if not has_setting(document, algorithm, path):
                where = f" --algorithm {algorithm}" if path.startswith("algo_params.") and algorithm else ""
                raise UserError(f"{dim.field}: worker {cell.worker!r} has no setting {path!r} (`mosaic workers show "
                                f"{cell.worker}{where}` lists them); allowed: a setting of every contender's worker, "
                                "or a translation of the name to it (translate)")


def check_budgets(normalised: "list[Cell]", rounded: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """The contenders' normalised configs hold the same env-step budget (:func:`check_against_workers`): the env
    steps each library will take, where its worker says up front that it rounds ``total_timesteps`` (``rounded``:
    cell id -> ``{"env_steps", "message"}``), within :data:`BUDGET_TOLERANCE` of each other."""
    from mosaic.workerkit.run_fields import summarize

    budgets = {}
    for cell in normalised:
        summary = summarize(cell.config, worker=cell.worker)
        said = (rounded or {}).get(cell.cell_id) or {}
        steps = said.get("env_steps") if isinstance(said.get("env_steps"), int) else summary.budget
        budgets[cell.configuration] = (steps, summary.budget_unit)
    values = [b for b, _ in budgets.values() if b is not None]
    if len(values) != len(budgets):
        missing = next(k for k, (b, _) in budgets.items() if b is None)
        raise UserError(f"settings.total_timesteps: contender {missing!r} has no env-step budget; allowed: the same "
                        "total_timesteps for every contender")
    units = {u for _, u in budgets.values()}
    if len(units) > 1 or max(values) > min(values) * (1 + BUDGET_TOLERANCE):
        listed = ", ".join(f"{k}: {b} {u}" for k, (b, u) in budgets.items())
        if rounded:
            listed += "; as the libraries round them"
        raise UserError(f"settings.total_timesteps: unequal budgets across contenders ({listed}); allowed: the same "
                        f"env-step budget for every contender (within {BUDGET_TOLERANCE:.0%} where a library rounds)")


def has_setting(document: Mapping[str, Any], algorithm: str, path: str) -> bool:
    """Does the worker whose describe document is ``document`` take ``path`` (dotted) for ``algorithm``?
    A path under an object whose schema lists no properties (``environment.env_kwargs``) is taken."""
    parts = path.split(".")
    if parts[0] == "algo_params":
        schemas = document.get("algo_params_schemas") or {}
        schema = next((v for k, v in schemas.items() if k.lower() == algorithm.lower()), None)
        if schema is None:
            return False
        return _walk(schema, parts[1:])
    return _walk(document.get("config_schema") or {}, parts)


def _walk(schema: Mapping[str, Any], parts: list[str]) -> bool:
    for i, part in enumerate(parts):
        options = [schema, *(schema.get("anyOf") or ()), *(schema.get("oneOf") or ())]
        found = None
        for option in options:
            props = option.get("properties") if isinstance(option, Mapping) else None
            if props and part in props:
                found = props[part]
                break
        if found is None:
            open_object = any(isinstance(o, Mapping) and o.get("type") == "object" and not o.get("properties")
                              and o.get("additionalProperties", True) is not False for o in options)
            return open_object
        schema = found
    return True
