"""A report's figures (matplotlib, the Agg canvas, nothing registered with pyplot): the IQM curves with their
bands, the aggregate metrics' intervals, the performance profiles and the probability of improvement."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from mosaic.experiments.report.analysis import Analysis, aggregate_matrix, env_matrix, metric_set, shared_curves
from mosaic.scoring import stats

#: Thresholds a performance profile is drawn at.
PROFILE_POINTS = 101
PLOTS = ("sample_efficiency.png", "aggregates.png", "performance_profiles.png", "probability_of_improvement.png")


def _figure(panels: int, width: float = 5.0, height: float = 3.6) -> tuple[Any, list[Any]]:
    """A figure with ``panels`` axes side by side, not registered with pyplot: nothing global to close."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * max(1, panels), height), layout="constrained")
    axes = fig.subplots(1, max(1, panels), squeeze=False)[0]
    return fig, list(axes)


def _save(fig: Any, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # the Agg canvas: PNGs without a display, whatever pyplot's backend is
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})


def _colours(configurations: list[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {c: cmap(i % 10) for i, c in enumerate(configurations)}


def plot_sample_efficiency(a: Analysis, path: Path) -> None:
    d = a.data
    fig, axes = _figure(len(a.envs))
    colours = _colours(a.configurations)
    for ax, env in zip(axes, a.envs):
        drawn = 0
        for conf in a.configurations:
            cells = [s for s in a.included.get((conf, env), []) if s.result and s.result.xs]
            if not cells:
                continue
            try:
                grid, values = shared_curves([(s.result.xs, s.result.ys) for s in cells])  # type: ignore[union-attr]
            except ValueError:
                continue
            point, low, high = stats.curve_intervals(values[:, None, :], stats.iqm, d.reps, d.confidence,
                                                     stats.derived_seed(f"curve:{env}:{conf}", d.seed))
            ax.plot(grid, point, color=colours[conf], label=f"{conf} ({len(cells)} seeds)")
            ax.fill_between(grid, low, high, color=colours[conf], alpha=0.2, linewidth=0)
            drawn += 1
        ax.set_title(env)
        ax.set_xlabel("env steps")
        ax.set_ylabel(f"IQM of {d.metric}")
        if drawn:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no curves", ha="center", va="center", transform=ax.transAxes)
    _save(fig, path)


def _interval_bars(ax: Any, labels: list[str], ivs: list[stats.Interval], colours: list[Any]) -> None:
    for i, (iv, colour) in enumerate(zip(ivs, colours)):
        ax.plot([float(iv.low), float(iv.high)], [i, i], color=colour, linewidth=6, alpha=0.5,
                solid_capstyle="butt")
        ax.plot([float(iv.point)], [i], marker="|", color="black", markersize=14)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.invert_yaxis()


def plot_aggregates(a: Analysis, path: Path) -> None:
    titles = {k: t for k, (t, _) in metric_set(a.normalised, per_env=False).items()}
    fig, axes = _figure(len(titles), width=3.6, height=0.5 * len(a.configurations) + 1.6)
    colours = _colours(a.configurations)
    for ax, (key, title) in zip(axes, titles.items()):
        present = [c for c in a.configurations if c in a.aggregate[key]]
        _interval_bars(ax, present, [a.aggregate[key][c] for c in present], [colours[c] for c in present])
        ax.set_title(f"{title}{' (normalised)' if a.normalised else ''}")
        if ax is not axes[0]:
            ax.set_yticklabels([])
    _save(fig, path)


def plot_performance_profiles(a: Analysis, path: Path) -> None:
    """Normalised: one profile over every env. Raw: one panel per env (raw scores do not pool)."""
    d = a.data
    if a.normalised:
        panels = [("all envs (normalised)", {c: m for c in a.configurations
                                               if (m := aggregate_matrix(a, c)) is not None})]
    else:
        panels = [(env, {c: m for c in a.configurations if (m := env_matrix(a, c, env)) is not None})
                  for env in a.envs]
    fig, axes = _figure(len(panels))
    colours = _colours(a.configurations)
    sign = a.direction
    for ax, (title, matrices) in zip(axes, panels):
        if not matrices:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(title)
            continue
        everything = np.concatenate([m.ravel() for m in matrices.values()])
        taus = np.linspace(everything.min(), everything.max(), PROFILE_POINTS)
        for conf, matrix in matrices.items():
            profile, low, high = stats.performance_profile_band(sign * matrix, sign * taus, d.reps, d.confidence,
                                                                stats.derived_seed(f"profile:{title}:{conf}", d.seed))
            ax.plot(taus, profile, color=colours[conf], label=conf)
            ax.fill_between(taus, low, high, color=colours[conf], alpha=0.2, linewidth=0)
        ax.set_title(title)
        ax.set_xlabel("score τ")
        ax.set_ylabel(f"fraction of runs with score {'>' if sign > 0 else '<'} τ")
        ax.set_ylim(-0.02, 1.02)
        ax.legend(fontsize="small")
    _save(fig, path)


def plot_probability_of_improvement(a: Analysis, path: Path) -> None:
    pairs = [(x, y) for x in a.configurations for y in a.configurations if (x, y) in a.poi]
    fig, axes = _figure(1, width=6.0, height=0.45 * len(pairs) + 1.6)
    ax = axes[0]
    if pairs:
        colours = _colours(a.configurations)
        _interval_bars(ax, [f"P({x} > {y})" for x, y in pairs], [a.poi[p] for p in pairs],
                       [colours[x] for x, _ in pairs])
        ax.axvline(0.5, color="grey", linestyle="--", linewidth=1)
        ax.set_xlim(-0.04, 1.04)
    else:
        ax.text(0.5, 0.5, "fewer than two configurations with data", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_title("probability of improvement")
    _save(fig, path)


PLOTTERS: dict[str, Callable[[Analysis, Path], None]] = {
    "sample_efficiency.png": plot_sample_efficiency, "aggregates.png": plot_aggregates,
    "performance_profiles.png": plot_performance_profiles,
    "probability_of_improvement.png": plot_probability_of_improvement,
}
