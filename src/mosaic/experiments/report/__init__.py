"""An experiment's report: what was run, what it scored with honest intervals, and what that does not show.

:func:`write_report` turns the cells of an experiment (one run each: a configuration on an env with a
seed) into a folder::

    report.md                     what was run; per-env and aggregate tables with 95% intervals and the
                                  seeds behind each number; probability of improvement for every ordered
                                  pair; what these numbers do not support
    scores.csv                    one row per cell, failed and pending ones included
    marl_eval.json                the final scores and curves in marl-eval's raw-data format
    sample_efficiency.png         IQM over env steps with its band, one panel per env
    aggregates.png                the aggregate metrics' intervals
    performance_profiles.png      the fraction of runs above each score
    probability_of_improvement.png

Each run's score is its final score (:mod:`mosaic.experiments.results`). The same input gives the same files,
byte for byte (the PNGs aside). One module per seam:

* :mod:`~mosaic.experiments.report.inputs`: what a report is made from (:class:`ReportCell`, :class:`ReportInput`);
* :mod:`~mosaic.experiments.report.analysis`: every number, computed once (:func:`analyse`);
* :mod:`~mosaic.experiments.report.formatting`: numbers as the report writes them (:func:`fmt`, ...);
* :mod:`~mosaic.experiments.report.tables` and :mod:`~mosaic.experiments.report.caveats`: ``report.md``;
* :mod:`~mosaic.experiments.report.exports`: ``scores.csv`` and ``marl_eval.json``;
* :mod:`~mosaic.experiments.report.plots`: the figures;
* :mod:`~mosaic.experiments.report.write`: the folder, written all at once (:func:`write_report`).

An experiment's cells are read from its store into a :class:`ReportInput` by :mod:`mosaic.experiments.collect`.
"""

from mosaic.experiments.report.analysis import Analysis, analyse
from mosaic.experiments.report.formatting import fmt, fmt_interval
from mosaic.experiments.report.inputs import ReportCell, ReportInput
from mosaic.experiments.report.write import write_report

__all__ = ["Analysis", "ReportCell", "ReportInput", "analyse", "fmt", "fmt_interval", "write_report"]
