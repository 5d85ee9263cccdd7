"""The report folder, written all at once (staged beside its final place, then renamed into it): a failure
leaves the previous report, or nothing, never half of one."""

from __future__ import annotations

import json
from pathlib import Path

from mosaic.experiments.report.analysis import Analysis, analyse
from mosaic.experiments.report.exports import marl_eval_data, render_csv
from mosaic.experiments.report.inputs import ReportInput
from mosaic.experiments.report.plots import PLOTS, PLOTTERS
from mosaic.experiments.report.tables import render_markdown
from mosaic.runs import staged_folder


def write_report(out_dir: Path, data: ReportInput, analysis: Analysis | None = None) -> Path:
    """Write the report folder ``out_dir`` (replacing one already there, all at once); returns report.md's path.
    ``analysis``: the numbers of ``data`` when already computed (:func:`analyse`), not computed again."""
    out_dir = Path(out_dir)
    if data.study is not None and not data.cells:  # a study still tuning: its own part only, so far
        with staged_folder(out_dir, replace=True, suffix=".tmp", mode=0o755, sweep=True) as staging:
            lines = [f"# Study {data.name}", "", "Still tuning: no contender's best configuration has run on the test "
                     "seeds yet, so nothing is compared here; below is the study so far (a report written again "
                     "later adds the comparison).", ""]
            (staging / "report.md").write_text("\n".join(lines + _study_files(data, staging)), encoding="utf-8")
        return out_dir / "report.md"
    analysis = analysis or analyse(data)
    with staged_folder(out_dir, replace=True, suffix=".tmp", mode=0o755, sweep=True) as staging:
        markdown = render_markdown(analysis)
        if data.study is not None:
            markdown += "\n" + "\n".join(_study_files(data, staging))
        (staging / "report.md").write_text(markdown, encoding="utf-8")
        (staging / "scores.csv").write_text(render_csv(analysis), encoding="utf-8")
        (staging / "marl_eval.json").write_text(json.dumps(marl_eval_data(analysis), indent=2) + "\n",
                                                encoding="utf-8")
        for name in PLOTS:
            PLOTTERS[name](analysis, staging / name)
    return out_dir / "report.md"


def _study_files(data: ReportInput, staging: Path) -> list[str]:
    """A study's section of report.md; its trials, figures and Optuna journal written into ``staging``."""
    import shutil

    from mosaic.experiments.report import study

    assert data.study is not None
    args = (data.metric, data.higher_is_better, data.reps, data.confidence, data.seed)
    (staging / "trials.csv").write_text(study.trials_csv(data.study), encoding="utf-8")
    study.plot_expected_best(data.study, *args, staging / "expected_best.png")
    study.plot_parameters(data.study, data.metric, staging / "parameters.png")
    if data.study.journal is not None:
        shutil.copyfile(data.study.journal, staging / "study.journal")
    return study.render_study(data.study, *args)
