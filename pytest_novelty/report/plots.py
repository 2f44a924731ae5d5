"""PNG plots per suite: quality against originality with equal-novelty curves, and a novelty histogram.

Points of equal novelty h (the harmonic mean of quality q and originality o) lie on q = h·o / (2o − h):
the scatter draws those curves (:data:`NOVELTY_LEVELS`), so a reader sees whether the candidate moved
towards better or merely different output. matplotlib is imported inside the functions and drives
the Agg canvas directly (no pyplot, no global backend switch), so this module imports for free and
works without a display.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pytest_novelty.infra.storage import atomic_write
from pytest_novelty.pipeline.suite_data import GenerationArrays, SuiteData, sweep_points
from pytest_novelty.report.data import as_vector

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: Pixel size of every plot (width, height) at :data:`DPI`.
SIZE = (720, 540)
DPI = 100
NOVELTY_LEVELS = (0.2, 0.4, 0.6, 0.8)
CANDIDATE_COLOR = "#1f77b4"
BASELINE_COLOR = "#ff7f0e"


def save_png(figure: Figure, path: Path) -> None:
    """Render ``figure`` to ``path`` as PNG, atomically."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    atomic_write(path, lambda fh: figure.savefig(fh, format="png", dpi=DPI))


def finish(figure: Figure, path: str | Path, *, title: str, xlabel: str, ylabel: str, legend: Any = "best") -> Path:
    """Label the axes, title the plot, add the legend and save it to ``path``; returns the path."""
    (ax,) = figure.axes
    ax.set(xlabel=xlabel, ylabel=ylabel, title=title)
    ax.legend(loc=legend, fontsize=8)
    out = Path(path)
    save_png(figure, out)
    return out


def new_figure() -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(SIZE[0] / DPI, SIZE[1] / DPI), dpi=DPI, layout="constrained")


def _pairs(arrays: GenerationArrays) -> tuple[np.ndarray, np.ndarray]:
    q, o = as_vector(arrays.quality), as_vector(arrays.originality)
    if q.size != o.size:
        raise ValueError(f"quality has {q.size} values but originality {o.size}")
    keep = ~(np.isnan(q) | np.isnan(o))
    return o[keep], q[keep]


def _series(data: SuiteData) -> list[tuple[str, GenerationArrays, str]]:
    series = [("candidate", data.candidate, CANDIDATE_COLOR)]
    if data.baseline is not None:
        name = f"baseline {data.baseline.model}" if data.baseline.model else "baseline"
        series.append((name, data.baseline, BASELINE_COLOR))
    return series


def plot_quality_originality(path: str | Path, suite: str, data: SuiteData) -> Path:
    """Scatter of per-generation quality (y) against originality (x) with equal-novelty curves."""
    figure = new_figure()
    ax = figure.add_subplot()
    grid = np.linspace(0.0, 1.0, 201)
    o_grid, q_grid = np.meshgrid(grid, grid)
    total = o_grid + q_grid
    h_grid = np.divide(2 * o_grid * q_grid, total, out=np.zeros_like(total), where=total != 0)
    contours = ax.contour(o_grid, q_grid, h_grid, levels=NOVELTY_LEVELS, colors="0.6", linewidths=0.8)
    ax.clabel(contours, fmt=lambda level: f"novelty {level:.1f}", fontsize=7)
    n = data.n
    for label, arrays, color in _series(data):
        o, q = _pairs(arrays)
        answers = arrays.answers
        counted = f"{o.size} of {answers} answers: scored, with a {n}-gram" if n else f"{o.size} of {answers} answers"
        ax.scatter(o, q, s=14, alpha=0.45, color=color, edgecolors="none", label=f"{label} ({counted})")
        if o.size:
            ax.scatter([o.mean()], [q.mean()], s=160, marker="X", color=color, edgecolors="black", linewidths=0.8,
                       label=f"{label} mean", zorder=3)
    ax.set(xlim=(0.0, 1.0), ylim=(0.0, 1.0))
    ax.grid(alpha=0.2)
    return finish(
        figure, path, title=f"{suite}: quality against originality",
        xlabel=f"originality@{n}" if n else "originality", ylabel="quality", legend="lower left",
    )


def plot_novelty_histogram(path: str | Path, suite: str, data: SuiteData) -> Path:
    """Histogram of per-generation novelty, candidate filled and baseline outlined, means marked."""
    figure = new_figure()
    ax = figure.add_subplot()
    bins = [i / 20 for i in range(21)]
    n = data.n
    for label, arrays, color in _series(data):
        values = as_vector(arrays.novelty)
        total = values.size
        values = values[~np.isnan(values)]
        short = int(np.isnan(as_vector(arrays.originality)).sum())
        counted = f"{values.size} of {total} scored answers"
        if short:
            counted += f", {short} with no {n}-gram at novelty 0"
        if label == "candidate":
            ax.hist(values, bins=bins, color=color, alpha=0.7, label=f"{label} ({counted})")
        else:
            ax.hist(values, bins=bins, histtype="step", color=color, linewidth=2, label=f"{label} ({counted})")
        if values.size:
            ax.axvline(float(values.mean()), color=color, linestyle="--", linewidth=1.2,
                       label=f"{label} mean {values.mean():.3f}")
    ax.set_xlim(0.0, 1.0)
    return finish(
        figure, path, title=f"{suite}: novelty of each generation",
        xlabel=f"novelty@{n} per generation" if n else "novelty per generation", ylabel="generations",
    )


def plot_sweep(path: str | Path, base: str, parameter: str, points: list[tuple[float, float, float]]) -> Path:
    """Mean novelty and mean quality of a swept suite against the swept parameter, from ``points``
    of (parameter value, mean novelty, mean quality)."""
    figure = new_figure()
    ax = figure.add_subplot()
    points = sorted(points)
    xs = [p[0] for p in points]
    ax.plot(xs, [p[1] for p in points], marker="o", color=CANDIDATE_COLOR, label="novelty (mean)")
    ax.plot(xs, [p[2] for p in points], marker="s", linestyle="--", color=BASELINE_COLOR, label="quality (mean)")
    ax.set_ylim(0.0, 1.0)
    title = f"{base}: sweep over {parameter}"
    return finish(figure, path, title=title, xlabel=parameter, ylabel="mean over generations")


def _sweep_points(suites_data: Mapping[str, SuiteData]) -> dict[tuple[str, str], list[tuple[float, float, float]]]:
    """Per swept suite file and parameter: (value, mean novelty, mean quality) of each sweep value."""
    groups: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    for key, runs in sweep_points(list(suites_data.values())).items():
        for data in runs:
            nov, qual = as_vector(data.candidate.novelty), as_vector(data.candidate.quality)
            value = float((data.info.sweep or {})["value"])
            groups.setdefault(key, []).append((value, float(np.nanmean(nov)) if nov.size else np.nan,
                                               float(np.nanmean(qual))))  # fmt: skip
    return groups


def write_plots(out_dir: str | Path, suites_data: Mapping[str, SuiteData]) -> dict[str, dict[str, Path]]:
    """``<suite>-quality-originality.png`` and ``<suite>-novelty-histogram.png`` for every suite with
    quality and originality values, ``<base>-sweep.png`` for a swept suite; suite → kind → file."""
    folder = Path(out_dir)
    written: dict[str, dict[str, Path]] = {}
    for suite, data in sorted(suites_data.items()):
        if not data.candidate.quality or not data.candidate.originality:
            continue
        written[suite] = {
            "quality_originality": plot_quality_originality(folder / f"{suite}-quality-originality.png", suite, data),
            "novelty_histogram": plot_novelty_histogram(folder / f"{suite}-novelty-histogram.png", suite, data),
        }
    for (base, parameter), points in sorted(_sweep_points(suites_data).items()):
        written.setdefault(base, {})["sweep"] = plot_sweep(folder / f"{base}-sweep.png", base, parameter, points)
    return written
