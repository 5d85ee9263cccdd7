"""Every figure an experiment report writes, rendered and inspected: what it draws lies inside its axes, no text
runs off the figure's canvas, the axes keep a readable size, and matplotlib warns of nothing (a collapsed layout
warns). Not only that the file exists.

The runs are written as the recorder leaves them (a manifest through RunStore, telemetry lines as workers print
them): configurations named as real grids name them (``worker=xuance algorithm=mappo``), curves of many points,
and runs that logged a single point each (a budget shorter than the reporting interval).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from mosaic.experiments.report import ReportCell, ReportInput, analyse
from mosaic.experiments.report.plots import PLOTS, PLOTTERS
from mosaic.runs import RunStore

pytest.importorskip("matplotlib")

CONFIGURATIONS = ("worker=ray algorithm=mappo", "worker=ray algorithm=ippo", "worker=xuance algorithm=mappo",
                  "worker=xuance algorithm=ippo")


def _write_run(store: RunStore, run_id: str, points: list[tuple[float, float]]) -> Path:
    run = store.create(run_id, {"worker": "ray"}, {"worker": "ray", "status": "created"})
    events = [{"type": "run_started", "worker": "ray", "config_digest": "0" * 64, "versions": {"python": "3.11"},
               "resources": {"cpus": 1}, "env": {"family": "mpe", "env_id": "x"}}]
    events += [{"type": "metrics", "iteration": k, "timesteps_total": x, "episode_return_mean": y}
               for k, (x, y) in enumerate(points, start=1)]
    events.append({"type": "run_completed", "summary": {}})
    run.telemetry_path.write_text("\n".join(json.dumps({"v": 1, **e, "run_id": run_id, "seq": i, "ts": 1e9 + i})
                                            for i, e in enumerate(events)) + "\n", encoding="utf-8")
    run.update_manifest(status="completed", worker="ray", env={"family": "mpe", "env_id": "x"})
    return run.root


def _input(home: Path, name: str, configurations, envs, seeds, points_of, normalisation=None) -> ReportInput:
    store = RunStore(home)
    cells = []
    for conf in configurations:
        for env in envs:
            for seed in seeds:
                cid = f"c{len(cells):03d}"
                root = _write_run(store, f"{name}-{cid}", points_of(configurations.index(conf), env, seed))
                cells.append(ReportCell(cid, conf, env, seed, "completed", f"{name}-{cid}", root,
                                        {"configuration": conf, "seed": seed}, "ray", "ppo", 3000))
    return ReportInput(name=name, spec={"name": name}, cells=cells, reps=200, normalisation=normalisation)


def _curve(i: int, env: str, seed: int) -> list[tuple[float, float]]:
    return [(400.0 * k, -80 + i * 3 + k * (1 + 0.2 * seed) + (len(env) % 3)) for k in range(1, 11)]


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> dict[str, ReportInput]:
    home = tmp_path_factory.mktemp("home")
    return {
        "four long names, one env": _input(home, "four", list(CONFIGURATIONS), ["simple_spread_v3"], range(5), _curve),
        "two envs, normalised": _input(home, "norm", list(CONFIGURATIONS[:2]), ["simple_spread_v3", "simple_tag_v3"],
                                       range(3), _curve, {"simple_spread_v3": (-100.0, 0.0),
                                                          "simple_tag_v3": (-100.0, 0.0)}),
        # each run logged one point: at the same env steps, and (CleanRL's rounded budgets) at different ones
        "one point per run": _input(home, "one", list(CONFIGURATIONS[:2]), ["CartPole-v1"], range(3),
                                    lambda i, env, seed: [(2560.0, 20.0 + 5 * i + seed)]),
        "one point, different steps": _input(home, "onediff", list(CONFIGURATIONS[:2]), ["CartPole-v1"], range(3),
                                             lambda i, env, seed: [(2560.0 + 400 * i, 20.0 + 5 * i + seed)]),
    }


def _drawn(ax) -> list[np.ndarray]:
    """The (x, y) points of what ``ax`` draws from data: its lines and its filled bands."""
    out = []
    for line in ax.get_lines():
        if not line.get_visible() or line.get_transform() != ax.transData:
            continue
        xy = np.column_stack([np.asarray(line.get_xdata(), dtype=float), np.asarray(line.get_ydata(), dtype=float)])
        visible = line.get_marker() not in (None, "", "None", " ") or (line.get_linestyle() not in ("None", "")
                                                                       and len(xy) > 1)
        if len(xy) and visible:
            out.append(xy)
    for collection in ax.collections:
        for path in collection.get_paths():
            if len(path.vertices):
                out.append(np.asarray(path.vertices, dtype=float))
    return out


def inspect(fig, png: Path) -> list[str]:
    """What is wrong with a rendered figure (nothing: an empty list)."""
    from matplotlib.image import imread
    from matplotlib.text import Text

    problems = []
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox

    def off_canvas(box) -> bool:
        return box.x0 < canvas.x0 - 1 or box.y0 < canvas.y0 - 1 or box.x1 > canvas.x1 + 1 or box.y1 > canvas.y1 + 1

    # tick labels are drawn only for ticks inside the view: each axes' tight box covers those drawn
    tick_labels = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                   for tick in axis.get_major_ticks() + axis.get_minor_ticks() for t in (tick.label1, tick.label2)}
    for text in fig.findobj(Text):
        if id(text) in tick_labels or not text.get_visible() or not text.get_text().strip():
            continue
        box = text.get_window_extent(renderer)
        if off_canvas(box):
            problems.append(f"text {text.get_text()!r} at {box.bounds} runs off the canvas {canvas.bounds}")
    for ax in fig.axes:
        tight = ax.get_tightbbox(renderer)
        if off_canvas(tight):
            problems.append(f"axes {ax.get_title()!r} with its labels at {tight.bounds} runs off the canvas "
                            f"{canvas.bounds}")
        box = ax.get_window_extent(renderer)
        if box.width < 120 or box.height < 60:
            problems.append(f"axes {ax.get_title()!r} crushed to {box.width:.0f}x{box.height:.0f} px")
        drawn = _drawn(ax)
        said = [t.get_text() for t in ax.texts if t.get_visible()]
        if not drawn and not said:
            problems.append(f"axes {ax.get_title()!r} is an empty frame")
        (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        for xy in drawn:
            inside = (xy[:, 0] >= x0 - 1e-9) & (xy[:, 0] <= x1 + 1e-9) & (xy[:, 1] >= y0 - 1e-9) & (xy[:, 1] <= y1 + 1e-9)
            if not inside.any():
                problems.append(f"axes {ax.get_title()!r} draws outside its limits")
    pixels = imread(png)[..., :3]
    if (pixels < 0.9).mean() < 0.005:
        problems.append(f"{png.name} is (nearly) blank")
    return problems


@pytest.mark.parametrize("case", ["four long names, one env", "two envs, normalised", "one point per run",
                                  "one point, different steps"])
@pytest.mark.parametrize("name", PLOTS)
def test_every_report_figure_is_drawn_inside_its_canvas(cases, case, name, tmp_path):
    analysis = analyse(cases[case])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = PLOTTERS[name](analysis, tmp_path / name)
    layout = [str(w.message) for w in caught if "layout" in str(w.message).lower() or "matplotlib" in w.filename]
    assert not layout, layout
    assert inspect(fig, tmp_path / name) == []


@pytest.mark.parametrize("case", ["one point per run", "one point, different steps"])
def test_runs_of_one_point_are_drawn_and_said_to_be_one_point(cases, case, tmp_path):
    fig = PLOTTERS["sample_efficiency.png"](analyse(cases[case]), tmp_path / "se.png")
    (ax,) = fig.axes
    points = sum(len(xy) for xy in _drawn(ax))
    assert points == 6  # 2 configurations x 3 seeds, one point each
    texts = [t.get_text() for t in ax.texts]
    assert any("one point" in t for t in texts), texts
