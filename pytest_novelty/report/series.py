"""The checkpoint-series part of the report: a table per suite, ``<suite>-series.png`` and
``report.json["series"]``.

Reads the ``series`` list that :func:`pytest_novelty.gate.series.suite_series` puts in a suite's data
(one entry per checkpoint, in step order) and nothing else, so it works the same on the xdist
controller as in one process.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_novelty.pipeline.suite_data import SuiteData


def series_of(suites_data: Mapping[str, SuiteData] | None) -> dict[str, list[dict[str, Any]]]:
    """Per suite with a series (sorted by name), its entries in step order."""
    return {name: sorted(data.series, key=lambda e: int(e["step"]))
            for name, data in sorted((suites_data or {}).items()) if data.series}  # fmt: skip


def series_report(suites_data: Mapping[str, SuiteData] | None) -> list[dict[str, Any]]:
    """``report.json["series"]``: one entry per checkpoint in step order, ``{"step", "model",
    "suites": {suite: {"metrics", "means", "change"}}}``; empty without a series."""
    by_step: dict[int, dict[str, Any]] = {}
    for suite, entries in series_of(suites_data).items():
        for entry in entries:
            step = int(entry["step"])
            slot = by_step.setdefault(step, {"step": step, "model": entry.get("model"), "suites": {}})
            slot["suites"][suite] = {k: entry.get(k) for k in ("metrics", "means", "change", "generated_rows")}
    return [by_step[step] for step in sorted(by_step)]


def _num(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.4f}"


def _change(change: Mapping[str, Any] | None) -> str:
    if not change or change.get("delta") is None:
        return ""
    text = f" ({float(change['delta']):+.4f}"
    ci = change.get("delta_ci")
    if ci:  # the interval of the gated statistic's change (see gate.series); null: a bound too few prompts set
        low, high = (-math.inf if ci[0] is None else ci[0]), (math.inf if ci[1] is None else ci[1])
        text += f" [{float(low):+.4f}, {float(high):+.4f}]"
    if change.get("status") == "regressed":
        text += ", regression"
    return text + ")"


def series_rows(entries: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """A suite's series as a table (``report.md``, the HTML report): the head (step, each gated metric,
    checkpoint) and a row per checkpoint, each metric with its paired change from the previous
    checkpoint (delta and CI in brackets)."""
    metrics = list(entries[-1].get("metrics") or {})
    rows = []
    for entry in entries:
        values, changes = entry.get("metrics") or {}, entry.get("change") or {}
        cells = [str(entry["step"]), *(_num(values.get(m)) + _change(changes.get(m)) for m in metrics)]
        rows.append([*cells, Path(str(entry.get("model") or "")).name])
    return ["step", *metrics, "checkpoint"], rows


def series_tables(suites_data: Mapping[str, SuiteData] | None) -> list[str]:
    """A Markdown table per suite with a series (:func:`series_rows`)."""
    lines: list[str] = []
    for suite, entries in series_of(suites_data).items():
        head, rows = series_rows(entries)
        lines += ["", f"Series of suite {suite} (change from the previous checkpoint, paired, with its CI):", "",
                  "| " + " | ".join(head) + " |", "|" + "|".join(["---"] * len(head)) + "|"]
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return lines


def plot_series(path: str | Path, suite: str, entries: Sequence[Mapping[str, Any]]) -> Path:
    """Left: mean quality, originality and novelty against step. Right: the quality-originality
    frontier, one point per checkpoint coloured by step, joined in step order."""
    from pytest_novelty.report.plots import SIZE, new_figure, save_png

    figure = new_figure()
    figure.set_size_inches(SIZE[0] * 1.5 / 100, SIZE[1] / 100)
    left, right = figure.subplots(1, 2)
    steps = [int(e["step"]) for e in entries]
    names = list((entries[-1].get("means") or {}).keys())
    markers = ("o", "s", "^")
    for marker, name in zip(markers, names, strict=False):
        values = [(e.get("means") or {}).get(name) for e in entries]
        left.plot(steps, [float("nan") if v is None else v for v in values], marker=marker, label=name)
    left.set(xlabel="step", ylabel="mean over generations", ylim=(0.0, 1.0), title=f"{suite}: across the run")
    left.legend(loc="best", fontsize=8)
    left.grid(alpha=0.2)
    if len(names) >= 2:
        quality = [(e.get("means") or {}).get(names[0]) for e in entries]
        originality = [(e.get("means") or {}).get(names[1]) for e in entries]
        points = [(o, q, s) for o, q, s in zip(originality, quality, steps, strict=True)
                  if o is not None and q is not None]
        if points:
            xs, ys, cs = zip(*points, strict=True)
            right.plot(xs, ys, color="0.7", linewidth=1, zorder=1)
            dots = right.scatter(xs, ys, c=cs, cmap="viridis", s=90, edgecolors="black", zorder=2)
            figure.colorbar(dots, ax=right, label="step")
            for x, y, s in points:
                right.annotate(str(s), (x, y), textcoords="offset points", xytext=(5, 5), fontsize=7)
        right.set(xlabel=names[1], ylabel=names[0])
    right.set(xlim=(0.0, 1.0), ylim=(0.0, 1.0), title="quality-originality frontier")
    right.grid(alpha=0.2)
    out = Path(path)
    save_png(figure, out)
    return out


def write_series_plots(
    out_dir: str | Path, suites_data: Mapping[str, SuiteData] | None
) -> dict[str, dict[str, Path]]:
    """``<suite>-series.png`` for every suite with a series; returns suite → {"series": file}."""
    folder = Path(out_dir)
    return {suite: {"series": plot_series(folder / f"{suite}-series.png", suite, entries)}
            for suite, entries in series_of(suites_data).items()}
