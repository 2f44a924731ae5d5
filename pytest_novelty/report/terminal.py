"""The end-of-session table: one row per gated metric.

Rows are plain dicts. Every row carries ``suite``, ``metric``, ``value``, ``op``, ``threshold`` and
``passed`` (the case's overall outcome). A row compared with a snapshot or a baseline checkpoint
also carries ``baseline``, ``delta``, ``ci`` ([low, high] or None), ``p_value``, ``status`` (see
:data:`pytest_novelty.gate.regression.STATUSES`) and ``verdict`` (the status in words). Without
any compared row the table keeps its threshold-only layout, one block per suite.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

COMPARISON_KEYS = ("baseline", "delta", "ci", "verdict")


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _signed(value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{float(value):+.4f}"


def format_ci(ci: Sequence[float] | None) -> str:
    """``[-0.090, -0.050]``, or ``n/a`` when no interval was computed."""
    if not ci:
        return "n/a"
    low, high = ci
    return f"[{low:+.3f}, {high:+.3f}]"


def has_comparison(rows: Iterable[Mapping[str, Any]]) -> bool:
    """Whether any row was compared with a snapshot or a baseline (and so needs those columns)."""
    return any(any(row.get(key) is not None for key in COMPARISON_KEYS) for row in rows)


def threshold_met(row: Mapping[str, Any]) -> bool:
    """Whether the row's value meets its threshold (a row without one meets it; NaN never does)."""
    if row.get("op") is None or row.get("threshold") is None:
        return True
    value = row.get("value")
    if value is None or math.isnan(float(value)):
        return False
    return float(value) >= row["threshold"] if row["op"] == ">=" else float(value) <= row["threshold"]


def verdict_text(row: Mapping[str, Any]) -> str:
    """What the verdict cell says: the threshold outcome and the comparison's verdict, FAIL first."""
    notes = []
    if not threshold_met(row):
        notes.append(f"FAIL {row['op']} {row['threshold']:g}")
    if row.get("status") == "regressed":
        notes.append("FAIL regression")
    elif row.get("verdict"):
        notes.append(str(row["verdict"]))
    if not row.get("passed", True) and not any(note.startswith("FAIL") for note in notes):
        notes.insert(0, "FAIL")
    return "; ".join(notes) or "pass"


def _lines(cells: list[tuple[str, ...]], indent: str) -> list[str]:
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    lines = []
    for i, cell in enumerate(cells):
        lines.append(indent + "  ".join(text.ljust(w) for text, w in zip(cell, widths, strict=True)).rstrip())
        if i == 0:
            lines.append(indent + "  ".join("-" * w for w in widths))
    return lines


def _threshold_cell(row: Mapping[str, Any]) -> str:
    if row.get("op") is None or row.get("threshold") is None:
        return ""
    return f"{row['op']} {row['threshold']:g}"


def _comparison_table(rows: list[Mapping[str, Any]], headers: Mapping[str, str] | None) -> list[str]:
    lines = [
        f"suite {suite}: {headers[suite]}"
        for suite in sorted({str(r["suite"]) for r in rows})
        if headers and suite in headers
    ]
    cells: list[tuple[str, ...]] = [("suite", "metric", "value", "threshold", "baseline", "delta", "CI", "verdict")]
    for row in sorted(rows, key=lambda r: (str(r["suite"]), str(r["metric"]), str(r.get("op")))):
        cells.append(
            (
                str(row["suite"]),
                str(row["metric"]),
                _fmt(row.get("value")),
                _threshold_cell(row),
                _fmt(row.get("baseline")),
                _signed(row.get("delta")),
                format_ci(row.get("ci")),
                verdict_text(row),
            )
        )
    return [*lines, *_lines(cells, "  "), ""]


def render_table(rows: Iterable[Mapping[str, Any]], headers: Mapping[str, str] | None = None) -> list[str]:
    """Lines of a plain-text table of the gated metrics.

    ``headers`` maps a suite name to a line shown with it (model, judge, index). Rows without
    comparison fields give one block per suite with columns metric, value, threshold, result; as
    soon as one row carries ``baseline``/``delta``/``ci``/``verdict`` the table has one row per
    case with columns suite, metric, value, threshold, baseline, delta, CI and verdict.
    """
    rows = list(rows)
    if has_comparison(rows):
        return _comparison_table(rows, headers)
    by_suite: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_suite.setdefault(str(row["suite"]), []).append(row)
    lines: list[str] = []
    for suite in sorted(by_suite):
        cells: list[tuple[str, ...]] = [("metric", "value", "threshold", "result")]
        for row in sorted(by_suite[suite], key=lambda r: str(r["metric"])):
            verdict = "pass" if row["passed"] else "FAIL"
            cells.append((str(row["metric"]), _fmt(row["value"]), f"{row['op']} {row['threshold']:g}", verdict))
        lines.append(f"suite {suite}" + (f"  ({headers[suite]})" if headers and suite in headers else ""))
        lines.extend(_lines(cells, "  "))
        lines.append("")
    return lines
