"""The plan: every cell of a spec, checked by its own worker before anything runs.

Each worker checks all of its cells in one process of its own interpreter (``--validate-many``), exactly
as ``mosaic run --dry-run`` would check one config; the plan keeps each cell's config as the worker
normalised it (its defaults filled in), so what runs and what the report states are the same thing.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

from mosaic.errors import UserError
from mosaic.experiments.spec import Cell, ExperimentSpec, env_label
from mosaic.workerkit.run_fields import summarize


@dataclass
class Plan:
    name: str
    cells: list[Cell]
    retries: int
    backend: str
    spec_digest: str
    retry_from: str = "start"  # "checkpoint": a retry continues from the newest checkpoint saved before
    #: A study's plan (the spec's ``tuning``): its cells are made as it goes, so ``cells`` is empty and this holds
    #: each contender's sample cell (the space's middle point, as its worker normalised it) and the budget.
    study: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "spec_digest": self.spec_digest, "retries": self.retries,
                "retry_from": self.retry_from, "backend": self.backend, "cells": [c.to_dict() for c in self.cells],
                **({"study": self.study} if self.study is not None else {})}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Plan":
        return cls(str(data["name"]), [Cell.from_dict(c) for c in data["cells"]], int(data["retries"]),
                   str(data.get("backend", "local")), str(data["spec_digest"]),
                   str(data.get("retry_from", "start")),  # plans written before retry_from: from the start
                   data.get("study"))

    def cell(self, cell_id: str) -> Cell:
        for cell in self.cells:
            if cell.cell_id == cell_id:
                return cell
        raise UserError(f"cell: {cell_id!r} is not in experiment {self.name!r} "
                        f"(cells {self.cells[0].cell_id}..{self.cells[-1].cell_id})")


def spec_digest(spec: ExperimentSpec) -> str:
    """What makes two specs the same experiment: the cells they stand for (retries, retry_from and report aside)."""
    cells: Any = [{"cell": c.cell_id, "config": c.config} for c in spec.cells()]
    if spec.study is not None:  # a study is its space, budget and seeds over the contenders' sample cells
        from mosaic.experiments.study.space import sample_point

        cells = {"tuning": spec.source.get("tuning"), "seeds": spec.seeds, "score": spec.source.get("score"),
                 "samples": [spec.cell("plan", c, spec.study.seeds[0],
                                       sample_point(spec.study, spec._worker_of(c))).config
                             for c in spec.contenders()]}
    return hashlib.sha256(json.dumps(cells, sort_keys=True, default=str).encode()).hexdigest()[:16]


def cell_title(cell: Cell) -> str:
    return f"cell {cell.cell_id} ({cell.configuration}, env {cell.env}, seed {cell.seed})"


def make_plan(spec: ExperimentSpec, validate: bool = True, cells: list[Cell] | None = None) -> Plan:
    """The spec's cells (or ``cells``: the spec's, as ``store.continue_cells`` set them to go on from an
    earlier experiment's), each checked and normalised by its worker; :class:`UserError` naming every bad cell."""
    if spec.study is not None:
        return _study_plan(spec, validate)
    cells = spec.cells() if cells is None else cells
    if validate:
        cells = _checked(cells)
    _refuse_repeats(cells)
    envs = sorted({c.env for c in cells})
    missing = [e for e in envs if e not in spec.normalise]
    if spec.normalise and missing:
        raise UserError(f"normalise: no scores for {', '.join(missing)}; allowed: random and reference scores for "
                        f"every env of the grid ({', '.join(envs)}), or no normalise at all")
    return Plan(spec.name, cells, spec.retries, spec.backend, spec_digest(spec), spec.retry_from)


def _study_plan(spec: ExperimentSpec, validate: bool) -> Plan:
    """A study's plan: one sample cell per contender (the space's middle point, on the first tuning seed), checked
    by its worker; each parameter checked against the worker's settings, and the budgets compared."""
    from mosaic.experiments.study.checks import check_budgets, check_settings
    from mosaic.experiments.study.space import sample_point

    study = spec.study
    assert study is not None
    samples = [spec.cell(f"k{i}", c, study.seeds[0], sample_point(study, spec._worker_of(c)))
               for i, c in enumerate(spec.contenders())]
    if validate:  # the study's fields first: a worker refusing a sample cell would name the cell, not the field
        check_settings(spec, study, samples)
    rounded: dict[str, dict[str, Any]] = {}
    normalised = _checked(samples, rounded) if validate else samples
    if validate:
        check_budgets(normalised, rounded)
    summary = {"contenders": [{"label": c.configuration, "worker": c.worker, "settings": c.settings,
                               "env": c.env, "sample": c.config,
                               **({"rounded_budget": rounded[c.cell_id]} if c.cell_id in rounded else {}),
                               "sample_point": sample_point(study, c.worker)} for c in normalised],
               "trials": study.trials, "tuning_seeds": study.seeds, "test_seeds": list(spec.seeds),
               "sampler": study.sampler, "sampler_seed": study.sampler_seed, "pruner": study.pruner.name,
               "parallel": study.parallel, "storage": study.storage,
               "space": [{"name": d.name, "field": d.field, "worker": d.worker, "describe": d.describe()}
                         for d in study.dimensions]}
    return Plan(spec.name, [], spec.retries, spec.backend, spec_digest(spec), spec.retry_from, summary)


def _refuse_repeats(cells: list[Cell]) -> None:
    """Two cells with the same (normalised) config would be the same run twice, counted as two samples."""
    first: dict[str, Cell] = {}
    for cell in cells:
        key = json.dumps(cell.config, sort_keys=True, default=str)
        if key in first:
            raise UserError(f"axes: {cell_title(first[key])} and {cell_title(cell)} are the same run: a value "
                            "is listed twice (or in two spellings of it); allowed: distinct values")
        first[key] = cell


def _checked(cells: list[Cell], rounded: dict[str, dict[str, Any]] | None = None) -> list[Cell]:
    """Each cell as its worker normalised it; ``rounded``, if given, gets cell id -> the budget its library rounds
    it to, as the worker says up front (cells taken exactly are left out)."""
    from mosaic.host.discovery import discover_workers
    from mosaic.host.launcher import validate_configs

    by_worker: dict[str, list[int]] = {}
    for i, cell in enumerate(cells):
        by_worker.setdefault(cell.worker, []).append(i)
    out = list(cells)
    problems: list[str] = []
    for name, indices in by_worker.items():
        found = discover_workers(only=name)
        if name not in found.names():
            found = discover_workers()
        try:
            worker = found.get(name)
        except UserError as exc:  # every cell of the unknown worker is refused, each named
            problems += [f"{cell_title(cells[i])}: {exc}" for i in indices]
            continue
        said: list[dict[str, Any] | None] = []
        answers = validate_configs(worker, [{**cells[i].config, "run_id": f"plan-{cells[i].cell_id}"}
                                            for i in indices], rounded=said)
        if rounded is not None:
            rounded.update({cells[i].cell_id: r for i, r in zip(indices, said) if r})
        for i, answer in zip(indices, answers):
            if isinstance(answer, UserError):
                problems.append(f"{cell_title(cells[i])}: {answer}")
                continue
            config = {k: v for k, v in answer.items() if k != "run_id"}
            named = cells[i].env != env_label(cells[i].config)  # the spec's own word for the env (env_word)
            env = cells[i].env if named else summarize(config, worker=name).env_id or cells[i].env
            out[i] = replace(cells[i], config=config, env=env)
    if problems:
        shown = problems[:10] + ([f"... and {len(problems) - 10} more"] if len(problems) > 10 else [])
        raise UserError(f"{len(problems)} of {len(cells)} cells refused; nothing was run:\n  " + "\n  ".join(shown))
    return out
