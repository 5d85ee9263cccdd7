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


#: At most this many configurations, each label at most this long, keep the sample-efficiency legend inside the axes.
LEGEND_INSIDE_MAX = 4
LABEL_INSIDE_MAX = 36


def _figure(panels: int, width: float = 5.0, height: float = 3.6, labels: float = 0.0) -> tuple[Any, list[Any]]:
    """A figure with ``panels`` axes side by side, not registered with pyplot: nothing global to close.
    ``labels``: inches more, for tick labels left of the first panel (see :func:`_label_inches`)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width * max(1, panels) + labels, height), layout="constrained")
    axes = fig.subplots(1, max(1, panels), squeeze=False)[0]
    return fig, list(axes)


def _save(fig: Any, path: Path) -> Any:
    """Write ``fig`` as a PNG; returns it (the tests inspect what was drawn)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # the Agg canvas: PNGs without a display, whatever pyplot's backend is
    fig.savefig(path, format="png", dpi=100, metadata={"Software": None})
    return fig


def _label_inches(labels: list[str]) -> float:
    """About how wide the longest of ``labels`` is at the default font size (10 pt), in inches: the figure is
    made that much wider, so that long configuration names do not crush the axes (or collapse the layout)."""
    return 0.3 + 0.085 * max((len(label) for label in labels), default=0)


def _colours(configurations: list[str]) -> dict[str, Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10"]
    return {c: cmap(i % 10) for i, c in enumerate(configurations)}


def plot_sample_efficiency(a: Analysis, path: Path) -> Any:
    """IQM over env steps with its band, one panel per env. Runs that logged one point each have no curve:
    their points are drawn, and the panel says so."""
    d = a.data
    # many or long labels (contenders read from marl-eval files) would cover the curves: a legend below them
    below = len(a.configurations) > LEGEND_INSIDE_MAX or max(map(len, a.configurations), default=0) > LABEL_INSIDE_MAX
    fig, axes = _figure(len(a.envs), height=3.6 + (0.5 + 0.22 * len(a.configurations) if below else 0.0),
                        width=7.5 if below else 5.0)
    colours = _colours(a.configurations)
    for ax, env in zip(axes, a.envs):
        drawn, single = 0, 0
        for conf in a.configurations:
            cells = [s for s in a.included.get((conf, env), []) if s.result and s.result.xs]
            if not cells:
                continue
            curves = [(s.result.xs, s.result.ys) for s in cells]  # type: ignore[union-attr]
            try:
                grid, values = shared_curves(curves) if all(len(xs) > 1 for xs, _ in curves) else ((), None)
            except ValueError:
                grid, values = (), None
            if len(grid) < 2:  # one point per run (or no shared range): the points themselves
                xs = [float(x) for xs_, _ in curves for x in xs_]
                ys = [float(y) for _, ys_ in curves for y in ys_]
                ax.plot(xs, ys, linestyle="none", marker="o", color=colours[conf], alpha=0.8,
                        label=f"{conf} ({len(cells)} seeds, points)")
                single += all(len(x) == 1 for x, _ in curves)
                drawn += 1
                continue
            point, low, high = stats.curve_intervals(values[:, None, :], stats.iqm, d.reps, d.confidence,
                                                     stats.derived_seed(f"curve:{env}:{conf}", d.seed))
            ax.plot(grid, point, color=colours[conf], label=f"{conf} ({len(cells)} seeds)")
            ax.fill_between(grid, low, high, color=colours[conf], alpha=0.2, linewidth=0)
            drawn += 1
        ax.set_title(env)
        ax.set_xlabel("env steps")
        ax.set_ylabel(f"IQM of {d.metric}")
        if drawn and below:
            ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
        elif drawn:
            ax.legend(fontsize="small")
        else:
            ax.text(0.5, 0.5, "no curves", ha="center", va="center", transform=ax.transAxes)
        if single:
            ax.text(0.5, 0.02, "only one point per run: no curve to draw", ha="center", va="bottom",
                    fontsize="small", transform=ax.transAxes)
    return _save(fig, path)


def _interval_bars(ax: Any, labels: list[str], ivs: list[stats.Interval], colours: list[Any]) -> None:
    for i, (iv, colour) in enumerate(zip(ivs, colours)):
        ax.plot([float(iv.low), float(iv.high)], [i, i], color=colour, linewidth=6, alpha=0.5,
                solid_capstyle="butt")
        ax.plot([float(iv.point)], [i], marker="|", color="black", markersize=14)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_ylim(-0.7, len(labels) - 0.3)
    ax.invert_yaxis()


def plot_aggregates(a: Analysis, path: Path) -> Any:
    titles = {k: t for k, (t, _) in metric_set(a.normalised, per_env=False).items()}
    fig, axes = _figure(len(titles), width=3.2, height=0.5 * len(a.configurations) + 1.6,
                        labels=_label_inches(a.configurations))
    colours = _colours(a.configurations)
    for ax, (key, title) in zip(axes, titles.items()):
        present = [c for c in a.configurations if c in a.aggregate[key]]
        _interval_bars(ax, present, [a.aggregate[key][c] for c in present], [colours[c] for c in present])
        ax.set_title(f"{title}{' (normalised)' if a.normalised else ''}")
        if ax is not axes[0]:
            ax.set_yticklabels([])
    return _save(fig, path)


def plot_performance_profiles(a: Analysis, path: Path) -> Any:
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
    return _save(fig, path)


def plot_probability_of_improvement(a: Analysis, path: Path) -> Any:
    pairs = [(x, y) for x in a.configurations for y in a.configurations if (x, y) in a.poi]
    labels = [f"P({x} > {y})" for x, y in pairs]
    fig, axes = _figure(1, width=4.5, height=0.45 * len(pairs) + 1.6, labels=_label_inches(labels))
    ax = axes[0]
    if pairs:
        colours = _colours(a.configurations)
        _interval_bars(ax, labels, [a.poi[p] for p in pairs], [colours[x] for x, _ in pairs])
        ax.axvline(0.5, color="grey", linestyle="--", linewidth=1)
        ax.set_xlim(-0.04, 1.04)
        ax.set_xticks([0, 0.25, 0.5, 0.75, 1])
        ax.set_xlabel("probability (0.5: neither tends to win)")
    else:
        ax.text(0.5, 0.5, "fewer than two configurations with data", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_title("probability of improvement")
    return _save(fig, path)


PLOTTERS: dict[str, Callable[[Analysis, Path], Any]] = {
    "sample_efficiency.png": plot_sample_efficiency, "aggregates.png": plot_aggregates,
    "performance_profiles.png": plot_performance_profiles,
    "probability_of_improvement.png": plot_probability_of_improvement,
}
