"""What a report is made from: an experiment's cells (one run each) and how they are scored."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mosaic.experiments.results import RunResult, Units


@dataclass
class ReportCell:
    cell_id: str  # "c000", ...
    configuration: str  # label of the varied settings except env and seed, e.g. "worker=ray algorithm=mappo"
    env: str  # task label (e.g. "simple_spread_v3")
    seed: int
    status: str  # completed / failed / cancelled / pending / running
    run_id: str | None
    run_dir: Path | None
    settings: dict[str, Any]  # axis name -> value for this cell
    worker: str
    algorithm: str
    budget: int | None  # total_timesteps or episodes
    #: the runs this cell's run continued from a checkpoint of, oldest first, with the checkpoint's env steps
    before: tuple[tuple[Path, float | None], ...] = ()
    #: a random-play run that measures its env's random score (the spec's ``normalise``: ``random: measure``)
    baseline: bool = False
    #: a run MOSAIC did not run, read from a marl-eval file (:mod:`mosaic.experiments.marl_eval`): scored from this
    #: result, not from a run folder (None: a run of the experiment's)
    read: RunResult | None = None


@dataclass(frozen=True)
class MarlEvalSource:
    """A marl-eval file whose algorithms joined a report as contenders MOSAIC did not run
    (:func:`mosaic.experiments.marl_eval.join_marl_eval`)."""

    path: Path  # the file, as the command named it (a path in the repository stays readable elsewhere)
    metric: str  # its key in the file
    units: Units  # as the command was told (a marl-eval file carries none)
    #: (ENVIRONMENT/TASK in the file, algorithm, the contender's configuration label, the report's env it joined)
    joined: tuple[tuple[str, str, str, str], ...]
    #: ENVIRONMENT/TASK of the file's tasks that match no env of the report, left out
    left_out: tuple[str, ...] = ()


@dataclass
class StudyTrial:
    """One trial of a study's contender: its parameters, Optuna's state, and its value (the tuning seeds' mean)."""

    contender: str
    number: int
    state: str  # Optuna's: COMPLETE, PRUNED, FAIL, RUNNING
    value: float | None
    params: dict[str, Any]
    seed_scores: list[float] | None = None
    cause: str = ""
    env_steps: float | None = None  # what its runs actually trained, summed over its tuning seeds
    wall_s: float | None = None  # from its first cell's submission to its last cell's end


@dataclass
class StudyInput:
    """A study's own part of a report: its protocol (the plan's ``study``), every trial, each contender's best."""

    protocol: dict[str, Any]
    trials: list[StudyTrial]
    best: dict[str, dict[str, Any]]  # contender -> {"trial", "value", "params"}
    #: contender -> {parameter: importance}, or the reason none is shown
    importances: dict[str, dict[str, float] | str] = field(default_factory=dict)
    importance_method: str = ""
    journal: Path | None = None  # Optuna's journal file, carried by the report folder


@dataclass
class ReportInput:
    name: str
    spec: dict[str, Any]
    cells: list[ReportCell]
    metric: str = "episode_return_mean"
    higher_is_better: bool = True
    #: env -> (random score, reference score); a random score of None: the mean score of the env's baseline cells;
    #: a reference of None: the best configuration's mean score on the env
    normalisation: dict[str, tuple[float | None, float | None]] | None = None
    reps: int = 2000
    confidence: float = 0.95
    seed: int = 0
    final_fraction: float = 0.1  # a run's final score: its mean metric over this last part of its env steps
    #: a curve has levelled off when its last window adds less than this share of its whole gain (either way)
    level_within: float = 0.02
    #: a joint report (``--with``): every experiment's spec by name, the first one's (also ``spec``) first
    joined: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: a study's trials and protocol (the cells above are then its test cells only)
    study: StudyInput | None = None
    #: marl-eval files whose algorithms joined as contenders (``--marl-eval``; their cells have ``read`` set)
    marl_eval: list[MarlEvalSource] = field(default_factory=list)
